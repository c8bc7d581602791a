"""The fitness document's formula (Framework v2): 75% judged quality, 25% compression, survival gate."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from statistics import mean

QUALITY_WEIGHT = 0.75
COMPRESSION_WEIGHT = 0.25
COMPRESSION_CAP = 20.0


def count_words(text: str) -> int:
    return len(text.split())


def ratio(original: int, compressed: int) -> float:
    """original / compressed, or 0 for an empty compression."""
    return original / compressed if compressed > 0 else 0.0


def fitness_score(quality_score_avg: float, compression_ratio: float, survival_factor: int) -> tuple[float, float]:
    """(raw_fitness, fitness) from the normalised quality and capped compression ratio."""
    quality_norm = quality_score_avg / 10.0
    compression_norm = min(compression_ratio / COMPRESSION_CAP, 1.0)
    raw_fitness = QUALITY_WEIGHT * quality_norm + COMPRESSION_WEIGHT * compression_norm
    return raw_fitness, raw_fitness * survival_factor


def panel_average(scores: Mapping[str, float | None], weights: Mapping[str, float] | None = None) -> float:
    """The panel's score: the plain mean of the judges that answered (None: failed), as the seed
    does, or their weighted mean (weights renormalised over the judges that answered; the plain
    mean again if those weights are all 0). 0 when no judge answered, as the fitness formula has it."""
    valid = {judge: score for judge, score in scores.items() if score is not None}
    if not valid:
        return 0.0
    weighted = {judge: (weights or {}).get(judge, 0.0) for judge in valid}
    total = sum(weighted.values())
    if total <= 0:
        return mean(valid.values())
    return sum(weighted[judge] * score for judge, score in valid.items()) / total


def calculate_fitness(
    original_text: str,
    compressed_text: str,
    quality_scores: Mapping[str, float | None],
    use_token_metric: bool,
    count_tokens: Callable[[str], int],
    judge_weights: Mapping[str, float] | None = None,
) -> dict:
    """Word and token metrics (both always computed), the panel's average of the judges that
    answered (`None` marks a failed judge; weighted by `judge_weights` where given), the word-based
    survival factor and the fitness (0 when every judge failed)."""
    original_words, compressed_words = count_words(original_text), count_words(compressed_text)
    original_tokens, compressed_tokens = count_tokens(original_text), count_tokens(compressed_text)
    word_ratio = ratio(original_words, compressed_words)
    token_ratio = ratio(original_tokens, compressed_tokens)
    compression_ratio = token_ratio if use_token_metric else word_ratio
    valid = [score for score in quality_scores.values() if score is not None]
    quality_score_avg = panel_average(quality_scores, judge_weights)
    survival_factor = 1 if 0 < compressed_words < original_words else 0
    raw_fitness, fitness = fitness_score(quality_score_avg, compression_ratio, survival_factor)
    if not valid:  # all judges failed: fitness 0 even for a successful compression
        fitness = 0.0
    return {
        "original_words": original_words,
        "compressed_words": compressed_words,
        "compression_ratio": compression_ratio,
        "word_compression_ratio": word_ratio,
        "original_tokens": original_tokens,
        "compressed_tokens": compressed_tokens,
        "token_compression_ratio": token_ratio,
        "quality_score_avg": quality_score_avg,
        "raw_fitness": raw_fitness,
        "survival_factor": survival_factor,
        "fitness": fitness,
    }
