"""Scoring: answer extraction, accuracy with a confidence interval, and the per-item report of the
benchmark specification (`0. Output: A, Reference: A :: O` ... `Score: 0.5`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

from eval_platform.core.benchmarks import gsm8k_final_number, normalize_number


def extract_numbers(text: str) -> tuple[str | None, str | None]:
    """GSM8K answers from generated text: (strict: after `####`, flexible: the last number)."""
    numbers = re.findall(r"-?\$?\d[\d,]*(?:\.\d+)?", text)
    flexible = normalize_number(numbers[-1]) if numbers else None
    return gsm8k_final_number(text), flexible


def argmax_label(labels: Sequence[str], scores: Sequence[float]) -> str:
    """The label of the highest score; the first one wins ties (deterministic)."""
    return labels[max(range(len(scores)), key=lambda i: (scores[i], -i))]


def wilson_interval(correct: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval for a proportion (well behaved at 0 and n)."""
    if n == 0:
        return 0.0, 0.0
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, round(centre - half, 12)), min(1.0, round(centre + half, 12))


@dataclass(frozen=True)
class Score:
    n: int
    correct: int
    accuracy: float
    ci_low: float
    ci_high: float
    report: str


def score_items(outputs: Sequence[str | None], references: Sequence[str]) -> Score:
    """Accuracy of outputs against references, with the specification's report:
    `0. Output: A, Reference: A :: O` per item, then `Score: 0.5`."""
    lines, correct = [], 0
    for i, (output, reference) in enumerate(zip(outputs, references, strict=True)):
        hit = output is not None and str(output) == str(reference)
        correct += hit
        lines.append(f"{i}. Output: {output}, Reference: {reference} :: {'O' if hit else 'X'}")
    n = len(references)
    accuracy = correct / n if n else 0.0
    lines.append(f"Score: {round(accuracy, 4)}")
    return Score(n, correct, accuracy, *wilson_interval(correct, n), "\n".join(lines))
