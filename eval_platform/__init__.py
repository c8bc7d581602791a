"""The language-model evaluation platform: one Dagster code location over one DuckDB warehouse.

Laid out by domain: `common/` (what the domains share: models, gateway, warehouse, resources) and
one folder per domain (`benchmarks/`, `evolution/`, `blind/`), each with its logic (no Dagster, no
DuckDB), its `store.py` and its Dagster files; `definitions.py` is the code location and `main.py`
the main command. The rules are checked by tests/code_location/test_structure.py.
"""
