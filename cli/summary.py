"""What the main command prints after its runs: the results, comparisons and leaderboard, a
protocol's table, and the demo's other domains, read from the warehouse."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from eval_platform.benchmarks.declarations import Benchmark
from eval_platform.benchmarks.leaderboard import leaderboard_table
from eval_platform.benchmarks.protocols import Protocol, protocol_table
from eval_platform.benchmarks.store import ComparisonStore, EvaluationStore, LeaderboardStore
from eval_platform.blind.store import BlindStore
from eval_platform.evolution.store import EraAnalysisStore
from eval_platform.judging.store import JudgingStore
from resources import WarehouseResource

ERA_COLUMNS = ["era", "generation", "population", "mean_fitness", "max_fitness", "calls", "cache_hits"]


def print_results(
    warehouse: WarehouseResource, declared: Mapping[str, Benchmark], benchmarks: Sequence[str] | None = None
) -> None:
    """The results, comparisons and leaderboard (of `benchmarks` only, where given)."""
    with warehouse.store(EvaluationStore) as store:
        results = store.result_table(list(benchmarks) if benchmarks else None)
    with warehouse.store(ComparisonStore) as store:
        comparisons = store.comparison_table()
    with warehouse.store(LeaderboardStore) as store:
        headlines = [h for h in store.load_headlines() if benchmarks is None or h["benchmark"] in benchmarks]
        averages = [r for r in store.load_protocol_scores() if r["task"] == "average"]
    shown = {name: b for name, b in declared.items() if benchmarks is None or name in benchmarks}
    print(f"\nResults ({warehouse.database}):\n{results.to_markdown(index=False)}")
    if benchmarks is None:
        print(
            f"\nModel against its baseline (a minus b, on the same documents):\n{comparisons.to_markdown(index=False)}"
        )
    board = leaderboard_table(headlines, averages, shown)
    print(f"\nLeaderboard (headline score [95% interval]):\n{board.to_markdown(index=False, disable_numparse=True)}")


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
    print(f"\n{protocol.title} ({warehouse.database}):\n{protocol_table(rows).to_markdown(index=False)}")


def print_domains(warehouse: WarehouseResource) -> None:
    """The eras' fitness per generation, the blind tally and the judges against humans."""
    with warehouse.store(EraAnalysisStore) as store:
        era_stats = store.load_generation_stats()[ERA_COLUMNS]
    with warehouse.store(BlindStore) as store:
        sentence = store.pooled_sentence() or "(no tally)"
    with warehouse.store(JudgingStore) as store:
        judges = store.judge_vs_human_table()
    print(f"\nPrompt evolution, fitness per generation:\n{era_stats.round(4).to_markdown(index=False)}")
    print(f"\nBlind evaluation (demo rater): {sentence}")
    print("\nJudges against humans (the local model judged a few items; docs/judging.md has the whole table):")
    print(judges.to_markdown(index=False))
