"""One honest interval per proportion (common/intervals.py), whatever the solver: Wilson's score
interval for 0/1 items, a bootstrap over items otherwise, every bound in [0, 1], the degenerate
cases included; the harness's own standard error kept beside it."""

import math

import pytest

from eval_platform.benchmarks.records import Result, Sample
from eval_platform.benchmarks.scoring import aggregate, exact, with_intervals
from eval_platform.common.intervals import item_interval

Z = 1.959963984540054  # the 97.5th percentile of the standard normal


def wilson_by_hand(right: int, n: int) -> tuple[float, float]:
    """Wilson's score interval, written out: (p + z²/2n ± z√(p(1-p)/n + z²/4n²)) / (1 + z²/n)."""
    p = right / n
    centre = p + Z * Z / (2 * n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return (centre - half) / (1 + Z * Z / n), (centre + half) / (1 + Z * Z / n)


@pytest.mark.parametrize(
    "values, bounds",
    [
        ([1.0], (1 / (1 + Z * Z), 1.0)),  # n = 1, right: n / (n + z²) to 1
        ([0.0], (0.0, Z * Z / (1 + Z * Z))),  # n = 1, wrong: 0 to z² / (n + z²)
        ([1.0] * 5, (5 / (5 + Z * Z), 1.0)),  # all right
        ([0.0] * 5, (0.0, Z * Z / (5 + Z * Z))),  # all wrong
        ([1.0, 0.0, 0.0, 1.0, 1.0], wilson_by_hand(3, 5)),
    ],
    ids=["one-right", "one-wrong", "all-right", "all-wrong", "three-of-five"],
)
def test_a_proportion_of_0_1_items_gets_wilsons_interval_inside_0_1(values, bounds):
    estimate = item_interval(values)

    assert estimate.method == "wilson"
    assert (estimate.low, estimate.high) == pytest.approx(bounds, abs=1e-12)
    assert 0.0 <= estimate.low <= estimate.value <= estimate.high <= 1.0


def test_values_in_0_1_and_items_of_several_trials_get_a_bootstrap_inside_0_1():
    mass = item_interval([0.9, 0.95, 1.0, 0.99])  # TruthfulQA's mc2: probability mass
    instructions = item_interval([[True, True], [True], [False, True, True]])  # IFEval's per prompt

    assert mass.method == instructions.method == "bootstrap"
    assert 0.9 <= mass.low <= mass.value <= mass.high <= 1.0
    assert instructions.value == pytest.approx(5 / 6) and 0.0 <= instructions.low <= instructions.high <= 1.0
    # seeded: the same interval every run
    assert item_interval([0.9, 0.95, 1.0, 0.99]) == mass


def test_a_value_that_is_no_proportion_gets_no_interval():
    assert item_interval([12.5, 40.0]).low is None and item_interval([]).value is None
    # a perplexity task's item: (its log-likelihood, its words), which the harness pools; not trials
    pairs = item_interval([(-199.0, 40), (-126.0, 31)])
    assert (pairs.low, pairs.high, pairs.method) == (None, None, "none")


def sample(task: str, doc_id: int, value: float) -> Sample:
    metrics = {"acc": value, "perplexity": 3.0 + value}
    return Sample(task, doc_id, "none", "", [], [], None, None, None, metrics, None)


def test_the_harness_solvers_results_get_the_interval_the_chat_solvers_get():
    """Five items, three right: the harness's own value and standard error stay, the interval is
    Wilson's, as the chat solvers' mean of the same items (no mean ± 1.96 standard errors, which
    leaves [0, 1] at small n); a group's over its tasks' items; a perplexity gets none."""
    samples = [sample("task_a", i, v) for i, v in enumerate([1.0, 0.0, 1.0])] + [
        sample("task_b", i, v) for i, v in enumerate([1.0, 0.0])
    ]
    results = [
        Result("task_a", "acc", "none", 2 / 3, stderr=0.33, n=3),
        Result("group", "acc", "none", 0.6, stderr=0.24, n=5, is_group=True),
        Result("task_b", "perplexity", "none", 3.5, stderr=0.5, n=2),
    ]

    task_a, group, perplexity = with_intervals(results, samples, {"group": ["task_a", "task_b"]})

    assert (task_a.value, task_a.stderr) == (2 / 3, 0.33)
    assert (task_a.ci_low, task_a.ci_high) == pytest.approx(wilson_by_hand(2, 3))
    assert (group.ci_low, group.ci_high) == pytest.approx(wilson_by_hand(3, 5))
    chat = aggregate([exact(answer, "A") for answer in ["A", "B", "A", "A", "B"]])
    assert (chat.ci_low, chat.ci_high) == (group.ci_low, group.ci_high)
    assert perplexity.ci_low is None and perplexity.ci_high is None
