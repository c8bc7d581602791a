"""The leaderboard: each roster model's headline score on each benchmark (with its 95% interval)
and its protocol average, as a table and a plot.

A benchmark's headline is its task in the Open LLM Leaderboard (v1) protocol (mode, format, shots
and metric), or the headline its spec declares (metric and shots) for the others. A model without
that exact score shows the nearest one it has (same metric first, then format, mode and shots), and
the cell says what differs, so no number is shown as something it is not. A harness benchmark's
headline (harness_tasks.headline_rows: its declared metric and filter) is a row of the same table,
in mode `harness`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pandas as pd

from eval_platform.benchmarks.protocols import PROTOCOLS, ProtocolTask
from eval_platform.benchmarks.specs import BENCHMARKS

PRIMARY_PROTOCOL = "open_llm_leaderboard_v1"
HARNESS_MODE = "harness"  # a harness task's own requests, filters and metrics
Z_95 = 1.959964  # a 95% normal interval from the harness's standard error


def headline_task(benchmark: str) -> ProtocolTask:
    """The benchmark's task in the primary protocol, else the headline its spec declares."""
    tasks = {task.benchmark: task for task in PROTOCOLS[PRIMARY_PROTOCOL].tasks}
    if benchmark in tasks:
        return tasks[benchmark]
    spec = BENCHMARKS[benchmark]
    return ProtocolTask(
        benchmark,
        "loglikelihood" if spec.multiple_choice else "generate",
        spec.headline_metric,
        fewshot=spec.headline_fewshot,
    )


def _distance(score: Mapping[str, Any], task: ProtocolTask) -> tuple:
    return (
        score["metric"] != task.metric,
        score["prompt_format"] != task.prompt_format,
        score["mode"] != task.mode,
        score["num_fewshot"] != task.num_fewshot,
        -score["num_fewshot"],
        score["model_fingerprint"],
    )


def headline_scores(scores: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One score per model and benchmark: the headline, or the nearest the model has."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for score in scores:
        groups.setdefault((score["model"], score["benchmark"]), []).append(score)
    columns = (
        "model",
        "model_fingerprint",
        "benchmark",
        "mode",
        "prompt_format",
        "num_fewshot",
        "metric",
        "n",
        "accuracy",
        "ci_low",
        "ci_high",
    )
    return [
        {column: best[column] for column in columns}
        for (model, benchmark), group in sorted(groups.items())
        for best in [min(group, key=lambda s: _distance(s, headline_task(benchmark)))]
    ]


def harness_headline_scores(headlines: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Harness benchmarks' headlines (harness_tasks.headline_rows) as leaderboard rows: the metric
    named as the harness names it with its filter (`exact_match,strict-match`), the interval the
    harness's standard error gives where it reports one."""
    rows = []
    for h in headlines:
        half = Z_95 * h["stderr"] if h["stderr"] is not None else None
        rows.append(
            {
                "model": h["model"],
                "model_fingerprint": h["model_fingerprint"],
                "benchmark": h["benchmark"],
                "mode": HARNESS_MODE,
                "prompt_format": "harness",
                "num_fewshot": h["num_fewshot"],
                "metric": h["metric"] if h["filter"] == "none" else f"{h['metric']},{h['filter']}",
                "n": h["n"],
                "accuracy": h["value"],
                "ci_low": None if half is None else h["value"] - half,
                "ci_high": None if half is None else h["value"] + half,
            }
        )
    return rows


def _interval(score: Mapping[str, Any]) -> str:
    text = f"{score['accuracy']:.3f}"
    return text if score["ci_low"] is None else f"{text} [{score['ci_low']:.3f}, {score['ci_high']:.3f}]"


def _cell(score: Mapping[str, Any]) -> str:
    if score["mode"] == HARNESS_MODE:
        return _interval(score)
    task = headline_task(score["benchmark"])
    differs = [f"{score['num_fewshot']}-shot"] if score["num_fewshot"] != task.num_fewshot else []
    differs += [score[field] for field in ("prompt_format", "mode", "metric") if score[field] != getattr(task, field)]
    return f"{_interval(score)} ({', '.join(differs)})" if differs else _interval(score)


def _columns(headlines: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, bool]]:
    """The leaderboard's benchmark columns: (label, benchmark, is a harness benchmark), every spec's
    and then each harness benchmark that has a headline."""
    columns = []
    for benchmark in BENCHMARKS:
        task = headline_task(benchmark)
        columns.append((f"{benchmark} ({task.num_fewshot}-shot {task.metric})", benchmark, False))
    for benchmark in sorted({h["benchmark"] for h in headlines if h["mode"] == HARNESS_MODE}):
        first = next(h for h in headlines if h["benchmark"] == benchmark and h["mode"] == HARNESS_MODE)
        shots = "" if first["num_fewshot"] is None else f"{first['num_fewshot']}-shot "
        columns.append((f"{benchmark} (harness, {shots}{first['metric']})", benchmark, True))
    return columns


def short_fingerprint(fingerprint: str) -> str:
    return fingerprint.rsplit("/", 1)[-1]


def leaderboard_table(
    headlines: Sequence[Mapping[str, Any]],
    averages: Sequence[Mapping[str, Any]],
    benchmarks: Collection[str] | None = None,
) -> pd.DataFrame:
    """Models as rows; each benchmark's headline (`value [95% interval]`; only `benchmarks`' if given)
    and the protocol average (labelled complete or partial, per model) as columns; best complete
    average first."""
    columns = [c for c in _columns(headlines) if benchmarks is None or c[1] in benchmarks]
    models = sorted({h["model"] for h in headlines} | {a["model"] for a in averages})
    rows = []
    for model in models:
        own = [h for h in headlines if h["model"] == model]
        mean = [a for a in averages if a["model"] == model]
        row = {
            "model": model,
            "fingerprint": ", ".join(sorted({short_fingerprint(h["model_fingerprint"]) for h in own + mean})),
        }
        for label, benchmark, harness in columns:
            row[label] = next(
                (_cell(h) for h in own if h["benchmark"] == benchmark and (h["mode"] == HARNESS_MODE) == harness), ""
            )
        row[PRIMARY_PROTOCOL] = "; ".join(
            f"{a['accuracy']:.4f} ({a['status']})" if a["accuracy"] is not None else a["status"] for a in mean
        )
        complete = [a["accuracy"] for a in mean if a["status"] == "complete" and a["accuracy"] is not None]
        rows.append((-(max(complete) if complete else -1.0), model, row))
    return pd.DataFrame([row for *_, row in sorted(rows, key=lambda r: r[:2])])


def leaderboard_plot(headlines: Sequence[Mapping[str, Any]]) -> str:
    """Markdown embedding a PNG: each model's headline score per benchmark, with its 95% interval."""
    from eval_platform.common.plots import new_axes, png_markdown

    columns = [
        (name if not harness else f"{name} (harness)", (name, harness))
        for _, name, harness in _columns(headlines)
        if any(h["benchmark"] == name and (h["mode"] == HARNESS_MODE) == harness for h in headlines)
    ]
    models = sorted({h["model"] for h in headlines})
    figure, axes = new_axes(
        "Headline score per benchmark (95% interval)", size=(7, 1 + 0.5 * len(columns) * max(1, len(models)))
    )
    height = 0.8 / max(1, len(models))
    for i, model in enumerate(models):
        own = {(h["benchmark"], h["mode"] == HARNESS_MODE): h for h in headlines if h["model"] == model}
        ys = [b + (i - (len(models) - 1) / 2) * height for b in range(len(columns))]
        shown = [(y, own[key]) for y, (_, key) in zip(ys, columns, strict=False) if key in own]
        below = [0 if h["ci_low"] is None else h["accuracy"] - h["ci_low"] for _, h in shown]
        above = [0 if h["ci_high"] is None else h["ci_high"] - h["accuracy"] for _, h in shown]
        axes.barh(
            [y for y, _ in shown],
            [h["accuracy"] for _, h in shown],
            height=height,
            label=model,
            xerr=[below, above],
            capsize=2,
        )
    axes.set_yticks(range(len(columns)), [label for label, _ in columns])
    axes.set(xlabel="score", xlim=(0, max([1.0, *(h["ci_high"] or h["accuracy"] for h in headlines)])))
    axes.legend(fontsize="small")
    return png_markdown(figure, "headline score per benchmark and model")
