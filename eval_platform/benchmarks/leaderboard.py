"""The leaderboard: each roster model's headline score on each benchmark (with its 95% interval)
and its protocol average, as a table and a plot.

A benchmark's headline is its task in the Open LLM Leaderboard (v1) protocol (mode, format, shots
and metric), or the headline its spec declares (metric and shots) for the others. A model without
that exact score shows the nearest one it has (same metric first, then format, mode and shots), and
the cell says what differs, so no number is shown as something it is not.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from eval_platform.benchmarks.protocols import PROTOCOLS, ProtocolTask
from eval_platform.benchmarks.specs import BENCHMARKS

PRIMARY_PROTOCOL = "open_llm_leaderboard_v1"


def headline_task(benchmark: str) -> ProtocolTask:
    """The benchmark's task in the primary protocol, else the headline its spec declares."""
    tasks = {task.benchmark: task for task in PROTOCOLS[PRIMARY_PROTOCOL].tasks}
    if benchmark in tasks:
        return tasks[benchmark]
    spec = BENCHMARKS[benchmark]
    return ProtocolTask(benchmark, "loglikelihood" if spec.multiple_choice else "generate",
                        spec.headline_metric, fewshot=spec.headline_fewshot)


def _distance(score: Mapping[str, Any], task: ProtocolTask) -> tuple:
    return (score["metric"] != task.metric, score["prompt_format"] != task.prompt_format, score["mode"] != task.mode,
            score["num_fewshot"] != task.num_fewshot, -score["num_fewshot"], score["model_fingerprint"])


def headline_scores(scores: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One score per model and benchmark: the headline, or the nearest the model has."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for score in scores:
        groups.setdefault((score["model"], score["benchmark"]), []).append(score)
    columns = ("model", "model_fingerprint", "benchmark", "mode", "prompt_format", "num_fewshot", "metric", "n",
               "accuracy", "ci_low", "ci_high")
    return [{column: best[column] for column in columns}
            for (model, benchmark), group in sorted(groups.items())
            for best in [min(group, key=lambda s: _distance(s, headline_task(benchmark)))]]


def _cell(score: Mapping[str, Any]) -> str:
    task = headline_task(score["benchmark"])
    differs = [f"{score['num_fewshot']}-shot"] if score["num_fewshot"] != task.num_fewshot else []
    differs += [score[field] for field in ("prompt_format", "mode", "metric") if score[field] != getattr(task, field)]
    text = f"{score['accuracy']:.3f} [{score['ci_low']:.3f}, {score['ci_high']:.3f}]"
    return f"{text} ({', '.join(differs)})" if differs else text


def short_fingerprint(fingerprint: str) -> str:
    return fingerprint.rsplit("/", 1)[-1]


def leaderboard_table(headlines: Sequence[Mapping[str, Any]], averages: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Models as rows; each benchmark's headline (`value [95% interval]`) and the protocol average
    (labelled complete or partial, per model) as columns; best complete average first."""
    models = sorted({h["model"] for h in headlines} | {a["model"] for a in averages})
    rows = []
    for model in models:
        own = [h for h in headlines if h["model"] == model]
        mean = [a for a in averages if a["model"] == model]
        row = {"model": model, "fingerprint": ", ".join(sorted({short_fingerprint(h["model_fingerprint"])
                                                                for h in own + mean}))}
        for benchmark in BENCHMARKS:
            task = headline_task(benchmark)
            cell = next((_cell(h) for h in own if h["benchmark"] == benchmark), "")
            row[f"{benchmark} ({task.num_fewshot}-shot {task.metric})"] = cell
        row[PRIMARY_PROTOCOL] = "; ".join(
            f"{a['accuracy']:.4f} ({a['status']})" if a["accuracy"] is not None else a["status"] for a in mean)
        complete = [a["accuracy"] for a in mean if a["status"] == "complete" and a["accuracy"] is not None]
        rows.append((-(max(complete) if complete else -1.0), model, row))
    return pd.DataFrame([row for *_, row in sorted(rows, key=lambda r: r[:2])])


def leaderboard_plot(headlines: Sequence[Mapping[str, Any]]) -> str:
    """Markdown embedding a PNG: each model's headline score per benchmark, with its 95% interval."""
    from eval_platform.common.plots import new_axes, png_markdown

    benchmarks = [b for b in BENCHMARKS if any(h["benchmark"] == b for h in headlines)]
    models = sorted({h["model"] for h in headlines})
    figure, axes = new_axes("Headline score per benchmark (95% interval)", size=(7, 1 + 0.5 * len(benchmarks)
                                                                                   * max(1, len(models))))
    height = 0.8 / max(1, len(models))
    for i, model in enumerate(models):
        own = {h["benchmark"]: h for h in headlines if h["model"] == model}
        ys = [b + (i - (len(models) - 1) / 2) * height for b in range(len(benchmarks))]
        shown = [(y, own[name]) for y, name in zip(ys, benchmarks) if name in own]
        below = [h["accuracy"] - h["ci_low"] for _, h in shown]
        above = [h["ci_high"] - h["accuracy"] for _, h in shown]
        axes.barh([y for y, _ in shown], [h["accuracy"] for _, h in shown], height=height, label=model,
                  xerr=[below, above], capsize=2)
    axes.set_yticks(range(len(benchmarks)), benchmarks)
    axes.set(xlabel="score", xlim=(0, 1))
    axes.legend(fontsize="small")
    return png_markdown(figure, "headline score per benchmark and model")
