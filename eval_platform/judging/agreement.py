"""Judges measured against humans: accuracy against the gold or majority label (ties as each set
counts them), Cohen's kappa, the humans' own agreement (Fleiss' kappa) as the ceiling, position
consistency (the same verdict in both orders), position bias (how often the answer shown first
wins) and length bias (how often the longer answer wins, beside how often the humans pick it).

Intervals are 95% and say how they were made (`Estimate.method`, common/intervals.py):
- "wilson": a proportion with one trial per item (Wilson's score interval);
- "bootstrap": anything else (a proportion over both orders, whose two verdicts on an item are not
  independent; a kappa): the percentile interval of the statistic over items resampled with
  replacement (`BOOTSTRAP_ROUNDS`, seeded, so every run gives the same interval), a proportion's
  never narrower than Wilson's on its trials;
- "none": nothing to estimate (no data; a single-order judge has no position consistency), or a
  kappa every bootstrap round gives alike (every item agreed on): no interval rather than one of
  width zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from eval_platform.common.intervals import BOOTSTRAP_ROUNDS, SEED, Estimate, bootstrapped, proportion, resample_counts
from eval_platform.common.panels import AgreementMetric
from eval_platform.judging.records import HumanSet, JudgeVerdict, Label, PairwiseItem

CATEGORIES = ("a", "b", "tie", "unparsed")  # every label and verdict


# --- kappas -------------------------------------------------------------------------------------


def _kappa_from_confusion(confusion: np.ndarray) -> np.ndarray:
    """Cohen's kappa of confusion matrices (..., k, k): (p_o - p_e) / (1 - p_e); where p_e is 1
    (both raters always gave one and the same category) the kappa is 1 if they agree, else 0."""
    total = confusion.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.trace(confusion, axis1=-2, axis2=-1) / total
        expected = (confusion.sum(axis=-1) * confusion.sum(axis=-2)).sum(axis=-1) / (total * total)
        kappa = (observed - expected) / (1 - expected)
    degenerate = np.isclose(expected, 1.0)
    return np.where(degenerate, np.where(np.isclose(observed, 1.0), 1.0, 0.0), kappa)


def confusion(pairs: Sequence[tuple[str, str]], categories: Sequence[str] = CATEGORIES) -> np.ndarray:
    index = {c: i for i, c in enumerate(categories)}
    matrix = np.zeros((len(categories), len(categories)))
    for first, second in pairs:
        matrix[index[first], index[second]] += 1
    return matrix


def cohen_kappa(pairs: Sequence[tuple[str, str]], categories: Sequence[str] = CATEGORIES) -> float:
    """Cohen's kappa between two raters' labels, pair by pair."""
    if not pairs:
        raise ValueError("no pairs")
    return float(_kappa_from_confusion(confusion(pairs, categories)))


def cohen_kappa_estimate(
    pairs_by_item: Sequence[Sequence[tuple[str, str]]],
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = SEED,
    categories: Sequence[str] = CATEGORIES,
) -> Estimate:
    """Cohen's kappa over every pair of every item (an item may give several: a judge's two
    orders), with a bootstrap interval over items."""
    kept = [pairs for pairs in pairs_by_item if pairs]
    if not kept:
        return Estimate.empty()
    k = len(categories)
    per_item = np.stack([confusion(pairs, categories).reshape(-1) for pairs in kept])
    value = float(_kappa_from_confusion(per_item.sum(axis=0).reshape(k, k)))
    resampled = (resample_counts(len(kept), rounds, seed) @ per_item).reshape(-1, k, k)
    return bootstrapped(value, _kappa_from_confusion(resampled), len(kept))


def _fleiss(counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Fleiss' kappa of items' category counts (n x k, the same number of raters m each), for
    each row of item weights (r x n)."""
    raters = counts.sum(axis=1)[0]
    agreement = ((counts * counts).sum(axis=1) - raters) / (raters * (raters - 1))
    total = weights.sum(axis=1)
    observed = (weights @ agreement) / total
    shares = (weights @ counts) / (total[:, None] * raters)
    expected = (shares * shares).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = (observed - expected) / (1 - expected)
    return np.where(np.isclose(expected, 1.0), np.where(np.isclose(observed, 1.0), 1.0, 0.0), kappa)


def fleiss_kappa(ratings: Sequence[Sequence[str]], categories: Sequence[str] = CATEGORIES) -> float:
    """Fleiss' kappa: each item rated by the same number (at least two) of raters."""
    counts = _category_counts(ratings, categories)
    return float(_fleiss(counts, np.ones((1, len(counts))))[0])


def _category_counts(ratings: Sequence[Sequence[str]], categories: Sequence[str]) -> np.ndarray:
    if not ratings:
        raise ValueError("no items")
    sizes = {len(r) for r in ratings}
    if len(sizes) != 1 or min(sizes) < 2:
        raise ValueError(f"every item needs the same number (>= 2) of ratings, got {sorted(sizes)}")
    index = {c: i for i, c in enumerate(categories)}
    counts = np.zeros((len(ratings), len(categories)))
    for row, labels in enumerate(ratings):
        for label in labels:
            counts[row, index[label]] += 1
    return counts


def fleiss_kappa_estimate(
    ratings: Sequence[Sequence[str]],
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = SEED,
    categories: Sequence[str] = CATEGORIES,
) -> Estimate:
    """Fleiss' kappa with a bootstrap interval over items."""
    if not ratings:
        return Estimate.empty()
    counts = _category_counts(ratings, categories)
    value = float(_fleiss(counts, np.ones((1, len(counts))))[0])
    return bootstrapped(value, _fleiss(counts, resample_counts(len(counts), rounds, seed).astype(float)), len(counts))


def pairwise_cohen_kappas(ratings: Sequence[Sequence[str]]) -> dict[tuple[int, int], float]:
    """Cohen's kappa between every two raters (by their position in each item's labels), as
    PandaLM's README publishes its annotators' agreement."""
    raters = len(ratings[0])
    return {
        (i, j): cohen_kappa([(labels[i], labels[j]) for labels in ratings]) for i, j in combinations(range(raters), 2)
    }


# --- one judge on one set -----------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeAgreement:
    """One judge against the humans of one set; each metric with its interval.

    accuracy: the judge's verdicts that equal the set's label (gold or majority), over both orders
    where it saw both (ties as the set counts them, unparsed verdicts wrong); kappa: Cohen's kappa
    between those verdicts and the labels; human_kappa: the humans' own agreement (Fleiss' kappa
    among the annotators, where an item has several), the ceiling; position_consistency: items
    whose two orders gave the same verdict; first_wins: decisive verdicts that went to the answer
    shown first (0.5 is unbiased when both orders are judged; a one-order judge compares with
    human_first_wins, how often the humans picked the answer in that position); longer_wins and
    human_longer_wins: decisive verdicts, and labels, for the longer answer (in characters)."""

    judge: str
    set_name: str
    items: int
    verdicts: int
    orders: int
    unparsed: int
    ties: int
    cost_usd: float | None
    accuracy: Estimate
    kappa: Estimate
    human_kappa: Estimate
    position_consistency: Estimate
    first_wins: Estimate
    human_first_wins: Estimate
    longer_wins: Estimate
    human_longer_wins: Estimate


METRICS = (
    "accuracy",
    "kappa",
    "human_kappa",
    "position_consistency",
    "first_wins",
    "human_first_wins",
    "longer_wins",
    "human_longer_wins",
)


def _counted(verdict: JudgeVerdict, human_set: HumanSet) -> bool:
    """Whether a verdict counts towards accuracy and kappa (a set that excluded ties leaves the
    judge's ties out)."""
    return not (human_set.tie_policy == "tie_excluded" and verdict.verdict == "tie")


def human_ceiling(human_set: HumanSet, rounds: int = BOOTSTRAP_ROUNDS, seed: int = SEED) -> Estimate:
    """Fleiss' kappa among the set's annotators, over the items with the most common number of
    labels (at least two); empty where items have one label (or none)."""
    sizes = [len(item.labels) for item in human_set.items if len(item.labels) >= 2]
    if not sizes:
        return Estimate.empty()
    size = max(set(sizes), key=sizes.count)
    ratings = [item.labels for item in human_set.items if len(item.labels) == size]
    return fleiss_kappa_estimate(ratings, rounds, seed)


def _verdicts_by_item(
    human_set: HumanSet, verdicts: Sequence[JudgeVerdict]
) -> list[tuple[PairwiseItem, list[JudgeVerdict]]]:
    """Each item of the set the verdicts judge, with its verdicts; a verdict on another item is an error."""
    by_item: dict[str, list[JudgeVerdict]] = {}
    for verdict in verdicts:
        if verdict.set_name != human_set.name or verdict.item_id not in human_set.by_id:
            raise ValueError(f"verdict on {verdict.set_name}/{verdict.item_id}, not an item of {human_set.name}")
        by_item.setdefault(verdict.item_id, []).append(verdict)
    return [(human_set.by_id[item_id], group) for item_id, group in by_item.items()]


def judge_agreement(
    human_set: HumanSet,
    verdicts: Sequence[JudgeVerdict],
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = SEED,
    ceiling: Estimate | None = None,
) -> JudgeAgreement:
    """Every metric of one judge's verdicts on one human-labelled set. Items without a gold label
    (no majority) are left out of the label metrics; verdicts on items the set lacks are an error."""
    judges = {v.judge for v in verdicts}
    if len(judges) != 1:
        raise ValueError(f"expected one judge's verdicts, got {sorted(judges)}")
    items = _verdicts_by_item(human_set, verdicts)
    labelled = [(item, group) for item, group in items if item.gold is not None]

    def counted(group: list[JudgeVerdict]) -> list[JudgeVerdict]:
        return [v for v in group if _counted(v, human_set)]

    correct = [sum(v.verdict == item.gold for v in counted(group)) for item, group in labelled]
    trials = [len(counted(group)) for _, group in labelled]
    pairs = [[(v.verdict, str(item.gold)) for v in counted(group)] for item, group in labelled]

    both = [group for _, group in items if {v.order for v in group} == {"as_is", "swapped"}]
    consistent = [
        float(len({v.verdict for v in group}) == 1 and all(v.verdict != "unparsed" for v in group) and len(group) == 2)
        for group in both
    ]
    decisive = [[v for v in group if v.decisive] for _, group in items]
    different_lengths = [(item, [v for v in group if v.decisive]) for item, group in items if item.longer != "tie"]
    gold_decisive: list[Label] = [item.gold for item, _ in labelled if item.gold in ("a", "b")]  # type: ignore[misc]
    gold_lengths = [item for item, _ in labelled if item.gold in ("a", "b") and item.longer != "tie"]
    costs = [v.cost_usd for v in verdicts if v.cost_usd is not None]
    return JudgeAgreement(
        judge=judges.pop(),
        set_name=human_set.name,
        items=len(items),
        verdicts=len(verdicts),
        orders=max(len({v.order for v in group}) for _, group in items) if items else 0,
        unparsed=sum(v.verdict == "unparsed" for v in verdicts),
        ties=sum(v.verdict == "tie" for v in verdicts),
        cost_usd=sum(costs) if costs else None,
        accuracy=proportion(correct, trials, rounds, seed),
        kappa=cohen_kappa_estimate(pairs, rounds, seed),
        human_kappa=ceiling if ceiling is not None else human_ceiling(human_set, rounds, seed),
        position_consistency=proportion(consistent, [1] * len(consistent), rounds, seed),
        first_wins=proportion(
            [sum(bool(v.first_won) for v in group) for group in decisive], [len(g) for g in decisive], rounds, seed
        ),
        human_first_wins=proportion([float(g == "a") for g in gold_decisive], [1] * len(gold_decisive), rounds, seed),
        longer_wins=proportion(
            [sum(v.verdict == item.longer for v in group) for item, group in different_lengths],
            [len(group) for _, group in different_lengths],
            rounds,
            seed,
        ),
        human_longer_wins=proportion(
            [float(item.gold == item.longer) for item in gold_lengths], [1] * len(gold_lengths), rounds, seed
        ),
    )


def agreement_table(
    sets: Mapping[str, HumanSet],
    verdicts: Sequence[JudgeVerdict],
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = SEED,
) -> list[JudgeAgreement]:
    """Every judge on every human-labelled set it has verdicts on (sets in the mapping's order,
    judges by name); verdicts on sets that are not human-labelled are ignored."""
    groups: dict[tuple[str, str], list[JudgeVerdict]] = {}
    for verdict in verdicts:
        if verdict.set_name in sets:
            groups.setdefault((verdict.set_name, verdict.judge), []).append(verdict)
    ceilings = {name: human_ceiling(sets[name], rounds, seed) for name in {name for name, _ in groups}}
    return [
        judge_agreement(sets[name], group, rounds, seed, ceilings[name])
        for (name, _), group in sorted(groups.items(), key=lambda entry: (list(sets).index(entry[0][0]), entry[0][1]))
    ]


def metric_rows(rows: Sequence[JudgeAgreement]) -> list[AgreementMetric]:
    return [
        AgreementMetric(row.judge, row.set_name, name, e.value, e.low, e.high, e.n, e.method)
        for row in rows
        for name in METRICS
        for e in [getattr(row, name)]
    ]


@dataclass(frozen=True)
class ClassificationScores:
    """Accuracy and macro-averaged precision, recall and F1 over the labels (as PandaLM reports
    its judges against the annotators' majority)."""

    n: int
    accuracy: float
    precision: float
    recall: float
    f1: float


def classification_scores(
    pairs: Sequence[tuple[str, str]], labels: Sequence[str] = ("a", "b", "tie")
) -> ClassificationScores:
    """(predicted, true) pairs scored as scikit-learn's `average="macro"` does over `labels`: a
    label never predicted (or never true) has precision (recall) 0, and F1 is each label's harmonic
    mean of the two, averaged (not the harmonic mean of the averages)."""
    if not pairs:
        raise ValueError("no pairs")
    precisions, recalls, f1s = [], [], []
    for label in labels:
        hits = sum(1 for predicted, true in pairs if predicted == label and true == label)
        predicted_count = sum(1 for predicted, _ in pairs if predicted == label)
        true_count = sum(1 for _, true in pairs if true == label)
        precision = hits / predicted_count if predicted_count else 0.0
        recall = hits / true_count if true_count else 0.0
        precisions.append(precision)
        recalls.append(recall)
        f1s.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    return ClassificationScores(
        n=len(pairs),
        accuracy=sum(predicted == true for predicted, true in pairs) / len(pairs),
        precision=sum(precisions) / len(labels),
        recall=sum(recalls) / len(labels),
        f1=sum(f1s) / len(labels),
    )
