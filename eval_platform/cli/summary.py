"""What the main command prints after its runs, read from the warehouse: a summary that fits one
screen (`print_summary`: 40 lines of 120 columns), or the full tables (`print_tables`: the
results, comparisons and leaderboard, the sampled reductions and the demo's other domains), and a
protocol's table."""

from __future__ import annotations

import textwrap
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from eval_platform.benchmarks.declarations import Benchmark
from eval_platform.benchmarks.leaderboard import leaderboard_table
from eval_platform.benchmarks.protocols import Protocol, protocol_table
from eval_platform.benchmarks.store import ComparisonStore, EvaluationStore, LeaderboardStore
from eval_platform.blind.store import BlindStore
from eval_platform.evolution.store import EraAnalysisStore
from eval_platform.judging.store import JudgingStore
from eval_platform.resources import WarehouseResource

if TYPE_CHECKING:
    import pandas as pd

    from eval_platform.evaluation_assets.metadata import TableOptions

ERA_COLUMNS = ["era", "generation", "population", "mean_fitness", "max_fitness", "calls", "cache_hits"]
SCREEN_LINES, SCREEN_COLUMNS = 40, 120
TABLE_CELL = 48  # the widest cell (and header) of a full table, wrapped beyond


def print_results(
    warehouse: WarehouseResource, declared: Mapping[str, Benchmark], benchmarks: Sequence[str] | None = None
) -> None:
    """The results, comparisons and leaderboard (of `benchmarks` only, where given)."""
    with warehouse.store(EvaluationStore) as store:
        results = store.result_table(list(benchmarks) if benchmarks else None)
        imported = store.imported_sources()
    with warehouse.store(ComparisonStore) as store:
        comparisons = store.comparison_table()
    with warehouse.store(LeaderboardStore) as store:
        headlines = [h for h in store.load_headlines() if benchmarks is None or h["benchmark"] in benchmarks]
        averages = [r for r in store.load_protocol_scores() if r["task"] == "average"]
    shown = {name: b for name, b in declared.items() if benchmarks is None or name in benchmarks}
    print(f"\nResults ({warehouse.location}):\n{wrapped(results)}")
    if benchmarks is None:
        print(f"\nModel against its baseline (a minus b, on the same documents):\n{wrapped(comparisons)}")
    board = leaderboard_table(headlines, averages, shown, imported)
    columns = board.set_index("model").T.rename_axis("benchmark (measured as) or average").reset_index()
    print(
        f"\nLeaderboard (headline score [95% interval]), a model a column:\n{wrapped(columns, disable_numparse=True)}"
    )


def wrapped(table: pd.DataFrame, **options: Unpack[TableOptions]) -> str:
    """A full table as Markdown, each cell and header but the first column's (a row's name, kept
    whole) wrapped at `TABLE_CELL` characters, a missing value (no interval, no human agreement
    to compare with) blank rather than `nan` or `<NA>`."""
    widths = [None] + [TABLE_CELL] * (len(table.columns) - 1)
    shown = table.astype(object).where(table.notna(), "")
    return shown.to_markdown(index=False, maxcolwidths=widths, maxheadercolwidths=widths, **options)


def print_sampled(warehouse: WarehouseResource) -> None:
    """Each sampled evaluation's per-item reductions, a line per task, metric and filter:
    `pass@1 0.200 [0.000, 0.551] · pass@4 ... · maj@4 ...`, with their intervals (clustered by item)."""
    with warehouse.store(EvaluationStore) as store:
        rows = store.sampled_results()
    lines: dict[tuple, list[str]] = {}
    for row in rows:
        where = (row["benchmark"], row["model"], row["settings_key"], row["task"], row["metric"], row["filter"])
        interval = "" if row["ci_low"] is None else f" [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
        lines.setdefault(where, []).append(f"{row['reducer']} {row['value']:.3f}{interval}")
    if lines:
        print("\nSampled answers (each item's answers reduced; intervals clustered by item):")
    for (benchmark, model, key, task, metric, filter_name), shown in lines.items():
        print(f"{benchmark} · {model} · {key}\n  {task} {metric},{filter_name}: {' · '.join(shown)}")


def print_protocol(warehouse: WarehouseResource, protocol: Protocol) -> None:
    with warehouse.store(LeaderboardStore) as store:
        rows = store.load_protocol_scores(protocol.name)
    print(f"\n{protocol.title} ({warehouse.location}):\n{protocol_table(rows).to_markdown(index=False)}")


def print_domains(warehouse: WarehouseResource) -> None:
    """The eras' fitness per generation, the blind tally and the judges against humans."""
    with warehouse.store(EraAnalysisStore) as store:
        era_stats = store.load_generation_stats()[ERA_COLUMNS]
    with warehouse.store(BlindStore) as store:
        sentence = store.pooled_sentence() or "(no tally)"
    with warehouse.store(JudgingStore) as store:
        judges = store.judge_vs_human_table()
    print(f"\nPrompt evolution, fitness per generation:\n{wrapped(era_stats.round(4))}")
    print(f"\nBlind evaluation (demo rater): {sentence}")
    print("\nJudges against humans (the local model judged a few items; docs/judging.md has the whole table):")
    print(wrapped(judges))


def print_tables(warehouse: WarehouseResource, declared: Mapping[str, Benchmark]) -> None:
    """Every table the warehouse holds a summary of (`eval-platform results`, `run --tables`)."""
    print_results(warehouse, declared)
    print_sampled(warehouse)
    print_domains(warehouse)


def print_summary(warehouse: WarehouseResource, declared: Mapping[str, Benchmark], settings: str) -> None:
    """One screen: each benchmark's headline per model, the comparisons' verdicts, each protocol's
    average or why there is none, the sampled reductions, the era's best fitness, the blind tally,
    the judges' agreement, and where the rest is."""
    with warehouse.store(LeaderboardStore) as store:
        headlines, scores = store.load_headlines(), store.load_protocol_scores()
    with warehouse.store(ComparisonStore) as store:
        comparisons = store.comparison_table().to_dict("records")
    with warehouse.store(EvaluationStore) as store:
        sampled = store.sampled_results()
    with warehouse.store(EraAnalysisStore) as store:
        eras = store.load_generation_stats().to_dict("records")
    with warehouse.store(BlindStore) as store:
        tally = store.pooled_sentence()
    with warehouse.store(JudgingStore) as store:
        judges = store.judge_vs_human_table().to_dict("records")
    lines = [
        f"Summary of {warehouse.location} ({settings})",
        *headline_lines(headlines, declared),
        *comparison_lines(comparisons),
        *protocol_lines(scores),
        *sampled_lines(sampled),
        *era_lines(eras),
        *textwrap.wrap(f"Blind evaluation: {tally or 'no tally'}", SCREEN_COLUMNS, max_lines=2, placeholder=" …"),
        *judge_lines(judges),
        "The rest: eval-platform results (every table) · eval-platform ui (Dagster and the viewer, every answer)",
        f'  SQL: duckdb {warehouse.location} "SELECT * FROM leaderboard_wide" · the manual: docs/ (make docs)',
    ]
    print("\n" + "\n".join(shorten(line) for line in lines))


def shorten(line: str) -> str:
    return line if len(line) <= SCREEN_COLUMNS else line[: SCREEN_COLUMNS - 1] + "…"


def _interval(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if low is None or high is None else f"{value:.3f} [{low:.3f}, {high:.3f}]"


def headline_lines(headlines: Sequence[Mapping[str, Any]], declared: Mapping[str, Benchmark]) -> list[str]:
    """A line per benchmark: its headline metric, then each model's value [95% interval] (models
    named by letter, in a legend, where their names make the line too wide)."""
    models = sorted({row["model"] for row in headlines})
    if not models:
        return ["Benchmarks: nothing evaluated yet"]
    width = max(22, *map(len, models)) + 2
    lettered = 48 + width * len(models) > SCREEN_COLUMNS
    labels = [chr(ord("A") + i) for i in range(len(models))] if lettered else models
    width = 24 if lettered else width
    lines = ["Benchmarks, each model's headline [95% interval]:"]
    lines += [f"  {label}: {model}" for label, model in zip(labels, models, strict=True) if lettered]
    lines.append(f"  {'':46}" + "".join(f"{label:>{width}}" for label in labels))
    names = [name for name in declared if any(row["benchmark"] == name for row in headlines)]
    for name in names + sorted({row["benchmark"] for row in headlines} - set(names)):
        own = {row["model"]: row for row in headlines if row["benchmark"] == name}
        first = next(iter(own.values()))
        metric = first["metric"] if first["filter"] == "none" else f"{first['metric']},{first['filter']}"
        cells = [_interval(own[m]["value"], own[m]["ci_low"], own[m]["ci_high"]) if m in own else "–" for m in models]
        lines.append(f"  {name[:20]:20} {metric[:25]:25}" + "".join(f"{cell:>{width}}" for cell in cells))
    return lines


def comparison_lines(comparisons: Sequence[Mapping[Hashable, Any]]) -> list[str]:
    """Per pair of models: how many results were compared and how many differ (exact McNemar p < 0.05)."""
    pairs: dict[str, list[Mapping[Hashable, Any]]] = {}
    for row in comparisons:
        pairs.setdefault(str(row["models"]), []).append(row)
    lines = []
    for models, rows in pairs.items():
        tested = [r for r in rows if _number(r["mcnemar_p"]) is not None]
        differ = [r for r in tested if (_number(r["mcnemar_p"]) or 1.0) < 0.05]
        flipped = sum(int(r["only_a"] or 0) + int(r["only_b"] or 0) for r in rows)
        lines += [
            f"Compared, {models}:",
            f"  {len(differ)} of {len(tested)} results differ (exact McNemar p < 0.05); {flipped} items flipped",
        ]
    return lines


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def protocol_lines(scores: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each protocol's average per model, or one line saying why there is none and how to get one."""
    lines = []
    for protocol in sorted({row["protocol"] for row in scores}):
        averages = [r for r in scores if r["protocol"] == protocol and r["task"] == "average"]
        measured = [f"{r['model']} {r['score']:.4f} ({r['status']})" for r in averages if r["score"] is not None]
        if measured:
            lines.append(f"{protocol}: " + " · ".join(measured))
        else:
            lines.append(f"{protocol}: no average (not run as it says): eval-platform run --protocol {protocol}")
    return lines


def sampled_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each sampled result's pass@1, pass@k and maj@k at its largest k, with their intervals."""
    groups: dict[tuple, dict[str, dict[str, Mapping[str, Any]]]] = {}
    for row in rows:
        key = (row["benchmark"], row["model"], row["settings_key"], row["task"], row["metric"])
        groups.setdefault(key, {}).setdefault(row["filter"], {})[row["reducer"]] = row
    lines = []
    for (_, model, key, task, metric), filters in groups.items():
        lines.append(f"Sampled, {task} {metric} · {model} · {key.split(', ')[-1]}:")
        for filter_name, reducers in filters.items():
            shown = ["pass@1", _largest(reducers, "pass@"), _largest(reducers, "maj@")]
            cells = [f"{r} {_interval(reducers[r]['value'], reducers[r]['ci_low'], reducers[r]['ci_high'])}"
                     for r in dict.fromkeys(shown) if r in reducers]  # fmt: skip
            lines.append(f"  {filter_name}: " + " · ".join(cells))
    return lines


def _largest(reducers: Mapping[str, object], kind: str) -> str:
    """The reducer of a kind (`pass@`, `maj@`) at the largest k."""
    sizes = [int(name[len(kind) :]) for name in reducers if name.startswith(kind) and name[len(kind) :].isdigit()]
    return f"{kind}{max(sizes)}" if sizes else ""


def era_lines(generations: Sequence[Mapping[Hashable, Any]]) -> list[str]:
    """Each era's best fitness and the generation that reached it."""
    lines = []
    for era in sorted({row["era"] for row in generations}):
        own = [row for row in generations if row["era"] == era]
        best = max(own, key=lambda row: row["max_fitness"])
        lines.append(
            f"Prompt evolution, era {era}: best fitness {best['max_fitness']:.4f} (generation {best['generation']} "
            f"of {own[-1]['generation']}), mean {own[-1]['mean_fitness']:.4f} in generation {own[-1]['generation']}"
        )
    return lines


def judge_lines(judges: Sequence[Mapping[Hashable, object]]) -> list[str]:
    """Each judge's agreement with the humans (Cohen's kappa) on each set, wrapped per judge."""
    by_judge: dict[str, list[str]] = {}
    for row in judges:
        kappa = "–" if row["kappa"] is None or row["kappa"] != row["kappa"] else f"{row['kappa']:.2f}"
        name = str(row["set_name"]).replace("blind|", "blind sheet ")
        by_judge.setdefault(str(row["judge"]), []).append(f"{name} {kappa} ({row['items']})")
    lines = ["Judges against humans, kappa on each set (items):"] if by_judge else []
    for judge, sets in by_judge.items():
        lines += textwrap.wrap(
            f"{judge}: " + ", ".join(sets), SCREEN_COLUMNS, initial_indent="  ", subsequent_indent="    "
        )
    return lines
