"""95% intervals of proportions and of differences of proportions, one method per kind of figure for
every domain (the tables, the printed summary and the viewer), none of width zero unless the data
are certain by construction:
- each item one 0/1 trial: Wilson's score interval;
- items of several 0/1 trials (IFEval's instructions of one prompt, an item's k sampled answers, a
  pair judged in both orders): the percentile interval of the pooled proportion over items
  resampled with replacement (`BOOTSTRAP_ROUNDS`, seeded, so every run gives the same interval),
  never narrower than Wilson's interval on all the trials as if they were independent (trials of
  one item are alike more often than not, which only widens the truth);
- items valued in [0, 1] (TruthfulQA's mc2 probability mass, pass@k, a win with ties as halves): the
  same bootstrap; where items are few (`FEW_ITEMS`) or all alike, where a bootstrap cannot see the
  spread, never narrower than Wilson's interval on as many items as trials (values of 0 and 1, the
  most spread a mean can have, would give it);
- a difference of two proportions on the same 0/1 items: Newcombe's paired score interval (1998,
  method 10), from the two Wilson intervals and the items' agreement (`paired_difference`);
  of values in [0, 1]: the bootstrap over items, floored as above by Newcombe's square-and-add of
  the two Wilson intervals; of other values: the bootstrap alone.
Each bound lies in [0, 1] (a difference's in [-1, 1]). `Estimate.method` says how one was made."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Z95 = 1.959963984540054
BOOTSTRAP_ROUNDS = 2000
SEED = 0
FEW_ITEMS = 30  # fewer items than this: a bootstrap over items is floored by Wilson's interval
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


def bootstrapped(value: float, resampled: np.ndarray, n: int) -> Estimate:
    """A statistic that is no proportion (a kappa) with the percentile interval of its values over
    bootstrap rounds; none where every round gives one value, which no floor can widen honestly."""
    low, high = percentiles(resampled)
    if not low < high:
        return Estimate(value, None, None, n, "none")
    return Estimate(value, low, high, n, "bootstrap")


def proportion(
    successes: Sequence[float],
    trials: Sequence[int],
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = SEED,
    method: IntervalMethod | None = None,
) -> Estimate:
    """Successes over trials pooled over items (each item: its successes and trials). Wilson's
    interval when every item is one 0/1 trial, else a bootstrap over items floored by Wilson's as
    the module says (`method` forces one)."""
    pairs = [(s, t) for s, t in zip(successes, trials, strict=True) if t > 0]
    if not pairs:
        return Estimate.empty()
    s = np.array([p[0] for p in pairs], dtype=float)
    t = np.array([p[1] for p in pairs], dtype=float)
    value = float(s.sum() / t.sum())
    method = method or ("wilson" if np.all(t == 1) and np.all(np.isin(s, (0.0, 1.0))) else "bootstrap")
    if method == "wilson":
        low, high = wilson(float(s.sum()), int(t.sum()))
    else:
        counts = resample_counts(len(pairs), rounds, seed)
        with np.errstate(invalid="ignore", divide="ignore"):
            low, high = percentiles((counts @ s) / (counts @ t))
        if np.any(t > 1) or len(pairs) < FEW_ITEMS or np.ptp(s / t) == 0:
            floor = wilson(float(s.sum()), int(t.sum()))
            low, high = min(low, floor[0]), max(high, floor[1])
    return Estimate(value, low, high, len(pairs), method)


def paired_difference(
    first: Sequence[float], second: Sequence[float], rounds: int = BOOTSTRAP_ROUNDS, seed: int = SEED
) -> tuple[float, float, str]:
    """The 95% interval of mean(first) - mean(second) over paired items, and how it was made:
    Newcombe's paired score interval for 0/1 items, else the bootstrap over items (pairs kept),
    floored for values in [0, 1] where items are few or their differences all alike by Newcombe's
    square-and-add of the two Wilson intervals (as if unpaired: the floor never shrinks with a
    correlation that few items cannot show)."""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if a.size == 0 or a.size != b.size:
        raise ValueError(f"{a.size} and {b.size} paired values")
    if np.all(np.isin(a, (0.0, 1.0))) and np.all(np.isin(b, (0.0, 1.0))):
        return (*newcombe_paired(a.astype(bool), b.astype(bool)), PAIRED_SCORE)
    picks = resample_counts(a.size, rounds, seed)
    low, high = percentiles(picks @ (a - b) / a.size)
    proportions = bool(np.all((a >= 0) & (a <= 1) & (b >= 0) & (b <= 1)))
    if proportions and (a.size < FEW_ITEMS or np.ptp(a - b) == 0):
        floor = _square_and_add(float(a.mean()), float(b.mean()), a.size, 0.0)
        low, high = min(low, floor[0]), max(high, floor[1])
    return low, high, PAIRED_BOOTSTRAP


PAIRED_SCORE = "Newcombe's paired score interval"
PAIRED_BOOTSTRAP = "paired bootstrap over items"


def newcombe_paired(first: np.ndarray, second: np.ndarray) -> tuple[float, float]:
    """Newcombe's (1998) method 10 for paired 0/1 outcomes: Wilson's interval of each proportion,
    squared and added, less twice their product by the continuity-corrected phi of the 2x2 table."""
    both, only_first = int(np.sum(first & second)), int(np.sum(first & ~second))
    only_second, neither = int(np.sum(~first & second)), int(np.sum(~first & ~second))
    n = first.size
    margins = (both + only_first) * (only_second + neither) * (both + only_second) * (only_first + neither)
    cross = both * neither - only_first * only_second
    if margins == 0 or 0 <= cross <= n / 2:
        phi = 0.0
    else:
        phi = (cross - n / 2 if cross > n / 2 else cross) / math.sqrt(margins)
    return _square_and_add((both + only_first) / n, (both + only_second) / n, n, phi)


def _square_and_add(p1: float, p2: float, n: int, phi: float) -> tuple[float, float]:
    """Newcombe's square-and-add interval of p1 - p2 from their Wilson intervals on n trials each
    and the correlation phi between the two estimates."""
    low1, high1 = wilson(p1 * n, n)
    low2, high2 = wilson(p2 * n, n)
    below = math.sqrt(max(0.0, (p1 - low1) ** 2 + (high2 - p2) ** 2 - 2 * phi * (p1 - low1) * (high2 - p2)))
    above = math.sqrt(max(0.0, (p2 - low2) ** 2 + (high1 - p1) ** 2 - 2 * phi * (p2 - low2) * (high1 - p1)))
    return max(-1.0, p1 - p2 - below), min(1.0, p1 - p2 + above)


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
