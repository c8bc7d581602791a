"""One honest interval per proportion (common/intervals.py), whatever the solver: Wilson's score
interval for 0/1 items, a bootstrap over items otherwise, floored by Wilson's where items are few or
alike, Newcombe's paired interval for a difference, every bound in [0, 1], the degenerate cases
included (none of width zero); the harness's own standard error kept beside it."""

import math
from dataclasses import replace

import pytest

from eval_platform.benchmarks.records import Result, Sample
from eval_platform.benchmarks.scoring import aggregate, exact, sampled_results, with_intervals
from eval_platform.common.intervals import item_interval, paired_difference, proportion
from eval_platform.judging.agreement import cohen_kappa_estimate

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
    assert 0.0 <= mass.low <= mass.value <= mass.high <= 1.0
    assert mass.low < 0.9  # four items are few: Wilson's floor, not the values' own range
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


# --- the degenerate cases: no interval of width zero unless the data are certain by construction ---


def newcombe_by_hand(p1: float, p2: float, n: int, phi: float) -> tuple[float, float]:
    """Newcombe's square-and-add interval of p1 - p2, written out from Wilson's bounds."""
    (l1, u1), (l2, u2) = wilson_by_hand(round(p1 * n), n), wilson_by_hand(round(p2 * n), n)
    below = math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2))
    above = math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1))
    return p1 - p2 - below, p1 - p2 + above


@pytest.mark.parametrize(
    "values, floor",
    [
        ([0.9], (0.9, 1)),  # one item valued 0.9: as wide as a trial in [0, 1] allows
        ([0.5] * 40, (20, 40)),  # 40 items all alike: the bootstrap sees no spread
        ([[0.0, 0.0, 0.0]] * 5, (0, 15)),  # pass@1 of 3 answers each, all wrong
        ([[1.0, 1.0], [1.0, 1.0, 1.0]], (5, 5)),  # every instruction of every prompt kept
        ([[1.0, 0.0]] * 6, (6, 12)),  # both orders of every pair disagreeing alike
    ],
    ids=["one-item-0.9", "forty-alike", "sampled-all-wrong", "trials-all-right", "trials-all-alike"],
)
def test_a_bootstrap_over_few_or_alike_items_is_never_narrower_than_wilsons(values, floor):
    estimate = item_interval(values)
    low, high = wilson_by_hand(*floor) if isinstance(floor[0], int) else _wilson_of_value(*floor)

    assert estimate.method == "bootstrap"
    assert estimate.high - estimate.low > 0
    assert estimate.low <= low + 1e-12 and estimate.high >= high - 1e-12
    assert 0.0 <= estimate.low <= estimate.value <= estimate.high <= 1.0


def _wilson_of_value(value: float, n: int) -> tuple[float, float]:
    """Wilson's interval of a proportion `value` over n trials (not a whole count of successes)."""
    centre = value + Z * Z / (2 * n)
    half = Z * math.sqrt(value * (1 - value) / n + Z * Z / (4 * n * n))
    return (centre - half) / (1 + Z * Z / n), (centre + half) / (1 + Z * Z / n)


def test_many_spread_items_keep_their_bootstrap():
    """Past `FEW_ITEMS`, values in [0, 1] that differ keep the bootstrap, narrower than Wilson's."""
    values = [0.4, 0.5, 0.6] * 40
    estimate = item_interval(values)
    low, high = wilson_by_hand(60, 120)
    assert low < estimate.low < 0.5 < estimate.high < high


def test_a_difference_of_0_1_items_gets_newcombes_paired_interval_against_a_published_table():
    """Fagerland, Lydersen and Laake, Statistical Analysis of Contingency Tables (2017), chapter 8
    (the paired 2x2 table), its example of complete response before and after consolidation therapy
    (Cavo et al. 2012): 59 both, 6 before only, 16 after only, 80 neither gives -0.0621 (95% CI
    -0.1186 to -0.0046) by Newcombe's square-and-add interval, as the book's R package
    (contingencytables, tests/testthat/test-ch8.R) checks it."""
    before = [1.0] * 59 + [1.0] * 6 + [0.0] * 16 + [0.0] * 80
    after = [1.0] * 59 + [0.0] * 6 + [1.0] * 16 + [0.0] * 80

    low, high, method = paired_difference(before, after)

    assert method == "Newcombe's paired score interval"
    assert (round(low, 4), round(high, 4)) == (-0.1186, -0.0046)


@pytest.mark.parametrize(
    "first, second, expected",
    [
        ([1.0] * 5, [1.0] * 5, newcombe_by_hand(1.0, 1.0, 5, 0.0)),  # both all right
        ([0.0] * 5, [0.0] * 5, newcombe_by_hand(0.0, 0.0, 5, 0.0)),  # both all wrong
        ([1.0, 0.0, 1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0, 1.0], newcombe_by_hand(0.6, 0.6, 5, 0.0)),  # one flip each way
        ([1.0], [0.0], newcombe_by_hand(1.0, 0.0, 1, 0.0)),  # one item
    ],
    ids=["five-both-right", "five-both-wrong", "five-difference-0", "one-item"],
)
def test_a_difference_of_0_on_few_items_is_not_certain(first, second, expected):
    low, high, _ = paired_difference(first, second)
    difference = sum(first) / len(first) - sum(second) / len(second)

    assert (low, high) == pytest.approx(expected, abs=1e-12)
    assert high - low > 0.3 and -1.0 <= low <= difference <= high <= 1.0


def test_a_difference_of_values_in_0_1_alike_on_few_items_is_floored():
    low, high, method = paired_difference([0.5] * 5, [0.5] * 5)  # mc2 alike: every difference 0
    assert method == "paired bootstrap over items"
    assert (low, high) == pytest.approx(newcombe_by_hand(0.5, 0.5, 5, 0.0)[:2], abs=0.1)
    assert low < 0 < high
    # the same varying values on both sides: a correlation of 1 that few items cannot show
    same = [0.5, 0.9, 0.1]
    low, high, _ = paired_difference(same, same)
    assert (low, high) == pytest.approx(_unpaired_by_hand(0.5, 0.5, 3))


def _unpaired_by_hand(p1: float, p2: float, n: int) -> tuple[float, float]:
    """Newcombe's square-and-add of two Wilson intervals of n trials, phi 0."""
    (l1, u1), (l2, u2) = _wilson_of_value(p1, n), _wilson_of_value(p2, n)
    return p1 - p2 - math.hypot(p1 - l1, u2 - p2), p1 - p2 + math.hypot(p2 - l2, u1 - p1)


def test_a_difference_of_values_that_are_no_proportions_keeps_its_bootstrap():
    """A 0-100 score on two items: no Wilson floor (it is for proportions), the bootstrap alone."""
    low, high, method = paired_difference([30.0, 40.0], [10.0, 20.0])
    assert method == "paired bootstrap over items" and (low, high) == (20.0, 20.0)


def test_fractional_values_of_one_trial_each_are_no_wilson_proportion():
    assert proportion([0.2, 0.4] * 20, [1] * 40).method == "bootstrap"


def test_a_kappa_every_round_gives_alike_has_no_interval():
    estimate = cohen_kappa_estimate([[("a", "a")], [("b", "b")], [("a", "a")]])  # every item agreed on
    assert estimate.value == 1.0 and (estimate.low, estimate.high, estimate.method) == (None, None, "none")


def test_sampled_pass_at_1_of_all_wrong_answers_is_not_certain():
    """Five items answered three times each, every answer wrong: pass@1 0 with an interval above 0,
    the one the module's floor gives (Wilson's on 15 trials); maj@2 of 5 items, Wilson's on 5."""
    samples = [
        replace(sample("task_a", i, 0.0), sample_answers=["x"] * 3, sample_metrics=[{"acc": 0.0}] * 3) for i in range(5)
    ]
    by_reducer = {r.metric: r for r in sampled_results(samples, {}, {})}

    assert by_reducer["acc pass@1"].value == 0.0
    assert by_reducer["acc pass@1"].ci_high == pytest.approx(wilson_by_hand(0, 15)[1])
    assert by_reducer["acc maj@2"].ci_high == pytest.approx(wilson_by_hand(0, 5)[1])
