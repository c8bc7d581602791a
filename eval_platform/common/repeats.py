"""Items answered k times (k sampled answers, inspect_ai's epochs): each item's answers reduced to one
value (pass@k, the majority answer, the mean score), and the standard error of a mean over samples
that are not independent (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640): the answers
to one item, or the items of one subject, are clustered. Each gives what inspect_ai 0.3.285 gives:
`pass_at_k` its `pass_at(k)` reducer, `majority_at_k` its `mode` reducer over the first k answers,
`item_means` its `mean` reducer, `clustered_stderr` its `stderr()` and `stderr(cluster=...)` metrics.

inspect_ai reduces an item's epochs (by default to their mean) before its metrics: its `stderr`
then clusters items, not answers. Clustering one item's answers is `clustered_stderr` over every
answer's score with the item as its cluster."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np


def pass_at_k(n: int, correct: int, k: int) -> float:
    """The chance that at least one of k answers drawn without replacement from an item's n is
    right, c of them being right: 1 - C(n-c, k) / C(n, k) (Chen et al. 2021), as a product."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if not 0 <= correct <= n:
        raise ValueError(f"{correct} right of {n} answers")
    if n - correct < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - correct + 1, n + 1)))


def majority_at_k(answers: Sequence[str], k: int) -> str:
    """The most frequent of the first k answers; of those tied, the one seen first (as
    lm-evaluation-harness's `majority_vote` filter and inspect_ai's `mode` reducer choose)."""
    if not 1 <= k <= len(answers):
        raise ValueError(f"majority@k needs 1 <= k <= {len(answers)} answers, got k={k}")
    return Counter(answers[:k]).most_common(1)[0][0]


def item_means(scores: Sequence[Sequence[float]]) -> list[float]:
    """Each item's mean score over its answers."""
    if any(len(item) == 0 for item in scores):
        raise ValueError("an item without answers")
    return [math.fsum(item) / len(item) for item in scores]


def clustered_stderr(values: Sequence[float], clusters: Sequence[Hashable] | None = None) -> float:
    """The standard error of the mean of values. Without clusters: their standard deviation (n-1)
    over √n. With a cluster label for each value: √(Σ_c (Σ_{i∈c} (x_i - x̄))² · C/(C-1)) / n, over
    C clusters (inspect_ai's finite-cluster correction). 0 for fewer than two values, or clusters."""
    x = np.asarray(values, dtype=float)
    n = x.size
    if clusters is None:
        return float(np.std(x, ddof=1) / math.sqrt(n)) if n >= 2 else 0.0
    if len(clusters) != n:
        raise ValueError(f"{len(clusters)} cluster labels for {n} values")
    if any(c is None or (isinstance(c, float) and math.isnan(c)) for c in clusters):
        raise ValueError("a value without a cluster")
    deviations: dict[Hashable, float] = {}
    mean = float(np.mean(x)) if n else 0.0
    for label, value in zip(clusters, x, strict=True):
        deviations[label] = deviations.get(label, 0.0) + (value - mean)
    count = len(deviations)
    if count < 2:
        return 0.0
    variance = sum(d * d for d in deviations.values())
    return math.sqrt(variance * count / (count - 1)) / n
