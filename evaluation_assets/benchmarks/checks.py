"""Asset checks of the benchmark assets: accuracies in range, one sample per document, reject rates,
accuracy regressions between runs, and drops against a baseline."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dagster import AssetCheckResult, AssetCheckSeverity, asset_check

from eval_platform.benchmarks.comparison import compare, flipped_to_wrong
from eval_platform.benchmarks.store import ComparisonStore, EvaluationStore, InputStore
from eval_platform.common.reproducibility import ENVIRONMENT_FIELDS, environment_differences
from eval_platform.environment import Environment, environment
from eval_platform.evaluation_assets.benchmarks.assets import (
    benchmark_documents,
    benchmark_evaluation,
    model_comparison,
)
from eval_platform.evaluation_assets.checks import check_result, listed_rows
from eval_platform.resources import WarehouseResource


@asset_check(asset=benchmark_evaluation, description="Every accuracy, and its interval, lies in [0, 1].")
def accuracies_in_unit_interval(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(EvaluationStore) as store:
        return check_result(store.values_outside_unit_interval(), "accuracy outside [0, 1]")


@asset_check(
    asset=benchmark_evaluation,
    description="At most one sample per model, settings key, solver, document and filter (a lake has no keys).",
)
def no_duplicate_samples(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(EvaluationStore) as store:
        return check_result(store.duplicate_samples(), "duplicate samples")


@asset_check(
    asset=benchmark_documents,
    description="Rejected rows stay under EVAL_MAX_REJECT_RATE (default "
    f"{Environment.model_fields['max_reject_rate'].default:.0%}) per benchmark.",
)
def reject_rate_below_threshold(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(InputStore) as store:
        offenders = store.reject_rates_above(environment().max_reject_rate)
    return check_result(offenders, "benchmark over the reject-rate threshold")


def regressions(rows: list[dict[str, Any]], runs: Mapping[str, Mapping[str, object]], alpha: float) -> AssetCheckResult:
    """Each key's latest run against its previous one (rows as `latest_runs` gives them): the
    significant drops with the documents that flipped, and what differs between the two runs'
    settings and the environments their answers were computed in."""
    values: dict[tuple, dict[bool, dict[str, float]]] = {}
    behind: dict[tuple, dict[bool, dict[str, Mapping[str, object]]]] = {}  # distinct settings and environments
    for row in rows:
        key = tuple(row[k] for k in ("benchmark", "model", "settings_key", "solver", "task", "filter", "metric"))
        values.setdefault(key, {}).setdefault(row["latest"], {})[row["item"]] = row["value"]
        computed = runs.get(row["prediction_run_id"]) or {}
        context = {**json.loads(row["settings"] or "{}"), **{name: computed.get(name) for name in ENVIRONMENT_FIELDS}}
        behind.setdefault(key, {}).setdefault(row["latest"], {})[json.dumps(context, sort_keys=True, default=str)] = (
            context
        )
    found, changed_runs = [], []
    for key, by_recency in sorted(values.items()):
        if set(by_recency) != {True, False}:
            continue  # a first run has nothing to compare with
        changed = environment_differences(
            *(list(behind[key][latest].values()) for latest in (False, True)), fields=None
        )
        if changed:
            changed_runs.append((*key, changed))
        result = compare(by_recency[False], by_recency[True])  # previous minus latest
        if result.difference > 0 and result.mcnemar_p is not None and result.mcnemar_p < alpha:
            found.append(
                (
                    *key,
                    round(result.first_accuracy, 4),
                    round(result.second_accuracy, 4),
                    f"p={result.mcnemar_p:.3g}",
                    "flipped to wrong: " + ", ".join(flipped_to_wrong(by_recency[False], by_recency[True])),
                    f"changed: {changed}" if changed else "same settings and environment",
                )
            )
    return check_result(
        found,
        "significant accuracy drop",
        severity=AssetCheckSeverity.WARN,
        environment_changes=listed_rows(changed_runs, "the compared runs had the same settings and environment", 20),
    )


@asset_check(
    asset=benchmark_evaluation,
    description="No model's accuracy dropped below its previous run's (with the same settings key and solver) by "
    "more than an exact McNemar test allows (p < EVAL_REGRESSION_ALPHA) on the documents both runs scored; names "
    "the documents that flipped from right to wrong, and whatever differs between the two runs' settings and the "
    "environments their answers were computed in.",
)
def accuracy_regression(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(EvaluationStore) as store:
        rows, runs = store.latest_runs(), store.load_evaluation_runs()
    return regressions(rows, runs, environment().regression_alpha)


@asset_check(
    asset=model_comparison,
    description="No roster model scored below its baseline or predecessor (a checkpoint's previous one) by more "
    "than an exact McNemar test allows (p < EVAL_REGRESSION_ALPHA); names the documents that flipped from right "
    "to wrong.",
)
def no_drop_against_baseline(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(ComparisonStore) as store:
        drops = store.significant_drops(environment().regression_alpha)
    return check_result(drops, "significant drop against a baseline", severity=AssetCheckSeverity.WARN)
