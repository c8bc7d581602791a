"""The prompts the engine's tests run on: data/harness_prompts.json, written by the platform's
speed/engine_prompts.py (GSM8K's, gsm8k_cot's and MMLU-Pro's by lm-evaluation-harness; ARC-Challenge
requests from the slice's rows) and checked there, so the engine's tests need nothing of the platform."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from eval_engine import LoglikelihoodRequest

FILE = Path(__file__).parent / "data" / "harness_prompts.json"


@functools.cache
def harness_prompts() -> dict:
    return json.loads(FILE.read_text(encoding="utf-8"))


def loglikelihood_requests(name: str) -> list[LoglikelihoodRequest]:
    """A named set of (context, continuation) requests: ARC-Challenge 3- or 5-shot, MMLU-Pro 5-shot."""
    return [LoglikelihoodRequest(context, continuation) for context, continuation in harness_prompts()[name]]


def generation_prompts(name: str, items: int | None = None) -> tuple[list[str], tuple[str, ...]]:
    """A benchmark's first generation prompts (gsm8k: 5-shot; gsm8k_cot: one 8-shot header) and its
    stop sequences."""
    entry = harness_prompts()[name]
    return entry["prompts"][:items], tuple(entry["stop"])
