"""The platform's Dagster assets and asset checks, grouped by domain (benchmarks, evolution, blind):
thin steps that load from the warehouse, call the library (`eval_platform`) and save through the
domain's store. The code location, above them, is `eval_platform/definitions.py`."""
