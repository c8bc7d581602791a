"""Two models (or two runs of one) on the same items: the accuracy difference, an exact McNemar test
on the items where they disagree, and a paired bootstrap 95% interval of the difference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


def exact_mcnemar(only_first: int, only_second: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of the discordant items at 1/2."""
    from scipy.stats import binomtest

    discordant = only_first + only_second
    return 1.0 if discordant == 0 else float(binomtest(only_first, discordant, 0.5).pvalue)


def paired_bootstrap_interval(first: list[float], second: list[float], resamples: int = 2000,
                              seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of mean(first) - mean(second), resampling items (pairs kept)."""
    import numpy as np

    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if len(a) == 0:
        return 0.0, 0.0
    picks = np.random.default_rng(seed).integers(0, len(a), size=(resamples, len(a)))
    differences = (a[picks] - b[picks]).mean(axis=1)
    return float(np.percentile(differences, 2.5)), float(np.percentile(differences, 97.5))


@dataclass(frozen=True)
class PairedComparison:
    items: int  # items both were scored on
    first_accuracy: float
    second_accuracy: float
    difference: float  # first - second
    only_first: int  # items the first got right and the second wrong (0/1 metrics)
    only_second: int
    mcnemar_p: float | None  # None for a metric that is not 0/1 (mc2)
    ci_low: float
    ci_high: float


def compare(first: Mapping[str, float], second: Mapping[str, float], seed: int = 0) -> PairedComparison:
    """Compare two item -> value mappings on the items they share."""
    shared = sorted(set(first) & set(second))
    a, b = [first[item] for item in shared], [second[item] for item in shared]
    n = len(shared)
    binary = all(v in (0.0, 1.0) for v in a + b)
    only_first = sum(x == 1.0 and y == 0.0 for x, y in zip(a, b))
    only_second = sum(x == 0.0 and y == 1.0 for x, y in zip(a, b))
    low, high = paired_bootstrap_interval(a, b, seed=seed)
    first_accuracy, second_accuracy = (sum(a) / n, sum(b) / n) if n else (0.0, 0.0)
    return PairedComparison(n, first_accuracy, second_accuracy, first_accuracy - second_accuracy, only_first,
                            only_second, exact_mcnemar(only_first, only_second) if binary else None, low, high)


def flipped_to_wrong(before: Mapping[str, float], after: Mapping[str, float]) -> list[str]:
    """The items right before and wrong after."""
    return sorted(item for item in set(before) & set(after) if before[item] == 1.0 and after[item] == 0.0)
