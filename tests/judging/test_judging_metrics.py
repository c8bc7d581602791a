"""The judging metrics against values worked out by hand on small tables (the working is in the
comments), the length-controlled win rate by its properties, and Bradley-Terry on tiny rosters."""

import math
import statistics

import numpy as np
import pytest

from eval_platform.common.intervals import Estimate, proportion, wilson
from eval_platform.common.panels import AgreementMetric, agreement_weights, flag_judges
from eval_platform.evolution.fitness import panel_average
from eval_platform.judging.agreement import (
    agreement_table,
    classification_scores,
    cohen_kappa,
    cohen_kappa_estimate,
    fleiss_kappa,
    judge_agreement,
    metric_rows,
)
from eval_platform.judging.ratings import (
    Battle,
    Preference,
    battles_from_verdicts,
    bradley_terry,
    drop_sparse,
    leaderboard,
    length_controlled_win_rate,
    win_rates,
)
from eval_platform.judging.records import HumanSet, JudgeVerdict, PairwiseItem

ROUNDS = 400  # bootstrap rounds in these tests: the values are exact, only the intervals are resampled


def item(item_id, gold, labels=(), a="long answer", b="short", model_a=None, model_b=None):
    return PairwiseItem("hand", item_id, "q", a, b, tuple(labels), gold, model_a, model_b)


def verdict(item_id, order, label, judge="judge", model_a=None, model_b=None, cost=None):
    return JudgeVerdict(judge, "hand", item_id, order, label, label, model_a, model_b, cost_usd=cost)


# The hand table: four items, three annotators each, a tie allowed (PandaLM's kind of set).
#   item  labels            gold  longer  judge as_is  judge swapped
#   i1    a, a, b           a     a       a            a
#   i2    b, b, b           b     b       a            b
#   i3    tie, tie, a       tie   a       tie          a
#   i4    a, b, a           a     b       unparsed     a
HAND = HumanSet(
    "hand",
    "the hand-worked table",
    (
        item("i1", "a", ("a", "a", "b"), a="longer one", b="short"),
        item("i2", "b", ("b", "b", "b"), a="short", b="longer one"),
        item("i3", "tie", ("tie", "tie", "a"), a="longer one", b="short"),
        item("i4", "a", ("a", "b", "a"), a="short", b="longer one"),
    ),
    "tie_is_label",
    "hand",
)
HAND_VERDICTS = [
    verdict("i1", "as_is", "a", cost=0.01),
    verdict("i1", "swapped", "a", cost=0.01),
    verdict("i2", "as_is", "a"),
    verdict("i2", "swapped", "b"),
    verdict("i3", "as_is", "tie"),
    verdict("i3", "swapped", "a"),
    verdict("i4", "as_is", "unparsed"),
    verdict("i4", "swapped", "a"),
]


def test_wilson_interval_by_hand():
    # 1 of 4, z = 1.959964, z² = 3.841459: centre = (0.25 + z²/8) / (1 + z²/4) = 0.730182 / 1.960365
    # = 0.372473; half = z / (1 + z²/4) * sqrt(0.25 * 0.75 / 4 + z² / 64) = 0.999796 * 0.326952 = 0.326885
    low, high = wilson(1, 4)
    assert low == pytest.approx(0.372473 - 0.326885, abs=2e-6)
    assert high == pytest.approx(0.372473 + 0.326885, abs=2e-6)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)


def test_accuracy_kappa_and_biases_on_the_hand_table():
    row = judge_agreement(HAND, HAND_VERDICTS, rounds=ROUNDS)
    assert (row.items, row.verdicts, row.orders, row.unparsed, row.ties) == (4, 8, 2, 1, 1)
    assert row.cost_usd == pytest.approx(0.02)
    # Accuracy: right verdicts i1 2, i2 1 (swapped b), i3 1 (tie), i4 1 (swapped a) = 5 of 8.
    assert row.accuracy.value == pytest.approx(5 / 8)
    assert row.accuracy.method == "bootstrap" and row.accuracy.n == 4  # two verdicts per item: items resampled
    # Cohen's kappa over the 8 (verdict, gold) pairs, categories a, b, tie, unparsed:
    #   verdict a: gold a 3, gold b 1, gold tie 1 (row 5); b: b 1; tie: tie 1; unparsed: a 1
    #   p_o = (3 + 1 + 1) / 8 = 0.625; gold totals a 4, b 2, tie 2; verdict totals a 5, b 1, tie 1, unparsed 1
    #   p_e = (5*4 + 1*2 + 1*2 + 1*0) / 64 = 0.375; kappa = (0.625 - 0.375) / (1 - 0.375) = 0.4
    assert row.kappa.value == pytest.approx(0.4)
    # Fleiss' kappa of the annotators, m = 3: P_i = (sum n_ij² - 3) / 6 = 1/3, 1, 1/3, 1/3; P̄ = 0.5
    #   p_a = 5/12, p_b = 5/12, p_tie = 2/12; P_e = (25 + 25 + 4) / 144 = 0.375; kappa = 0.125 / 0.625 = 0.2
    assert row.human_kappa.value == pytest.approx(0.2)
    # Same verdict in both orders: only i1 (i3 tie/a differ; i4 has an unparsed one): 1 of 4, Wilson.
    assert row.position_consistency.value == pytest.approx(0.25)
    assert (row.position_consistency.low, row.position_consistency.high) == pytest.approx(
        (0.045588, 0.699358), abs=2e-6
    )
    # First shown wins among decisive verdicts: i1 as_is a (first), swapped a (second); i2 as_is a
    # (first), swapped b (first: b is shown first when swapped); i3 swapped a (second); i4 swapped a
    # (second): 3 of 6.
    assert row.first_wins.value == pytest.approx(3 / 6)
    # Longer wins among decisive verdicts: i1 2 of 2, i2 1 of 2, i3 1 of 1, i4 0 of 1: 4 of 6.
    assert row.longer_wins.value == pytest.approx(4 / 6)
    # The humans: decisive golds a (i1), b (i2), a (i4): answer a 2 of 3; the longer 2 of 3 (i4's is not).
    assert row.human_first_wins.value == pytest.approx(2 / 3)
    assert row.human_longer_wins.value == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("policy", "expected", "trials"),
    [
        # Golds a, b; verdicts i1 (tie, a), i2 (b, tie).
        ("tie_is_wrong", 2 / 4, 4),  # LLMBar: a tie is wrong
        ("tie_excluded", 2 / 2, 2),  # MT-Bench without ties: the judge's ties are left out
        ("tie_is_label", 2 / 4, 4),  # a tie is a label, but neither gold is a tie
    ],
)
def test_each_set_counts_ties_its_way(policy, expected, trials):
    human_set = HumanSet("hand", "", (item("i1", "a"), item("i2", "b")), policy, "hand")
    verdicts = [verdict("i1", "as_is", "tie"), verdict("i1", "swapped", "a")]
    verdicts += [verdict("i2", "as_is", "b"), verdict("i2", "swapped", "tie")]
    accuracy = judge_agreement(human_set, verdicts, rounds=ROUNDS).accuracy
    assert accuracy.value == pytest.approx(expected)


def test_items_without_a_majority_are_left_out_of_the_label_metrics():
    split = item("i5", None, ("a", "b", "tie"))
    human_set = HumanSet("hand", "", (*HAND.items, split), "tie_is_label", "hand")
    verdicts = [*HAND_VERDICTS, verdict("i5", "as_is", "a"), verdict("i5", "swapped", "a")]
    row = judge_agreement(human_set, verdicts, rounds=ROUNDS)
    assert row.accuracy.value == pytest.approx(5 / 8) and row.accuracy.n == 4
    assert row.position_consistency.value == pytest.approx(2 / 5)  # i5 is consistent, and it counts here


def test_single_order_judges_have_no_consistency_and_wilson_accuracy():
    verdicts = [verdict(i.item_id, "as_is", i.gold) for i in HAND.items]  # always right, answer a always first
    row = judge_agreement(HAND, verdicts, rounds=ROUNDS)
    assert row.accuracy.value == 1.0 and row.accuracy.method == "wilson"
    assert row.position_consistency == Estimate.empty()
    assert row.kappa.value == pytest.approx(1.0)
    # Decisive verdicts a, b, a: the first shown won 2 of 3, as the humans' a picks did.
    assert row.first_wins.value == pytest.approx(2 / 3) == row.human_first_wins.value


def test_cohen_kappa_matches_scikit_learn_and_the_degenerate_cases():
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(3)
    first = rng.choice(["a", "b", "tie"], 300).tolist()
    second = [x if rng.random() < 0.6 else rng.choice(["a", "b", "tie"]) for x in first]
    assert cohen_kappa(list(zip(first, second, strict=True))) == pytest.approx(cohen_kappa_score(first, second))
    assert cohen_kappa([("a", "a"), ("a", "a")]) == 1.0  # one category, always agreed
    assert cohen_kappa([("a", "b"), ("a", "b")]) == 0.0  # p_e = 0, p_o = 0


def test_fleiss_kappa_by_hand():
    # Two items, two raters: (a, a) and (a, b): P_i = 1, 0, P̄ = 0.5; p_a = 3/4, p_b = 1/4;
    # P_e = 9/16 + 1/16 = 0.625; kappa = (0.5 - 0.625) / 0.375 = -1/3.
    assert fleiss_kappa([("a", "a"), ("a", "b")]) == pytest.approx(-1 / 3)
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([("a", "a"), ("a", "b", "a")])


def test_bootstrap_intervals_are_seeded_and_hold_the_estimate():
    per_item = [[("a", "a"), ("a", "b")], [("b", "b")], [("tie", "tie"), ("a", "tie")], [("b", "b"), ("b", "a")]] * 10
    first = cohen_kappa_estimate(per_item, rounds=ROUNDS, seed=1)
    assert first == cohen_kappa_estimate(per_item, rounds=ROUNDS, seed=1)
    assert first.low < first.value < first.high and first.n == 40
    rate = proportion([2, 1, 0, 1] * 10, [2, 2, 1, 1] * 10, rounds=ROUNDS)
    assert rate.value == pytest.approx(4 / 6) and rate.low < rate.value < rate.high


def test_classification_scores_by_hand_and_as_scikit_learn():
    from sklearn.metrics import precision_recall_fscore_support

    # (predicted, true): a/a, a/b, b/b, tie/a, b/b, tie/tie
    # a: predicted 2, right 1: P 0.5; true 2: R 0.5; F 0.5
    # b: predicted 2, right 2: P 1; true 3: R 2/3; F = 2 * 1 * (2/3) / (5/3) = 0.8
    # tie: predicted 2, right 1: P 0.5; true 1: R 1; F = 2 * 0.5 / 1.5 = 2/3
    pairs = [("a", "a"), ("a", "b"), ("b", "b"), ("tie", "a"), ("b", "b"), ("tie", "tie")]
    scores = classification_scores(pairs)
    assert scores.accuracy == pytest.approx(4 / 6)
    assert scores.precision == pytest.approx((0.5 + 1 + 0.5) / 3)
    assert scores.recall == pytest.approx((0.5 + 2 / 3 + 1) / 3)
    assert scores.f1 == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)
    predicted, true = zip(*pairs, strict=True)
    sk = precision_recall_fscore_support(true, predicted, labels=["a", "b", "tie"], average="macro")
    assert (scores.precision, scores.recall, scores.f1) == pytest.approx(sk[:3])


def test_agreement_table_and_its_long_rows():
    other = [JudgeVerdict("other", "hand", v.item_id, v.order, v.verdict, "") for v in HAND_VERDICTS]
    elsewhere = JudgeVerdict("judge", "not-human-labelled", "x", "as_is", "a", "")  # ignored
    rows = agreement_table({"hand": HAND}, [*HAND_VERDICTS, *other, elsewhere], rounds=ROUNDS)
    assert [(r.judge, r.set_name) for r in rows] == [("judge", "hand"), ("other", "hand")]
    long = metric_rows(rows)
    assert len(long) == 2 * 8 and {m.metric for m in long} >= {"accuracy", "kappa", "position_consistency"}
    assert next(m for m in long if m.judge == "judge" and m.metric == "kappa").value == pytest.approx(0.4)


# --- battles, win rates and Bradley-Terry --------------------------------------------------------


def test_battles_follow_fastchat():
    def pair(item_id, first, second):
        return [
            verdict(item_id, "as_is", first, model_a="A", model_b="B"),
            verdict(item_id, "swapped", second, model_a="A", model_b="B"),
        ]

    verdicts = pair("1", "a", "a") + pair("2", "a", "b") + pair("3", "tie", "a") + pair("4", "unparsed", "a")
    verdicts += pair("5", "b", "b") + [verdict("6", "as_is", "a")]  # no models named: no battle
    winners = {b.item_id: b.winner for b in battles_from_verdicts(verdicts)}
    # Agreeing orders win; disagreeing orders, or a tie in the first, tie; an unparsed one drops the pair.
    assert winners == {"1": "model_a", "2": "tie", "3": "tie", "5": "model_b"}
    each = battles_from_verdicts(verdicts, combine="each_order")
    assert len(each) == 9  # every parsed verdict of the named pairs


def test_win_rates_by_hand():
    battles = [Battle("A", "B", "model_a", str(i), "j") for i in range(2)]
    battles += [Battle("A", "B", "tie", "2", "j"), Battle("C", "A", "model_a", "3", "j")]
    rates = {r.model: r for r in win_rates(battles, rounds=ROUNDS)}
    # A: win, win, tie, loss = (2 + 0.5) / 4; B: loss, loss, tie = 0.5 / 3; C: one win.
    assert rates["A"].win_rate.value == pytest.approx(0.625)
    assert (rates["A"].wins, rates["A"].losses, rates["A"].ties) == (2, 1, 1)
    assert rates["B"].win_rate.value == pytest.approx(0.5 / 3)
    assert rates["C"].win_rate.value == 1.0
    against_a = {r.model: r.battles for r in win_rates(battles, opponent="A", rounds=ROUNDS)}
    assert against_a == {"B": 3, "C": 1}


def test_bradley_terry_by_hand_on_two_models():
    # A beats B 3 times of 4: P = 0.75 = 1 / (1 + 10^((R_B - R_A) / 400)), so R_A - R_B = 400 log10(3)
    # = 190.85; the ratings average 1000: A 1095.42, B 904.58. Ties count half: 1 win each and 2 ties
    # leave them level.
    battles = [Battle("A", "B", "model_a", str(i), "j") for i in range(3)] + [Battle("A", "B", "model_b", "3", "j")]
    ratings = {r.model: r.rating for r in bradley_terry(battles, rounds=0)}
    assert ratings["A"] == pytest.approx(1000 + 200 * math.log10(3), abs=1e-3)
    assert ratings["B"] == pytest.approx(1000 - 200 * math.log10(3), abs=1e-3)
    level = [Battle("A", "B", w, str(i), "j") for i, w in enumerate(["model_a", "model_b", "tie", "tie"])]
    assert [r.rating for r in bradley_terry(level, rounds=0)] == pytest.approx([1000, 1000], abs=1e-3)
    anchored = {r.model: r.rating for r in bradley_terry(battles, rounds=0, anchor=("B", 800))}
    assert anchored["B"] == pytest.approx(800) and anchored["A"] - anchored["B"] == pytest.approx(400 * math.log10(3))


def arena_logistic_elo(battles):
    """Chatbot Arena's first MLE formulation (the Colab's compute_mle_elo): one logistic-regression
    row per battle with ±ln(10) for the two models, a tie as one row of each outcome, a win as two."""
    from sklearn.linear_model import LogisticRegression

    models = sorted({b.model_a for b in battles} | {b.model_b for b in battles})
    rows, labels, weights = [], [], []
    for b in battles:
        x = np.zeros(len(models))
        x[models.index(b.model_a)], x[models.index(b.model_b)] = math.log(10), -math.log(10)
        for outcome, weight in (
            (1, {"model_a": 2, "tie": 1, "model_b": 0}[b.winner]),
            (0, {"model_b": 2, "tie": 1, "model_a": 0}[b.winner]),
        ):
            if weight:
                rows.append(x)
                labels.append(outcome)
                weights.append(weight)
    fit = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-10, max_iter=10_000)
    fit.fit(np.array(rows), np.array(labels), sample_weight=np.array(weights))
    return dict(zip(models, 400 * fit.coef_[0] + 1000, strict=True))


def test_bradley_terry_equals_arenas_logistic_regression_on_a_tiny_roster():
    outcomes = [("A", "B", "model_a")] * 5 + [("A", "B", "model_b")] * 2 + [("B", "C", "model_a")] * 4
    outcomes += (
        [("B", "C", "tie")] * 2 + [("C", "B", "model_a")] + [("A", "C", "model_a")] * 3 + [("A", "C", "model_b")]
    )
    battles = [Battle(a, b, w, str(i), "j") for i, (a, b, w) in enumerate(outcomes)]
    ours = {r.model: r.rating for r in bradley_terry(battles, rounds=0)}
    assert ours == pytest.approx(arena_logistic_elo(battles), abs=0.05)
    assert list(ours) == ["A", "B", "C"]
    rated = bradley_terry(battles, rounds=100, seed=4)
    assert all(r.low <= r.rating <= r.high for r in rated)
    assert rated == bradley_terry(battles, rounds=100, seed=4)  # seeded


def test_sparse_models_are_dropped_before_rating():
    battles = [Battle("A", "B", "model_a", str(i), "j") for i in range(6)] + [Battle("A", "B", "model_b", "x", "j")]
    battles.append(Battle("A", "Z", "model_b", "z", "j"))  # Z: one battle, won: no finite rating
    assert {b.model_b for b in drop_sparse(battles, 2)} == {"B"}
    board = leaderboard(battles, rounds=50, min_battles=2)
    assert [r.model for r in board] == ["A", "B"] and board[0].battles == 7


# --- the length-controlled win rate --------------------------------------------------------------


def simulated_preferences(factor, theta=0.3, beta=1.5, n=400, seed=0):
    """A judge with a taste for length: P(model wins) = logistic(theta + beta * tanh(Δ / s)) where
    Δ is the model's answer length minus the baseline's; the model's answers are `factor` times the
    length they would be, nothing else changes (same instructions, same draws)."""
    rng = np.random.default_rng(seed)
    baseline = rng.lognormal(6, 0.5, n)
    model = rng.lognormal(6, 0.5, n)
    draws = rng.random(n)
    scale = np.std(model - baseline)
    longer = model * factor
    p = 1 / (1 + np.exp(-(theta + beta * np.tanh((longer - baseline) / scale))))
    return [Preference(str(i), float(draws[i] < p[i]), int(longer[i]), int(baseline[i])) for i in range(n)]


def test_length_controlled_win_rate_of_the_baseline_against_itself_is_50():
    same = [Preference(str(i), 0.5, 100 + i, 100 + i) for i in range(50)]  # same answers: every verdict a tie
    assert length_controlled_win_rate("m", "b", same).lc_win_rate == pytest.approx(50.0)
    noisy = simulated_preferences(1.0)
    by_name = length_controlled_win_rate("b", "b", noisy)  # AlpacaEval returns 50 for the baseline by construction
    assert by_name.lc_win_rate == 50.0 and by_name.win_rate != 50.0


def test_a_change_of_length_alone_barely_moves_the_length_controlled_win_rate():
    # Five draws of 2000 instructions; in each the model's answers are halved, kept, and doubled.
    raw_moves, lc_moves, lc_values = [], [], []
    for seed in range(5):
        results = {
            factor: length_controlled_win_rate("m", "b", simulated_preferences(factor, n=2000, seed=seed))
            for factor in (0.5, 1.0, 2.0)
        }
        for factor in (0.5, 2.0):
            raw_moves.append(abs(results[factor].win_rate - results[1.0].win_rate))
            lc_moves.append(abs(results[factor].lc_win_rate - results[1.0].lc_win_rate))
        lc_values += [r.lc_win_rate for r in results.values()]
        assert results[1.0].weights["np.tanh(std_delta_len)"] < 0  # longer than the baseline (Δ < 0) wins
    # Halving or doubling every answer moves the raw win rate by 13 to 20 points; the length-controlled
    # one by a tenth of that on average, never by 5 (measured: 0.1 to 4.3).
    assert min(raw_moves) > 12
    assert max(lc_moves) < 5 and statistics.mean(lc_moves) < 0.2 * statistics.mean(raw_moves)
    # And it stays near the judge's preference with equal lengths, logistic(0.3) = 57.4.
    assert all(abs(value - 100 / (1 + math.exp(-0.3))) < 4 for value in lc_values)


def test_without_a_taste_for_length_the_control_changes_little():
    fair = simulated_preferences(2.0, beta=0.0)
    result = length_controlled_win_rate("m", "b", fair, rounds=20)
    assert abs(result.lc_win_rate - result.win_rate) < 3
    assert result.lc_low < result.lc_win_rate < result.lc_high


# --- the panel ----------------------------------------------------------------------------------


def row(judge, kappa_value, set_name="hand"):
    """A judge's stored kappa on a set (and its accuracy, which the panel reads only when asked)."""
    return [
        AgreementMetric(judge, set_name, "kappa", kappa_value, kappa_value - 0.1, kappa_value + 0.1, 50, "bootstrap"),
        AgreementMetric(judge, set_name, "accuracy", 0.99, 0.98, 1.0, 50, "wilson"),
    ]


def test_panel_flags_and_weights():
    rows = [*row("good", 0.6), *row("weak", 0.2), *row("elsewhere", 0.9, set_name="other")]
    flags = {f.judge: f for f in flag_judges(rows, ["good", "weak", "elsewhere"], "hand", bound=0.3)}
    assert {j: f.status for j, f in flags.items()} == {"good": "ok", "weak": "below", "elsewhere": "unmeasured"}
    assert "below the bound 0.3" in flags["weak"].message
    # With side="high", only a judge whose whole interval is under the bound is flagged (0.2 + 0.1 = 0.3).
    assert flag_judges(rows, ["weak"], "hand", bound=0.3, side="high")[0].status == "ok"
    # Another metric is another figure: the weak judge's accuracy (0.99) clears 0.95.
    assert flag_judges(rows, ["weak"], "hand", bound=0.95, metric="accuracy")[0].status == "ok"
    weights = agreement_weights(rows, ["good", "weak", "elsewhere"], "hand")
    # 0.6 and 0.2, the unmeasured judge the mean 0.4: 0.6 / 1.2, 0.2 / 1.2, 0.4 / 1.2
    assert weights == pytest.approx({"good": 0.5, "weak": 1 / 6, "elsewhere": 1 / 3})


def test_panel_average_stays_the_plain_mean_by_default():
    scores = {"good": 8.0, "weak": 2.0, "failed": None}
    assert panel_average(scores) == statistics.mean([8.0, 2.0])
    assert panel_average(scores, {"good": 0.75, "weak": 0.25, "failed": 1.0}) == pytest.approx(6.5)
    assert panel_average(scores, {"good": 0.0, "weak": 0.0}) == 5.0
    assert panel_average({"a": None}) == 0.0
