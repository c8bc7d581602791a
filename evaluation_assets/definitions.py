"""The code location: every asset, check, job, schedule, sensor and resource of the platform."""

from dagster import Definitions, load_assets_from_modules

from evaluation_assets import benchmarks, evolution
from jobs import ALL_JOBS
from resources import DEFAULT_WAREHOUSE, LanguageModelResource, ModelGatewayResource, WarehouseResource

defs = Definitions(
    assets=load_assets_from_modules([benchmarks, evolution]),
    jobs=ALL_JOBS,
    resources={
        "warehouse": WarehouseResource(database=DEFAULT_WAREHOUSE),
        "evaluation_model": LanguageModelResource(),
        "gateway": ModelGatewayResource(),
    },
)
