"""Asset checks: data-quality rules evaluated against the warehouse after each materialisation."""

import os

from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue, asset_check

from evaluation_assets.benchmarks import benchmark_predictions, benchmark_prompts, benchmark_scores
from evaluation_assets.evolution import STATS_SQL, evolution_era, generation_stats
from resources import WarehouseResource

MAX_REJECT_RATE = float(os.environ.get("EVAL_MAX_REJECT_RATE", "0.05"))
MAX_JUDGE_FAILURE_RATE = float(os.environ.get("EVAL_MAX_JUDGE_FAILURE_RATE", "0.34"))


def _offenders(warehouse: WarehouseResource, sql: str) -> list[tuple]:
    with warehouse.get_connection() as conn:
        return conn.execute(sql).fetchall()


def _result(offenders: list[tuple], what: str, severity=AssetCheckSeverity.ERROR) -> AssetCheckResult:
    return AssetCheckResult(
        passed=not offenders, severity=severity,
        metadata={"offending_rows": len(offenders), "examples": MetadataValue.md(
            "\n".join(f"- {row}" for row in offenders[:10]) or f"_no {what}_")},
    )


@asset_check(asset=benchmark_scores, description="Every accuracy and interval bound lies in [0, 1].")
def accuracies_in_unit_interval(warehouse: WarehouseResource) -> AssetCheckResult:
    return _result(_offenders(warehouse, """
        SELECT benchmark, model, mode, metric, accuracy FROM scores
        WHERE NOT (accuracy BETWEEN 0 AND 1 AND ci_low BETWEEN 0 AND accuracy AND ci_high BETWEEN accuracy AND 1)"""),
        "accuracy outside [0, 1]")


@asset_check(asset=benchmark_predictions, description="At most one prediction per model, prompt and mode.")
def no_duplicate_predictions(warehouse: WarehouseResource) -> AssetCheckResult:
    return _result(_offenders(warehouse, """
        SELECT model_fingerprint, prompt_id, mode, prompt_format, count(*) FROM predictions
        GROUP BY ALL HAVING count(*) > 1"""), "duplicate predictions")


@asset_check(asset=benchmark_prompts,
             description=f"Rejected rows stay under EVAL_MAX_REJECT_RATE (now {MAX_REJECT_RATE:.0%}) per benchmark.")
def reject_rate_below_threshold(warehouse: WarehouseResource) -> AssetCheckResult:
    return _result(_offenders(warehouse, f"""
        WITH counts AS (
            SELECT benchmark, count(*) AS rejected, 0 AS kept FROM rejected_rows GROUP BY benchmark
            UNION ALL SELECT benchmark, 0, count(*) FROM prompts GROUP BY benchmark)
        SELECT benchmark, sum(rejected) AS rejected, sum(kept) AS kept,
               round(sum(rejected) / (sum(rejected) + sum(kept)), 4) AS reject_rate
        FROM counts GROUP BY benchmark HAVING sum(rejected) / (sum(rejected) + sum(kept)) > {MAX_REJECT_RATE}"""),
        "benchmark over the reject-rate threshold")


@asset_check(asset=evolution_era, description=f"Judge failures per era stay under EVAL_MAX_JUDGE_FAILURE_RATE "
                                              f"(now {MAX_JUDGE_FAILURE_RATE:.0%}).")
def judge_failure_rate(warehouse: WarehouseResource) -> AssetCheckResult:
    return _result(_offenders(warehouse, f"""
        SELECT era, count(error) AS failures, count(*) AS calls, round(count(error) / count(*), 4) AS rate
        FROM judge_scores GROUP BY era HAVING count(error) / count(*) > {MAX_JUDGE_FAILURE_RATE}"""),
        "era over the judge-failure threshold", severity=AssetCheckSeverity.WARN)


@asset_check(asset=evolution_era, description="Every fitness, and every normalised component, lies in [0, 1].")
def fitness_in_unit_interval(warehouse: WarehouseResource) -> AssetCheckResult:
    return _result(_offenders(warehouse, """
        SELECT era, generation, prompt_id, fitness FROM generations
        WHERE fitness IS NULL OR NOT (fitness BETWEEN 0 AND 1) OR NOT (raw_fitness BETWEEN 0 AND 1)"""),
        "fitness outside [0, 1]")


@asset_check(asset=generation_stats, description="generation_stats equals statistics recomputed from generations.")
def generation_stats_match_generations(warehouse: WarehouseResource) -> AssetCheckResult:
    return _result(_offenders(warehouse, f"""
        SELECT coalesce(s.era, f.era) AS era, coalesce(s.generation, f.generation) AS generation,
               s.mean_fitness AS stored_mean, f.mean_fitness AS recomputed_mean
        FROM generation_stats s FULL JOIN ({STATS_SQL}) f ON f.era = s.era AND f.generation = s.generation
        WHERE s.era IS NULL OR f.era IS NULL OR s.population <> f.population
           OR abs(s.mean_fitness - f.mean_fitness) > 1e-9 OR abs(s.max_fitness - f.max_fitness) > 1e-9
           OR abs(s.min_fitness - f.min_fitness) > 1e-9 OR abs(s.median_fitness - f.median_fitness) > 1e-9
           OR abs(coalesce(s.std_fitness, 0) - coalesce(f.std_fitness, 0)) > 1e-9"""),
        "mismatch between generation_stats and generations")


ALL_CHECKS = [accuracies_in_unit_interval, no_duplicate_predictions, reject_rate_below_threshold,
              judge_failure_rate, fitness_in_unit_interval, generation_stats_match_generations]
