"""Asset checks of the benchmark assets: accuracies in range, no duplicate predictions, reject rates,
and, on either kind of benchmark, accuracy regressions between runs and drops against a baseline."""

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dagster import AssetCheckResult, AssetCheckSeverity, asset_check

from eval_platform.benchmarks.assets import (
    benchmark_predictions,
    benchmark_prompts,
    benchmark_scores,
    harness_evaluation,
    harness_model_comparison,
    model_comparison,
)
from eval_platform.benchmarks.comparison import compare, flipped_to_wrong
from eval_platform.benchmarks.store import BenchmarkStore
from eval_platform.common.checks import check_result, listed_rows
from eval_platform.common.reproducibility import ENVIRONMENT_FIELDS, environment_differences
from eval_platform.common.resources import WarehouseResource

MAX_REJECT_RATE = float(os.environ.get("EVAL_MAX_REJECT_RATE", "0.05"))
REGRESSION_ALPHA = float(os.environ.get("EVAL_REGRESSION_ALPHA", "0.05"))


@asset_check(asset=benchmark_scores, description="Every accuracy and interval bound lies in [0, 1].")
def accuracies_in_unit_interval(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(BenchmarkStore) as store:
        return check_result(store.accuracies_outside_unit_interval(), "accuracy outside [0, 1]")


@asset_check(asset=benchmark_predictions, description="At most one prediction per model, prompt, mode and shots.")
def no_duplicate_predictions(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(BenchmarkStore) as store:
        return check_result(store.duplicate_predictions(), "duplicate predictions")


@asset_check(
    asset=benchmark_prompts,
    description=f"Rejected rows stay under EVAL_MAX_REJECT_RATE (now {MAX_REJECT_RATE:.0%}) per benchmark.",
)
def reject_rate_below_threshold(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(BenchmarkStore) as store:
        return check_result(store.reject_rates_above(MAX_REJECT_RATE), "benchmark over the reject-rate threshold")


def _regression_description(previous_run: str, differences: str) -> str:
    return (
        f"No model's accuracy dropped below its {previous_run} by more than an exact McNemar test allows "
        f"(p < EVAL_REGRESSION_ALPHA, now {REGRESSION_ALPHA}) on the items both runs scored; names the items "
        f"that flipped from right to wrong, and {differences}."
    )


def _run_against_run(
    rows: list[dict], environment: Callable[[dict], Mapping[str, Any] | None], fields: Sequence[str] | None
) -> AssetCheckResult:
    """Each key's latest run against its previous one (rows as `latest_score_runs` gives them):
    the significant drops with the items that flipped, and what differs (in `fields`; None: any)
    between the environments behind the two runs (`environment`: a row's)."""
    runs: dict[tuple, dict[bool, dict[str, float]]] = {}
    environments: dict[tuple, dict[bool, dict[str, Mapping[str, Any] | None]]] = {}  # distinct, by their JSON
    names: dict[str, str] = {}
    for row in rows:
        key = (
            row["benchmark"],
            row["model"],
            row["model_fingerprint"],
            row["mode"],
            row["prompt_format"],
            row["num_fewshot"],
            row["metric"],
        )
        runs.setdefault(key, {}).setdefault(row["latest"], {})[row["prompt_id"]] = row["value"]
        behind = environment(row)
        environments.setdefault(key, {}).setdefault(row["latest"], {})[
            json.dumps(behind, sort_keys=True, default=str)
        ] = behind
        names[row["prompt_id"]] = row["source_row_id"]
    regressions, changed_runs = [], []
    for key, by_recency in sorted(runs.items()):
        if set(by_recency) != {True, False}:
            continue  # a first run has nothing to compare with
        changed = environment_differences(
            *(list(environments[key][latest].values()) for latest in (False, True)), fields=fields
        )
        if changed:
            changed_runs.append((*key[:2], *key[3:], changed))
        result = compare(by_recency[False], by_recency[True])  # previous minus latest
        if result.difference > 0 and result.mcnemar_p is not None and result.mcnemar_p < REGRESSION_ALPHA:
            flipped = [names[item] for item in flipped_to_wrong(by_recency[False], by_recency[True])]
            regressions.append(
                (
                    *key[:2],
                    *key[3:],
                    round(result.first_accuracy, 4),
                    round(result.second_accuracy, 4),
                    f"p={result.mcnemar_p:.3g}",
                    "flipped to wrong: " + ", ".join(flipped),
                    f"environment changed: {changed}" if changed else "same environment",
                )
            )
    return check_result(
        regressions,
        "significant accuracy drop",
        severity=AssetCheckSeverity.WARN,
        environment_changes=listed_rows(changed_runs, "the compared runs had the same environment", 20),
    )


@asset_check(
    asset=benchmark_scores,
    description=_regression_description(
        "previous scoring run's", "whatever differs between the environments the two runs' predictions were computed in"
    ),
)
def accuracy_regression(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(BenchmarkStore) as store:
        rows = store.latest_score_runs()
        environments = {
            benchmark: store.load_prediction_runs(benchmark) for benchmark in {r["benchmark"] for r in rows}
        }
    return _run_against_run(
        rows, lambda row: environments[row["benchmark"]].get(row["prediction_run_id"]), ENVIRONMENT_FIELDS
    )


@asset_check(
    asset=harness_evaluation,
    name="accuracy_regression",
    description=_regression_description(
        "previous run's (with the same settings key) on a harness task's filter and per-document metric",
        "whatever differs between the two runs' settings (data files, limit, chat template, harness version) and "
        "the environments their answers were computed in",
    ),
)
def harness_accuracy_regression(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(BenchmarkStore) as store:
        rows = store.latest_harness_runs()
        answer_runs = store.load_harness_runs()
    settings = {text: json.loads(text) for text in {r["settings"] for r in rows}}

    def environment(row: dict) -> dict[str, Any]:
        computed = answer_runs.get(row["prediction_run_id"]) or {}
        return {**settings[row["settings"]], **{name: computed.get(name) for name in ENVIRONMENT_FIELDS}}

    return _run_against_run(rows, environment, None)


def _no_drop_description(per: str) -> str:
    return (
        f"No roster model scored below its baseline or predecessor (a checkpoint's previous one) {per} by "
        f"more than an exact McNemar test allows (p < EVAL_REGRESSION_ALPHA, now {REGRESSION_ALPHA}); names the "
        "items that flipped from right to wrong."
    )


def _drops_result(drops: list[tuple]) -> AssetCheckResult:
    return check_result(drops, "significant drop against a baseline", severity=AssetCheckSeverity.WARN)


@asset_check(asset=model_comparison, description=_no_drop_description("on a benchmark's mode, format and metric"))
def no_drop_against_baseline(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(BenchmarkStore) as store:
        return _drops_result(store.significant_drops(REGRESSION_ALPHA))


@asset_check(
    asset=harness_model_comparison,
    name="no_drop_against_baseline",
    description=_no_drop_description("on a harness task's filter and metric"),
)
def harness_no_drop_against_baseline(warehouse: WarehouseResource) -> AssetCheckResult:
    with warehouse.store(BenchmarkStore) as store:
        return _drops_result(store.significant_harness_drops(REGRESSION_ALPHA))


BENCHMARK_CHECKS = [
    accuracies_in_unit_interval,
    no_duplicate_predictions,
    reject_rate_below_threshold,
    accuracy_regression,
    harness_accuracy_regression,
    no_drop_against_baseline,
    harness_no_drop_against_baseline,
]
