"""lm-evaluation-harness on its own, in a process that never imports this platform: the peer's side
of every parity comparison.

    python speed/harness_alone.py SPEC.json OUT_FOLDER

SPEC.json holds {"runs": [run, ...]}; each run names its model (`pretrained`: a folder, with
`gguf_file` for a GGUF in it; `tokenizer`, a folder, where not the model's; `dtype`, `device`; or
`replay`: a JSONL file of answers given, {"request_type", "arguments", "response"} a line, which a
model of the harness's `LM` protocol returns for the request of those arguments, a generation's by
its context alone (its budget may have been another's): the harness's own scoring of answers made
elsewhere), its
tasks or groups (from the harness's own tasks, or from the folders of its `include_path` alone), and
the harness's own arguments (`num_fewshot`, `limit`, `batch_size`, `apply_chat_template`,
`fewshot_as_multiturn`, `fewshot_random_seed`). A task's data is pointed at local files as a harness user points it: a
task YAML in a folder of the run's own (`--include_path`) that includes the task's own YAML and
sets only `dataset_path: json`, `dataset_kwargs` (`data_files`: a run's
{task: {split: file}}) and the splits the files do not give to null; a run's `overrides`
({task: {key: value}}) go into the same YAML. The harness then builds and evaluates the tasks with
its own registry (`TaskManager`), templates, samplers, filters and metrics in `simple_evaluate`
(`log_samples`), on its own HF model (`HFLM`).

Written per run into OUT_FOLDER: `NAME.jsonl`, the logged samples, one per line with its task; and
`NAME.json`: the harness's results, its model phase alone in seconds (its `loglikelihood`,
`loglikelihood_rolling` and `generate_until` calls), the tokens its decoder's forward passes saw
(padding included), the harness's version, and the modules that prove the run was the harness's
alone (whether `eval_platform` was ever imported, and where `apply_template` comes from).

`run_alone` (for the parity scripts and tests) writes the spec, runs this file in a fresh Python
process, and reads the files back. This module imports nothing of the platform's, at any time.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# IFEval's sentence splitter (NLTK's punkt_tab), shipped in the project's data/ (offline)
NLTK_DATA = Path(__file__).resolve().parents[1] / "data" / "nltk_data"
SPLIT_KEYS = ("training_split", "validation_split", "test_split", "fewshot_split")
MODEL_PHASES = ("loglikelihood", "loglikelihood_rolling", "generate_until")


class TokenCounter:
    """Tokens every forward pass of a network's decoder sees (its input_ids, or the embeddings a
    multimodal model hands its language model; padding included)."""

    def __init__(self, network: Any) -> None:
        self.tokens = 0
        network.get_decoder().register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, module: Any, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else (args[0] if args else None)
        if ids is not None:
            self.tokens += ids.numel()
        elif kwargs.get("inputs_embeds") is not None:
            self.tokens += kwargs["inputs_embeds"].shape[:-1].numel()


class NoNetwork:
    """A replayed model's forward passes: none."""

    tokens = 0


class ModelPhase:
    """While in use, the seconds a harness model spends in its model phase alone: its request
    methods, not the building of tasks and requests around them."""

    def __init__(self, lm: Any) -> None:
        self.lm, self.seconds = lm, 0.0

    def __enter__(self) -> ModelPhase:
        for name in MODEL_PHASES:
            setattr(self.lm, name, self._timed(getattr(self.lm, name)))
        return self

    def __exit__(self, *exc: object) -> None:
        for name in MODEL_PHASES:
            delattr(self.lm, name)  # the class's own methods again

    def _timed(self, method: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return call


@dataclass
class HarnessSide:
    """One run of the harness alone, read back: its samples by (task, doc_id, filter), its results
    (tasks and groups), its model phase and tokens, and what it imported."""

    samples: dict[tuple[str, int, str], dict[str, Any]]
    results: dict[str, Any]
    model_seconds: float
    forward_tokens: int
    lm_eval_version: str
    platform_imported: bool
    apply_template_module: str


def run_script(script: str, spec: dict[str, Any], folder: Path, timeout: float, **env: str) -> None:
    """`python SCRIPT SPEC.json FOLDER` in a fresh process, its spec written to FOLDER/spec.json,
    NLTK told where the project's punkt_tab is (as a harness user tells it); a failure raised with
    the end of its error output."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "spec.json"
    path.write_text(json.dumps(spec, indent=1))
    nltk = os.pathsep.join(p for p in (str(NLTK_DATA), os.environ.get("NLTK_DATA", "")) if p)
    completed = subprocess.run(
        [sys.executable, script, str(path), str(folder)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "NLTK_DATA": nltk, "TQDM_DISABLE": "1", **env},
    )
    if completed.returncode:
        raise RuntimeError(
            f"{Path(script).name} failed (exit {completed.returncode}) on {path}:\n{completed.stderr[-6000:]}"
        )


def run_alone(runs: list[dict[str, Any]], folder: Path, timeout: float = 3600) -> dict[str, HarnessSide]:
    """The runs in one fresh process of this file (one model load per distinct model), each read
    back by its name."""
    run_script(__file__, {"runs": runs}, folder, timeout)
    sides = {}
    for run in runs:
        report = json.loads((folder / f"{run['name']}.json").read_text())
        rows = [json.loads(line) for line in (folder / f"{run['name']}.jsonl").read_text().splitlines()]
        sides[run["name"]] = HarnessSide(
            samples={(s["task"], int(s["doc_id"]), s["filter"]): s for s in rows},
            results=report["results"],
            model_seconds=report["model_seconds"],
            forward_tokens=report["forward_tokens"],
            lm_eval_version=report["lm_eval_version"],
            platform_imported=report["platform_imported"],
            apply_template_module=report["apply_template_module"],
        )
    return sides


# ---- the harness's process -------------------------------------------------------------------


def task_yamls(run: dict[str, Any], registry: Any, folder: Path) -> None:
    """A YAML per task and group the run evaluates (a group's members too), each including its own
    YAML from the harness's registry; a task the run points at local files or overrides sets those
    keys over it."""
    from lm_eval.tasks._index import Kind
    from lm_eval.tasks._yaml_loader import load_yaml

    data_files, overrides = run.get("data_files", {}), run.get("overrides", {})
    pending, written = list(run["tasks"]), set()
    while pending:
        name = pending.pop()
        if name in written:
            continue
        entry = registry.task_index[name]
        own = load_yaml(entry.yaml_path, resolve_func=False)
        config: dict[str, Any] = {"include": str(entry.yaml_path)}
        if entry.kind == Kind.GROUP:
            pending += [member if isinstance(member, str) else member["task"] for member in own.get("task", [])]
        else:
            config.update(task=name, **overrides.get(name, {}))
            if name in data_files:
                files = data_files[name]
                config.update(dataset_path="json", dataset_name=None, dataset_kwargs={"data_files": files})
                config.update({key: None for key in SPLIT_KEYS if own.get(key) and own[key] not in files})
        (folder / f"{name}.yaml").write_text(json.dumps(config, indent=1))  # JSON is YAML
        written.add(name)
    unknown = (set(data_files) | set(overrides)) - written
    if unknown:
        raise ValueError(f"data_files or overrides name {sorted(unknown)}, which the run does not evaluate")


def replay_model(path: str) -> Any:
    """A model of the harness's `LM` protocol that answers each request with the answer the file
    gives for its arguments, and fails naming a request it has none for."""
    from lm_eval.api.model import LM

    def key_of(request_type: str, arguments: list[Any]) -> str:
        return json.dumps([request_type, arguments[0] if request_type == "generate_until" else arguments])

    answers = {}
    for line in Path(path).read_text().splitlines():
        given = json.loads(line)
        answers[key_of(given["request_type"], given["arguments"])] = given["response"]

    class Replay(LM):
        def _given(self, request_type: str, requests: list[Any]) -> list[Any]:
            found = []
            for request in requests:
                if (key := key_of(request_type, list(request.args))) not in answers:
                    raise KeyError(f"{path} has no answer for the {request_type} request {key[:300]}")
                found.append(answers[key])
            return found

        def loglikelihood(self, requests: list[Any]) -> list[Any]:
            return [tuple(answer) for answer in self._given("loglikelihood", requests)]

        def loglikelihood_rolling(self, requests: list[Any]) -> list[Any]:
            return self._given("loglikelihood_rolling", requests)

        def generate_until(self, requests: list[Any]) -> list[Any]:
            return self._given("generate_until", requests)

    return Replay()


def load_model(model: dict[str, Any], batch_size: int) -> Any:
    from lm_eval.models.huggingface import HFLM

    if "replay" in model:
        return replay_model(model["replay"])
    return HFLM(
        pretrained=model["pretrained"],
        tokenizer=model.get("tokenizer"),
        gguf_file=model.get("gguf_file"),
        batch_size=batch_size,
        device=model.get("device", "cpu"),
        dtype=model.get("dtype", "float32"),
    )


@functools.lru_cache(maxsize=8)
def registry_of(include_path: tuple[str, ...]) -> Any:
    """The harness's registry of its own tasks, or (a run's `include_path`) of those folders alone."""
    from lm_eval.tasks import TaskManager

    if include_path:
        return TaskManager(include_path=list(include_path), include_defaults=False)
    return TaskManager()


def evaluate_run(run: dict[str, Any], lm: Any, counter: TokenCounter | NoNetwork, out: Path) -> None:
    """The run's tasks evaluated by `simple_evaluate` from a registry of the run's own YAML files,
    each including its YAML in the harness's tasks (or the run's `include_path`)."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager
    from lm_eval.utils import handle_non_serializable

    with tempfile.TemporaryDirectory() as own_tasks:
        task_yamls(run, registry_of(tuple(run.get("include_path", ()))), Path(own_tasks))
        registry = TaskManager(include_path=own_tasks, include_defaults=False)
        before = counter.tokens
        with ModelPhase(lm) as phase:
            results = simple_evaluate(
                model=lm,
                tasks=list(run["tasks"]),
                task_manager=registry,
                num_fewshot=run.get("num_fewshot"),
                limit=run.get("limit"),
                log_samples=True,
                bootstrap_iters=0,
                batch_size=run.get("batch_size", 8),
                apply_chat_template=run.get("apply_chat_template", False),
                fewshot_as_multiturn=run.get("fewshot_as_multiturn", False),
                fewshot_random_seed=run.get("fewshot_random_seed", 1234),
            )
    assert results is not None
    with (out / f"{run['name']}.jsonl").open("w", encoding="utf-8") as lines:
        for task, samples in results["samples"].items():
            for sample in samples:
                lines.write(json.dumps({"task": task, **sample}, default=handle_non_serializable) + "\n")
    import lm_eval
    import lm_eval.utils

    report = {
        "results": json.loads(json.dumps(results["results"], default=handle_non_serializable)),
        "model_seconds": phase.seconds,
        "forward_tokens": counter.tokens - before,
        "lm_eval_version": lm_eval.__version__,
        "platform_imported": any(name.split(".")[0] == "eval_platform" for name in sys.modules),
        "apply_template_module": lm_eval.utils.apply_template.__module__,
    }
    (out / f"{run['name']}.json").write_text(json.dumps(report, indent=1))


def main(spec_file: str, out_folder: str) -> None:
    import logging

    logging.basicConfig(level=logging.WARNING)
    try:  # IFEval's language checks use langdetect, random between runs unless seeded
        from langdetect import DetectorFactory

        DetectorFactory.seed = 0
    except ImportError:
        pass
    runs = json.loads(Path(spec_file).read_text())["runs"]
    models: dict[str, tuple[Any, TokenCounter | NoNetwork]] = {}
    for run in runs:
        key = json.dumps([run["model"], run.get("batch_size", 8)], sort_keys=True)
        if key not in models:
            lm = load_model(run["model"], run.get("batch_size", 8))
            models[key] = (lm, TokenCounter(lm.model) if hasattr(lm, "model") else NoNetwork())
        evaluate_run(run, *models[key], Path(out_folder))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main(sys.argv[1], sys.argv[2])
