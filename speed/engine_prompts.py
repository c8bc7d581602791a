"""The harness's prompts the engine's tests and parity scripts run on, written into the engine's
folders (engine/tests/data, engine/parity/data), so the engine needs nothing of the platform to
build them:

    python speed/engine_prompts.py

GSM8K 5-shot (random exemplars, little shared) and gsm8k_cot (one fixed 8-shot header) as the
harness formats them (the platform's harness door, on the shipped slices in data/ for the tests and
on ../shared/benchmarks for the parity scripts), ARC-Challenge log-likelihood requests with a
shared few-shot header, the harness's MMLU-Pro 5-shot requests (a header per category, ten choices
a question), GSM8K's questions (concurrent chats), and the perplexity task's paragraphs (the GPU's
architecture check).
tests/models/test_engine_prompts.py checks the files against the harness.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_engine import LoglikelihoodRequest  # noqa: E402
from eval_platform.benchmarks.declarations import declared_benchmarks  # noqa: E402
from eval_platform.benchmarks.engine_lm import generation_request  # noqa: E402
from eval_platform.benchmarks.harness import HarnessRun, build_tasks  # noqa: E402
from eval_platform.benchmarks.solvers.harness import rows_requests  # noqa: E402
from eval_platform.common.ingestion import load_rows  # noqa: E402
from eval_platform.environment import environment  # noqa: E402

DATA = ROOT / "data" / "benchmarks"
SHARED = ROOT.parent / "shared" / "benchmarks"
TEST_PROMPTS = ROOT / "engine" / "tests" / "data" / "harness_prompts.json"
PARITY_PROMPTS = ROOT / "engine" / "parity" / "data" / "harness_prompts.json"
PARITY_ITEMS = 48  # the parity scripts' largest --items (generation_throughput.py's)


def harness_prompts(name: str, items: int, benchmarks: Path = SHARED) -> tuple[list[str], int, tuple[str, ...]]:
    """The harness's prompts for the benchmark (at its headline's shots) over the first rows of its
    file in `benchmarks`, its token budget and its stop sequences."""
    benchmark = declared_benchmarks(environment().benchmarks_dir)[name]
    assert benchmark.dataset is not None and benchmark.dataset.file is not None
    rows = load_rows(str(benchmarks / Path(benchmark.dataset.file).name), limit=items).rows
    pool = load_rows(benchmark.fewshot.file).rows if benchmark.fewshot and benchmark.fewshot.file else []
    shots = benchmark.headline.num_fewshot if benchmark.headline else None
    settings = benchmark.evaluation_settings().model_copy(update={"solvers": ("harness",), "num_fewshot": shots})
    requests = [args for built, _ in rows_requests(benchmark, rows, pool, settings).values() for args in built]
    context, kwargs = requests[0]
    request = generation_request(context, kwargs)  # the task's budget and stop sequences
    return [prompt for prompt, _ in requests], request.max_new_tokens, request.stop


def generation(name: str, items: int, folder: Path) -> dict:
    prompts, budget, stop = harness_prompts(name, items, folder)
    return {"prompts": prompts, "max_new_tokens": budget, "stop": list(stop)}


def arc_requests(shots: int, questions: int) -> list[list[str]]:
    """ARC-Challenge `shots`-shot (context, continuation) pairs for the first questions, each
    choice a request: a shared header, each question's context shared by its choices."""
    train = [json.loads(line) for line in (DATA / "fewshot" / "arc_challenge_train.jsonl").open()][:shots]
    rows = [json.loads(line) for line in (DATA / "arc_challenge.jsonl").open()][:questions]

    def question(row: dict) -> str:
        return f"Question: {row['question']}\nAnswer:"

    def answer(row: dict) -> str:
        return row["choices"]["text"][row["choices"]["label"].index(row["answerKey"])]

    header = "".join(f"{question(r)} {answer(r)}\n\n" for r in train)
    return [[header + question(r), f" {choice}"] for r in rows for choice in r["choices"]["text"]]


def task_requests(name: str, documents: int) -> dict[str, list[LoglikelihoodRequest]]:
    """The harness's log-likelihood requests of a declared harness-task benchmark's first documents
    (each of a group's tasks), by task."""
    from lm_eval.api.group import Group

    benchmark = declared_benchmarks(environment().benchmarks_dir)[name]
    settings = benchmark.evaluation_settings().model_copy(update={"limit": documents})
    requests = {}
    built = build_tasks(HarnessRun((benchmark.task,), settings))
    for task in (leaf for each in built for leaf in (each.get_all_tasks() if isinstance(each, Group) else [each])):
        task.build_all_requests(limit=documents)
        asked = [i.args for i in task.instances if i.request_type == "loglikelihood"]
        requests[task.config.task] = [LoglikelihoodRequest(*args) for args in asked]
    return requests


def engine_test_prompts() -> dict:
    return {
        "gsm8k": generation("gsm8k", 4, DATA),
        "gsm8k_cot": generation("gsm8k_cot", 3, DATA),
        "arc_challenge_3_shot": arc_requests(3, 12),
        "arc_challenge_5_shot": arc_requests(5, 3),
        "mmlu_pro_5_shot": [
            [r.context, r.continuation] for r in task_requests("leaderboard_mmlu_pro", 3)["leaderboard_mmlu_pro"]
        ],
    }


def engine_parity_prompts() -> dict:
    paragraphs = DATA / "perplexity" / "paragraphs.jsonl"
    return {
        "gsm8k": generation("gsm8k", PARITY_ITEMS, SHARED),
        "gsm8k_cot": generation("gsm8k_cot", PARITY_ITEMS, SHARED),
        "gsm8k_questions": [
            row["question"] for _, row in load_rows(str(SHARED / "gsm8k.jsonl"), limit=PARITY_ITEMS).rows
        ],
        "paragraphs": [json.loads(line)["text"] for line in paragraphs.read_text(encoding="utf-8").splitlines()],
    }


def written(value: dict) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False) + "\n"


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    for path, value in ((TEST_PROMPTS, engine_test_prompts()), (PARITY_PROMPTS, engine_parity_prompts())):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(written(value), encoding="utf-8")
        counts = {
            name: len(entry) if isinstance(entry, list) else len(entry["prompts"]) for name, entry in value.items()
        }
        print(f"{path.relative_to(ROOT)}: {', '.join(f'{name} ({count})' for name, count in counts.items())}")


if __name__ == "__main__":
    main()
