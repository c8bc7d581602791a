"""Asset checks of the era asset: judge failure rates, fitness in range, statistics that match."""

import pandas as pd
from dagster import AssetCheckResult, AssetCheckSeverity, asset_check

from eval_platform.environment import Environment, environment
from eval_platform.evaluation_assets.checks import check_result
from eval_platform.evaluation_assets.evolution.assets import evolution_era
from eval_platform.evolution.genetic import statistics_rows
from eval_platform.evolution.store import EraAnalysisStore, EraStore
from eval_platform.resources import WarehouseResource


@asset_check(
    asset=evolution_era,
    description="Judge failures per era stay under EVAL_MAX_JUDGE_FAILURE_RATE "
    f"(default {Environment.model_fields['max_judge_failure_rate'].default:.0%}).",
)
def judge_failure_rate(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(EraStore) as store:
        return check_result(
            store.judge_failure_rates_above(environment().max_judge_failure_rate),
            "era over the judge-failure threshold",
            severity=AssetCheckSeverity.WARN,
        )


@asset_check(asset=evolution_era, description="Every fitness, and every normalised component, lies in [0, 1].")
def fitness_in_unit_interval(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(EraStore) as store:
        return check_result(store.fitness_outside_unit_interval(), "fitness outside [0, 1]")


@asset_check(asset=evolution_era, description="generation_stats equals statistics recomputed from generations.")
def generation_stats_match_generations(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(EraAnalysisStore) as store:
        recomputed = statistics_rows(store.load_generation_outcomes())
        stored = store.load_generation_stats()
    merged = pd.merge(
        stored, recomputed, on=["era", "generation"], how="outer", suffixes=("_stored", "_recomputed"), indicator=True
    )
    offenders = []
    for row in merged.to_dict("records"):
        differs = row["_merge"] != "both" or any(
            abs((row[f"{c}_stored"] or 0) - (row[f"{c}_recomputed"] or 0)) > 1e-9
            for c in ("population", "mean_fitness", "std_fitness", "median_fitness", "min_fitness", "max_fitness")
        )
        if differs:
            offenders.append(
                (row["era"], row["generation"], row.get("mean_fitness_stored"), row.get("mean_fitness_recomputed"))
            )
    return check_result(offenders, "mismatch between generation_stats and generations")


EVOLUTION_CHECKS = [judge_failure_rate, fitness_in_unit_interval, generation_stats_match_generations]
