"""The platform's resources, configured in one place (thin: the code lives in `eval_platform.resources`)."""

from eval_platform.resources import (
    BLIND_EVAL_DIR, DATA_DIR, DEFAULT_WAREHOUSE, LanguageModelResource, ModelGatewayResource, WarehouseBusyError,
    WarehouseResource,
)

__all__ = ["BLIND_EVAL_DIR", "DATA_DIR", "DEFAULT_WAREHOUSE", "LanguageModelResource", "ModelGatewayResource",
           "WarehouseBusyError", "WarehouseResource"]
