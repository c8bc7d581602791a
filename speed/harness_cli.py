"""lm-evaluation-harness's own command line, as a user runs it, on local data: the output folder
(`--output_path --log_samples`) the platform imports. The harness runs in a process that never
imports this platform.

    python speed/harness_cli.py SPEC.json OUT_FOLDER

SPEC.json holds one run as speed/harness_alone.py takes it (`model`: `pretrained`, `gguf_file`,
`dtype`; `tasks`; `data_files`, `overrides`; `num_fewshot`, `limit`, `batch_size`; and `gen_kwargs`,
the command line's generation settings for every generation task, e.g. {"max_gen_toks": 96}). Its task YAMLs
(each including the harness's own and pointing at the local files) are written to
OUT_FOLDER/tasks, and `lm-eval run` writes its results and samples under OUT_FOLDER/output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def command_line(run: dict[str, Any], tasks_folder: Path, output: Path) -> list[str]:
    """The `lm-eval run` command line of the run."""
    model = run["model"]
    args = ",".join(
        f"{key}={model[key]}" for key in ("pretrained", "gguf_file", "tokenizer", "dtype") if model.get(key)
    )
    line = [sys.executable, "-m", "lm_eval", "run", "--model", "hf", "--model_args", args]
    line += ["--tasks", ",".join(run["tasks"]), "--include_path", str(tasks_folder)]
    line += ["--output_path", str(output), "--log_samples", "--batch_size", str(run.get("batch_size", 8))]
    line += ["--device", model.get("device", "cpu")]
    for option in ("num_fewshot", "limit"):
        if run.get(option) is not None:
            line += [f"--{option}", str(run[option])]
    if run.get("gen_kwargs"):
        line += ["--gen_kwargs", *(f"{key}={value!r}" for key, value in run["gen_kwargs"].items())]
    return line


def run_cli(run: dict[str, Any], folder: Path, timeout: float = 1800) -> Path:
    """The run by the harness's command line in a fresh process of this file; its output folder."""
    from speed.harness_alone import run_script

    run_script(__file__, run, folder, timeout, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    return folder / "output"


def main(spec_file: str, out_folder: str) -> None:
    from harness_alone import registry_of, task_yamls  # beside this file (the script's folder is on the path)

    run = json.loads(Path(spec_file).read_text())
    out = Path(out_folder)
    tasks = out / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    task_yamls(run, registry_of(tuple(run.get("include_path", ()))), tasks)
    completed = subprocess.run(command_line(run, tasks, out / "output"), check=False)
    sys.exit(completed.returncode)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
