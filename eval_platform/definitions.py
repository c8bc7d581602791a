"""The code location: every asset, check, job, schedule, sensor and resource of the platform."""

from dagster import Definitions, load_assets_from_modules

from eval_platform.assets import benchmarks, blind_evaluation, evolution
from eval_platform.checks import ALL_CHECKS
from eval_platform.jobs import ALL_JOBS
from eval_platform.resources import DEFAULT_WAREHOUSE, LanguageModelResource, ModelGatewayResource, WarehouseResource
from eval_platform.schedules import ALL_SCHEDULES, ALL_SENSORS

gateway = ModelGatewayResource()

defs = Definitions(
    assets=load_assets_from_modules([benchmarks, evolution, blind_evaluation]),
    asset_checks=ALL_CHECKS,
    jobs=ALL_JOBS,
    schedules=ALL_SCHEDULES,
    sensors=ALL_SENSORS,
    resources={
        "warehouse": WarehouseResource(database=DEFAULT_WAREHOUSE),
        "gateway": gateway,
        "evaluation_model": LanguageModelResource(gateway=gateway),
    },
)
