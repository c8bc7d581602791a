"""The code location, `eval_platform.definitions`: every domain's assets and checks, the jobs,
schedules and sensors, and the resources (workspace.yaml and `[tool.dagster]` load it). Nothing
imports it but the command line (eval_platform/cli/), the tests, the speed scripts and the docs'
reference; they call `defs()`."""

from dagster import (
    Definitions,
    ExecutorDefinition,
    definitions,
    load_asset_checks_from_modules,
    load_assets_from_modules,
)

from eval_platform.environment import Environment, environment
from eval_platform.evaluation_assets.benchmarks import assets as benchmark_assets
from eval_platform.evaluation_assets.benchmarks import checks as benchmark_checks
from eval_platform.evaluation_assets.blind import assets as blind_assets
from eval_platform.evaluation_assets.evolution import assets as evolution_assets
from eval_platform.evaluation_assets.evolution import checks as evolution_checks
from eval_platform.evaluation_assets.judging import assets as judging_assets
from eval_platform.evaluation_assets.judging import checks as judging_checks
from eval_platform.jobs import JOBS, protocol_jobs
from eval_platform.resources import RESOURCES
from eval_platform.schedules import nightly_schedule
from eval_platform.schedules.sensors import SENSORS


def run_executor(settings: Environment) -> ExecutorDefinition | None:
    """Where a run's steps execute: in processes beside the run (Dagster's default), or, when
    EVAL_CELERY_BROKER names a Celery broker, as tasks on the Celery workers of every host, with the
    settings of EVAL_CELERY_CONFIG (default deploy/team/celery.yaml), which the workers read too."""
    if not settings.celery_broker:
        return None
    from dagster_celery import celery_executor  # pyright: ignore[reportMissingImports]  (the team install's)
    from dagster_celery.cli import get_config_value_from_yaml  # pyright: ignore[reportMissingImports]

    return celery_executor.configured(get_config_value_from_yaml(str(settings.celery_config)))


@definitions
def defs() -> Definitions:
    """The code location as the environment is when Dagster loads it (a code server's start, a reload):
    a job per protocol of EVAL_PROTOCOLS_DIR, the nightly refresh's cron and time zone, the executor;
    the resources read theirs when a run uses them."""
    settings = environment()
    return Definitions(
        assets=load_assets_from_modules([benchmark_assets, evolution_assets, blind_assets, judging_assets]),
        asset_checks=load_asset_checks_from_modules([benchmark_checks, evolution_checks, judging_checks]),
        jobs=[*JOBS, *protocol_jobs(settings.protocols_dir)],
        schedules=[nightly_schedule(settings)],
        sensors=SENSORS,
        executor=run_executor(settings),
        resources=RESOURCES,
    )
