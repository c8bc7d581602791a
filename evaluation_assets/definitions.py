"""The code location: every asset, check, job, schedule, sensor and resource of the platform."""

from dagster import Definitions, load_assets_from_modules

from evaluation_assets import benchmarks, blind_evaluation, evolution
from evaluation_assets.checks import ALL_CHECKS
from jobs import ALL_JOBS
from resources import DEFAULT_WAREHOUSE, LanguageModelResource, ModelGatewayResource, WarehouseResource
from schedules import ALL_SCHEDULES, ALL_SENSORS

defs = Definitions(
    assets=load_assets_from_modules([benchmarks, evolution, blind_evaluation]),
    asset_checks=ALL_CHECKS,
    jobs=ALL_JOBS,
    schedules=ALL_SCHEDULES,
    sensors=ALL_SENSORS,
    resources={
        "warehouse": WarehouseResource(database=DEFAULT_WAREHOUSE),
        "evaluation_model": LanguageModelResource(),
        "gateway": ModelGatewayResource(),
    },
)
