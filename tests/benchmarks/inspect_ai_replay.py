"""A log written by inspect_ai itself from answers and scores it is given, for
tests/benchmarks/test_exports.py (no inspect_ai provider runs the platform's model offline here
with the platform's prompts: the log replays the platform's own answers).

Run in the peer interpreter (.venv-peers/bin/python), never beside eval_platform:
`python -I inspect_ai_replay.py SAMPLES.json LOG_DIR` runs `inspect_ai.eval` on a task named by
SAMPLES.json's `task`, whose samples are its `samples` (each {"id", "input", "target", "completion",
"scores": {name: value}}), a solver that answers each with its completion (no model is called) and
a scorer that gives each its scores, and prints the log's location.
"""

import json
import sys

from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ModelOutput
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import Generate, TaskState, solver

assert not any(name.split(".")[0] == "eval_platform" for name in sys.modules)


def main(path: str, log_dir: str) -> None:
    with open(path, encoding="utf-8") as f:
        given = json.load(f)
    by_id = {sample["id"]: sample for sample in given["samples"]}
    names = list(given["samples"][0]["scores"])

    @solver
    def answered():
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            state.output = ModelOutput.from_content("replay/model", by_id[state.sample_id]["completion"])
            return state

        return solve

    @scorer(metrics={name: [mean()] for name in names})
    def replayed():
        async def score(state: TaskState, target: Target) -> Score:
            scores = by_id[state.sample_id]["scores"]
            return Score(value=dict(scores), answer=state.output.completion)

        return score

    dataset = MemoryDataset([Sample(id=s["id"], input=s["input"], target=s["target"]) for s in given["samples"]])
    task = Task(dataset=dataset, solver=answered(), scorer=replayed(), name=given["task"])
    (log,) = eval(task, model="mockllm/model", log_dir=log_dir, display="none")
    assert log.status == "success", log.error
    print(json.dumps({"log": log.location}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
