"""The leaderboard: each roster model's headline on each benchmark (with its 95% interval) and each
protocol's average, as a table and a plot.

A benchmark's headline is the result its declaration names (`headline`: solver, shots, metric and
filter) of its own task (a group's, where the benchmark has several tasks). A model without that
exact result shows the nearest one it has (same metric and filter first, then solver and shots).
A column's header says what its cells hold, measured as they were (shots, metric, solver, a limit
on the documents, a generation budget): models measured otherwise are in columns of their own, so
no number is shown as something it is not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

import pandas as pd

from eval_platform.benchmarks.declarations import Benchmark, Headline

COLUMNS = ("model", "model_fingerprint", "benchmark", "solver", "settings_key", "task", "metric", "filter",
           "num_fewshot", "n", "value", "ci_low", "ci_high", "cut_at_budget")  # fmt: skip
# a headline is flagged where more of its generations than this were cut at the budget
FLAGGED_CUT_AT_BUDGET = 0.05


class HeadlineRow(TypedDict):
    """A model's headline on a benchmark: a `leaderboard` row (`COLUMNS`)."""

    model: str
    model_fingerprint: str
    benchmark: str
    solver: str
    settings_key: str
    task: str
    metric: str
    filter: str
    num_fewshot: int | None
    n: int | None
    value: float
    ci_low: float | None
    ci_high: float | None
    cut_at_budget: float | None


def headline_task(benchmark: Benchmark) -> str:
    """The task whose result is the benchmark's number: its task, or the benchmark's own group where
    its documents belong to several tasks (MMLU's subjects)."""
    return benchmark.name if "{" in benchmark.task else benchmark.task


def headline_of(benchmark: Benchmark) -> Headline:
    """The declared headline, its shots the declaration's where it names none."""
    headline = benchmark.headline
    shots = headline.num_fewshot if headline.num_fewshot is not None else benchmark.num_fewshot
    return headline.model_copy(update={"num_fewshot": shots})


def _distance(row: Mapping[str, Any], headline: Headline, sampled: bool) -> tuple:
    """How far a result is from the headline: its metric, filter, solver and shots, then whether it
    was sampled where the declaration is not (or the other way round: a sampled run launched beside
    the nightly greedy one does not take its place), then the most shots."""
    return (
        headline.metric is not None and row["metric"] != headline.metric,
        row["filter"] != headline.filter,
        row["solver"] != headline.solver,
        headline.num_fewshot is not None and row["num_fewshot"] != headline.num_fewshot,
        ("sample" in str(row["settings_key"])) != sampled,  # settings_key names any sampling (`4 samples at ...`)
        -(row["num_fewshot"] or 0),
        row["model_fingerprint"],
    )


def headline_rows(results: Sequence[Mapping[str, Any]], benchmarks: Mapping[str, Benchmark]) -> list[HeadlineRow]:
    """One row per model and benchmark: its headline, or the nearest result it has."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in results:
        if row["value"] is not None:
            groups.setdefault((row["model"], row["benchmark"]), []).append(row)
    rows = []
    for (_, name), group in sorted(groups.items()):
        benchmark = benchmarks.get(name) or Benchmark(name=name, task=name)
        own = [r for r in group if r["task"] == headline_task(benchmark)] or group
        best = min(own, key=lambda r: _distance(r, headline_of(benchmark), benchmark.sets_sampling))
        rows.append(cast("HeadlineRow", {column: best.get(column) for column in COLUMNS}))  # a result's columns
    return rows


def _interval(row: HeadlineRow) -> str:
    """A headline's cell: its value, its interval, and a flag where too many answers were cut at the budget."""
    text = f"{row['value']:.3f}"
    text = text if row["ci_low"] is None else f"{text} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
    flag = budget_flag(row.get("cut_at_budget"))
    return f"{text}, {flag}" if flag else text


def budget_flag(cut_at_budget: float | None) -> str:
    """`12.5% cut at the budget` where more than `FLAGGED_CUT_AT_BUDGET` of the answers were, else empty."""
    return f"{cut_at_budget:.1%} cut at the budget" if (cut_at_budget or 0) > FLAGGED_CUT_AT_BUDGET else ""


def measured_label(row: HeadlineRow) -> str:
    """What a headline holds: its shots and metric (and filter), its solver where not the
    harness's, and the rest of its settings key (a limit on the documents, a generation budget,
    ...), e.g. `0-shot acc_norm by letter, first 5 documents`."""
    shots = f"{row['num_fewshot']}-shot " if row["num_fewshot"] is not None else ""
    metric = row["metric"] if row["filter"] == "none" else f"{row['metric']},{row['filter']}"
    solver = "" if row["solver"] == "harness" else f" by {row['solver']}"
    rest = [part for part in str(row["settings_key"]).split(", ") if not part.endswith(("-shot", "default shots"))]
    return ", ".join([f"{shots}{metric}{solver}", *rest])


def short_fingerprint(fingerprint: str) -> str:
    return fingerprint.rsplit("/", 1)[-1]


def leaderboard_table(
    headlines: Sequence[HeadlineRow],
    averages: Sequence[Mapping[str, Any]],
    benchmarks: Mapping[str, Benchmark],
    imported: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Models as rows, each with its fingerprint (an imported model's: where its numbers came from,
    `imported`: its tool, version and file); each benchmark's headline (`value [95% interval]`,
    flagged where more than 5% of its answers were cut at the budget) under a header that says what
    was measured (`measured_label`; models measured otherwise in a column of their own), and each
    protocol's average with its status as columns; best complete average first."""
    shown = [name for name in benchmarks if any(h["benchmark"] == name for h in headlines)]
    shown += sorted({h["benchmark"] for h in headlines} - set(benchmarks))
    columns = {
        (h["benchmark"], measured_label(h)): f"{h['benchmark']} ({measured_label(h)})"
        for name in shown
        for h in sorted(headlines, key=lambda h: h["model"])
        if h["benchmark"] == name
    }
    protocols = sorted({a["protocol"] for a in averages})
    rows = []
    for model in sorted({h["model"] for h in headlines} | {a["model"] for a in averages}):
        own = {(h["benchmark"], measured_label(h)): h for h in headlines if h["model"] == model}
        row: dict[str, str] = {
            "model": model,
            "fingerprint": (imported or {}).get(model)
            or ", ".join(sorted({short_fingerprint(h["model_fingerprint"]) for h in own.values()})),
        }
        for key, header in columns.items():
            row[header] = _interval(own[key]) if key in own else ""
        complete = []
        for protocol in protocols:
            mine = [a for a in averages if a["model"] == model and a["protocol"] == protocol]
            row[f"{protocol} (average)"] = "; ".join(
                f"{a['score']:.4f} ({a['status']})" if a["score"] is not None else a["status"] for a in mine
            )
            complete += [a["score"] for a in mine if a["status"] == "complete" and a["score"] is not None]
        rows.append((-(max(complete) if complete else -1.0), model, row))
    return pd.DataFrame([row for *_, row in sorted(rows, key=lambda r: r[:2])])


def leaderboard_plot(headlines: Sequence[HeadlineRow]) -> str:
    """Markdown embedding a PNG: each model's headline per benchmark, with its 95% interval."""
    from eval_platform.common.plots import new_axes, png_markdown

    names = sorted({h["benchmark"] for h in headlines})
    models = sorted({h["model"] for h in headlines})
    figure, axes = new_axes(
        "Headline score per benchmark (95% interval)", size=(7, 1 + 0.5 * len(names) * max(1, len(models)))
    )
    height = 0.8 / max(1, len(models))
    for i, model in enumerate(models):
        own = {h["benchmark"]: h for h in headlines if h["model"] == model}
        shown = [(b + (i - (len(models) - 1) / 2) * height, own[n]) for b, n in enumerate(names) if n in own]
        below = [0 if h["ci_low"] is None else max(0.0, h["value"] - h["ci_low"]) for _, h in shown]
        above = [0 if h["ci_high"] is None else max(0.0, h["ci_high"] - h["value"]) for _, h in shown]
        axes.barh([y for y, _ in shown], [h["value"] for _, h in shown], height=height, label=model,
                  xerr=[below, above], capsize=2)  # fmt: skip
    axes.set_yticks(range(len(names)), names)
    axes.set(xlabel="score", xlim=(0, max([1.0, *((h["ci_high"] or h["value"]) for h in headlines)])))
    axes.legend(fontsize="small")
    return png_markdown(figure, "headline score per benchmark and model")
