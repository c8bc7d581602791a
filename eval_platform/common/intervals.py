"""95% intervals of proportions, one method for every domain: Wilson's score interval where each item
is one trial with a 0/1 outcome; else the percentile interval of the statistic over items resampled
with replacement (`BOOTSTRAP_ROUNDS`, seeded, so every run gives the same interval): an item of
several trials (IFEval's instructions of one prompt, a pair judged in both orders) or a value in
[0, 1] (TruthfulQA's mc2 probability mass). Each bound lies in [0, 1], whatever the number of
items, all right or all wrong. `Estimate.method` says how an interval was made."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Z95 = 1.959963984540054
BOOTSTRAP_ROUNDS = 2000
SEED = 0
IntervalMethod = Literal["wilson", "bootstrap", "none"]


@dataclass(frozen=True)
class Estimate:
    """A statistic with its 95% interval and the number of items it rests on."""

    value: float | None
    low: float | None
    high: float | None
    n: int
    method: IntervalMethod

    @classmethod
    def empty(cls) -> Estimate:
        return cls(None, None, None, 0, "none")


# --- intervals ----------------------------------------------------------------------------------


def wilson(successes: float, trials: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for a proportion."""
    if trials <= 0:
        raise ValueError("no trials")
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z / (1 + z * z / trials) * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    return max(0.0, centre - half), min(1.0, centre + half)


def resample_counts(n: int, rounds: int = BOOTSTRAP_ROUNDS, seed: int = SEED) -> np.ndarray:
    """How often each of n items is drawn in each bootstrap round (rounds x n)."""
    return np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=rounds)


def percentiles(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return math.nan, math.nan
    low, high = np.percentile(finite, [2.5, 97.5])
    return float(low), float(high)


def proportion(
    successes: Sequence[float],
    trials: Sequence[int],
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = SEED,
    method: IntervalMethod | None = None,
) -> Estimate:
    """Successes over trials pooled over items (each item: its successes and trials). Wilson's
    interval when every item is one trial, else a bootstrap over items (`method` forces one)."""
    pairs = [(s, t) for s, t in zip(successes, trials, strict=True) if t > 0]
    if not pairs:
        return Estimate.empty()
    s = np.array([p[0] for p in pairs], dtype=float)
    t = np.array([p[1] for p in pairs], dtype=float)
    value = float(s.sum() / t.sum())
    method = method or ("wilson" if np.all(t == 1) else "bootstrap")
    if method == "wilson":
        low, high = wilson(float(s.sum()), int(t.sum()))
    else:
        counts = resample_counts(len(pairs), rounds, seed)
        with np.errstate(invalid="ignore", divide="ignore"):
            low, high = percentiles((counts @ s) / (counts @ t))
    return Estimate(value, low, high, len(pairs), method)


def item_interval(values: Sequence[float | Sequence[float]]) -> Estimate:
    """The mean of items' values with its 95% interval: Wilson's for 0/1 values, a bootstrap over
    items for values in [0, 1] and for items of several 0/1 trials (a list each, pooled); none for
    values that are not proportions (outside [0, 1], or lists of other numbers than 0 and 1)."""
    if not values:
        return Estimate.empty()
    if all(isinstance(v, Sequence) for v in values):
        several = [list(map(float, v)) for v in values]  # type: ignore[arg-type]
        if any(trial not in (0.0, 1.0) for item in several for trial in item):
            return Estimate(None, None, None, len(values), "none")  # not trials: a perplexity's (log-likelihood, words)
        return proportion([sum(v) for v in several], [len(v) for v in several], method="bootstrap")
    numbers = [float(v) for v in values]  # type: ignore[arg-type]
    if any(not 0.0 <= v <= 1.0 for v in numbers):
        return Estimate(sum(numbers) / len(numbers), None, None, len(numbers), "none")
    binary = all(v in (0.0, 1.0) for v in numbers)
    return proportion(numbers, [1] * len(numbers), method="wilson" if binary else "bootstrap")
