"""The harness's prompts the parity scripts run on: data/harness_prompts.json, written by the
platform's speed/engine_prompts.py from ../shared/benchmarks with lm-evaluation-harness (and
checked there against the harness), so the scripts need nothing of the platform."""

from __future__ import annotations

import json
from pathlib import Path

FILE = Path(__file__).parent / "data" / "harness_prompts.json"


def generation_prompts(name: str, items: int) -> tuple[list[str], int, tuple[str, ...]]:
    """A benchmark's first `items` generation prompts, its token budget and its stop sequences."""
    entry = json.loads(FILE.read_text(encoding="utf-8"))[name]
    if items > len(entry["prompts"]):
        raise SystemExit(f"{FILE}: {len(entry['prompts'])} {name} prompts, {items} asked (speed/engine_prompts.py)")
    return entry["prompts"][:items], entry["max_new_tokens"], tuple(entry["stop"])


def harness_texts(name: str, items: int | None = None) -> list[str]:
    """The first `items` texts of the file by name (all: None): GSM8K's questions, the perplexity
    task's paragraphs."""
    texts = json.loads(FILE.read_text(encoding="utf-8"))[name]
    if items is not None and items > len(texts):
        raise SystemExit(f"{FILE}: {len(texts)} {name}, {items} asked (speed/engine_prompts.py)")
    return texts[:items]
