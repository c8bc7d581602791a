"""Where each page of the sample viewer is: its path (the viewer's routes are declared from these)
and its link (what Dagster's metadata carries, on the base URL it is given: the viewer's address as
users reach it, EVAL_VIEWER_URL)."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, urlencode

HOME = "/"
BENCHMARKS = "/benchmarks"
BENCHMARK = "/benchmarks/{benchmark}"
BENCHMARK_ITEM = "/benchmarks/{benchmark}/item"
ERAS = "/evolution"
ERA = "/evolution/{era}"
CANDIDATE = "/evolution/{era}/candidate"
SHEETS = "/blind"
SHEET = "/blind/{sheet_id}"
QUESTION = "/blind/{sheet_id}/question"
JUDGING = "/judging"
JUDGE_VERDICTS = "/judging/verdicts"


def path(template: str, query: Mapping[str, object] | None = None, **parts: object) -> str:
    """A page's path: `template` with its parts filled in (each quoted whole), and the query's
    parameters that are set."""
    filled = template.format(**{name: quote(str(value), safe="") for name, value in parts.items()})
    shown = {
        name: value for name, value in (query or {}).items() if value is not None and value != "" and value is not False
    }
    return filled + (f"?{urlencode(shown)}" if shown else "")


def link(base_url: str, template: str, query: Mapping[str, object] | None = None, **parts: object) -> str:
    """A page's address on the viewer at `base_url` (as users reach it)."""
    return base_url.rstrip("/") + path(template, query, **parts)


def evaluation_link(base_url: str, benchmark: str, model: str) -> str:
    """A roster model's evaluation of a benchmark: its scores and every item."""
    return link(base_url, BENCHMARK, {"model": model}, benchmark=benchmark)


def comparison_link(base_url: str, benchmark: str, model: str, against: str) -> str:
    """Two roster models on a benchmark, side by side: the items they score differently."""
    return link(base_url, BENCHMARK, {"model": model, "against": against, "flipped": "differ"}, benchmark=benchmark)


def era_link(base_url: str, era: str) -> str:
    return link(base_url, ERA, era=era)


def sheet_link(base_url: str, sheet_id: str) -> str:
    return link(base_url, SHEET, sheet_id=sheet_id)


def judging_link(base_url: str) -> str:
    """Every judge against the humans of each labelled set, and the MT-Bench leaderboards."""
    return link(base_url, JUDGING)
