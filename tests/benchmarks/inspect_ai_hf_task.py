"""A GSM8K chat task run by inspect_ai itself, its `hf` provider running the local model offline,
for tests/benchmarks/test_exports.py's round trip.

Run in the peer interpreter (.venv-peers/bin/python, with torch and transformers), never beside
eval_platform: `python -I inspect_ai_hf_task.py DOCUMENTS.json MODEL_FOLDER LOG_DIR MAX_TOKENS` runs
`inspect_ai.eval` on a task named by DOCUMENTS.json's `task`, whose samples are its `documents` (each
{"id", "system", "user", "target"}: a system and a user turn, and the reference number), answered by
inspect_ai's `generate` through `hf/<folder's name>` loaded from MODEL_FOLDER (float32 on the CPU,
greedy, one request at a time), and scored as the benchmark's declaration scores a chat answer: the
number after `####` (strict-match) and the last number (flexible-extract), each without commas or a
dollar sign, against the reference. Prints the log's location.
"""

import json
import re
import sys
from pathlib import Path

from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import TaskState, generate

assert not any(name.split(".")[0] == "eval_platform" for name in sys.modules)

NAMES = ("exact_match,strict-match", "exact_match,flexible-extract")


def number(text: str) -> str:
    value = text.replace(",", "").replace("$", "").strip().rstrip(".")
    return value.split(".")[0] if re.fullmatch(r"-?\d+\.0+", value) else value


def extracted(completion: str) -> dict[str, str | None]:
    strict = re.search(r"####\s*\$?(-?[\d,]*\.?\d+)", completion)
    numbers = re.findall(r"-?\$?\d[\d,]*(?:\.\d+)?", completion)
    return {
        "exact_match,strict-match": number(strict.group(1)) if strict else None,
        "exact_match,flexible-extract": number(numbers[-1]) if numbers else None,
    }


@scorer(metrics={name: [mean()] for name in NAMES})
def declared_filters():
    async def score(state: TaskState, target: Target) -> Score:
        answers = extracted(state.output.completion.strip())
        values = {name: float(answer is not None and answer == target.text) for name, answer in answers.items()}
        return Score(value=values, answer=answers["exact_match,strict-match"])

    return score


def main(path: str, model_folder: str, log_dir: str, max_tokens: str) -> None:
    given = json.loads(Path(path).read_text(encoding="utf-8"))
    dataset = MemoryDataset(
        [
            Sample(id=d["id"], input=[ChatMessageSystem(content=d["system"]), ChatMessageUser(content=d["user"])],
                   target=d["target"])
            for d in given["documents"]
        ]
    )  # fmt: skip
    task = Task(dataset=dataset, solver=generate(), scorer=declared_filters(), name=given["task"])
    (log,) = eval(
        task,
        model=f"hf/{Path(model_folder).name}",
        model_args={"model_path": model_folder, "device": "cpu", "dtype": "float32", "do_sample": False},
        max_tokens=int(max_tokens),
        max_connections=1,
        log_dir=log_dir,
        display="none",
    )
    assert log.status == "success", log.error
    print(json.dumps({"log": log.location}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
