"""inspect_ai's own figures for items answered several times (its epochs), for tests/common/test_repeats.py.

Run in the peer interpreter (.venv-peers/bin/python, which `make test` installs), never beside eval_platform:
`python -I inspect_ai_reference.py ITEMS.json` prints JSON. ITEMS.json: a list of items, each
{"id", "subject", "scores": [0/1 per answer], "answers": [str per answer]}, as many answers each.

- inspect_ai's reducers on each item's scores: `mean`, `pass_at(k)` for k = 1..n, `mode` of its first k
  answers;
- its `stderr()` and `stderr(cluster="subject")` on the reduced (mean) scores, as its metrics see
  them, and `stderr(cluster="item")` on every answer's score (a metric of unreduced scores);
- the same mean and clustered stderr from a whole `eval()` (mockllm model, never called; a scorer
  replaying the scores by epoch; epochs reduced by "mean" and "pass_at_k"), which reduces before its metrics.
"""

import json
import sys
import tempfile

import inspect_ai
from inspect_ai import Epochs, Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import (
    SampleScore,
    Score,
    Target,
    mean,
    mean_score,
    mode_score,
    pass_at,
    scorer,
    stderr,
)
from inspect_ai.solver import Generate, TaskState, solver

assert not any(name.split(".")[0] == "eval_platform" for name in sys.modules)


def sample_scores(values, ids, metadata):
    return [
        SampleScore(score=Score(value=v), sample_id=i, sample_metadata=m)
        for v, i, m in zip(values, ids, metadata, strict=True)
    ]


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        items = json.load(f)
    n = len(items[0]["scores"])
    ids = [item["id"] for item in items]
    by_id = {item["id"]: item for item in items}

    means = [mean_score()([Score(value=v) for v in item["scores"]]).value for item in items]
    pass_at_k = {
        k: [pass_at(k)([Score(value=v) for v in item["scores"]]).value for item in items] for k in range(1, n + 1)
    }
    mode = {
        k: [mode_score()([Score(value=a) for a in item["answers"][:k]]).value for item in items]
        for k in range(1, n + 1)
    }
    reduced = sample_scores(means, ids, [{"subject": item["subject"]} for item in items])
    answers = sample_scores(
        [v for item in items for v in item["scores"]],
        [f"{item['id']}/{e}" for item in items for e in range(n)],
        [{"item": item["id"]} for item in items for _ in range(n)],
    )

    @scorer(metrics=[mean(), stderr(cluster="subject")])
    def replay():
        async def score(state: TaskState, target: Target) -> Score:
            return Score(value=by_id[state.sample_id]["scores"][state.epoch - 1])

        return score

    @solver
    def answered():  # the answers are the scores' already: no model is called
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            return state

        return solve

    task = Task(
        dataset=MemoryDataset(
            [Sample(input="?", id=item["id"], metadata={"subject": item["subject"]}) for item in items]
        ),
        solver=answered(),
        scorer=replay(),
        epochs=Epochs(n, ["mean", *[f"pass_at_{k}" for k in range(1, n + 1)]]),
    )
    with tempfile.TemporaryDirectory() as log_dir:
        (log,) = eval(task, model="mockllm/model", log_dir=log_dir, display="none")
    assert log.status == "success" and log.results is not None, log.error and log.error.message
    whole = {
        score.reducer: {name: metric.value for name, metric in score.metrics.items()} for score in log.results.scores
    }

    json.dump(
        {
            "inspect_ai": inspect_ai.__version__,
            "mean": means,
            "pass_at": pass_at_k,
            "mode": mode,
            "stderr": stderr()(reduced),
            "stderr_subject": stderr(cluster="subject")(reduced),
            "stderr_item_unreduced": stderr(cluster="item")(answers),
            "eval": whole,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main(sys.argv[1])
