"""The code location: every domain's assets, checks, jobs, schedules and sensors, and the resources."""

import os
from pathlib import Path

from dagster import Definitions, ExecutorDefinition, load_assets_from_modules

from eval_platform.benchmarks import assets as benchmark_assets
from eval_platform.benchmarks.checks import BENCHMARK_CHECKS
from eval_platform.benchmarks.jobs import BENCHMARK_JOBS
from eval_platform.benchmarks.resources import RosterResource
from eval_platform.benchmarks.schedules import nightly_benchmark_refresh, nightly_harness_evaluation
from eval_platform.benchmarks.sensors import checkpoint_evaluation_sensor, roster_evaluation_sensor, roster_sensor
from eval_platform.blind import assets as blind_assets
from eval_platform.blind.jobs import BLIND_JOBS
from eval_platform.blind.sensors import blind_eval_filled_sheet_sensor
from eval_platform.common.resources import (
    DEFAULT_WAREHOUSE,
    LanguageModelResource,
    ModelGatewayResource,
    WarehouseResource,
)
from eval_platform.common.warehouse import registered_stores
from eval_platform.evolution import assets as evolution_assets
from eval_platform.evolution.checks import EVOLUTION_CHECKS
from eval_platform.evolution.jobs import EVOLUTION_JOBS
from eval_platform.evolution.sensors import era_config_sensor

ALL_STORES = registered_stores()
ALL_CHECKS = [*BENCHMARK_CHECKS, *EVOLUTION_CHECKS]
ALL_JOBS = [*BENCHMARK_JOBS, *EVOLUTION_JOBS, *BLIND_JOBS]
ALL_SCHEDULES = [nightly_benchmark_refresh, nightly_harness_evaluation]
ALL_SENSORS = [
    roster_sensor,
    roster_evaluation_sensor,
    checkpoint_evaluation_sensor,
    blind_eval_filled_sheet_sensor,
    era_config_sensor,
]


def run_executor() -> ExecutorDefinition | None:
    """Where a run's steps execute: in processes beside the run (Dagster's default), or, when
    EVAL_CELERY_BROKER names a Celery broker, as tasks on the Celery workers of every host, with the
    settings of EVAL_CELERY_CONFIG (default deploy/team/celery.yaml), which the workers read too."""
    if not os.environ.get("EVAL_CELERY_BROKER"):
        return None
    from dagster_celery import celery_executor
    from dagster_celery.cli import get_config_value_from_yaml

    settings = os.environ.get(
        "EVAL_CELERY_CONFIG", str(Path(__file__).resolve().parents[1] / "deploy" / "team" / "celery.yaml")
    )
    return celery_executor.configured(get_config_value_from_yaml(settings))  # {env: ...} resolved at run time


defs = Definitions(
    assets=load_assets_from_modules([benchmark_assets, evolution_assets, blind_assets]),
    asset_checks=ALL_CHECKS,
    jobs=ALL_JOBS,
    schedules=ALL_SCHEDULES,
    sensors=ALL_SENSORS,
    executor=run_executor(),
    resources={
        "warehouse": WarehouseResource(database=DEFAULT_WAREHOUSE),
        # Every asset that opens a model takes both, so the launchpad's (or a run config's) `gateway`
        # settings reach every model it opens: the one under evaluation, an era's, blind evaluation's.
        "gateway": ModelGatewayResource(),
        "evaluation_model": LanguageModelResource(),
        # The models the benchmark assets evaluate: the roster folder's entries, over evaluation_model's settings.
        "roster": RosterResource(),
    },
)
