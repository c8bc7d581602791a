"""The platform's resources, configured in one place (thin: the code lives in `eval_platform.common.resources`
and, the roster's, in `eval_platform.benchmarks.resources`)."""

from eval_platform.benchmarks.resources import RosterResource
from eval_platform.common.resources import (
    BLIND_EVAL_DIR,
    DATA_DIR,
    DEFAULT_WAREHOUSE,
    LanguageModelResource,
    ModelGatewayResource,
    WarehouseBusyError,
    WarehouseResource,
)

__all__ = [
    "BLIND_EVAL_DIR",
    "DATA_DIR",
    "DEFAULT_WAREHOUSE",
    "LanguageModelResource",
    "ModelGatewayResource",
    "RosterResource",
    "WarehouseBusyError",
    "WarehouseResource",
]
