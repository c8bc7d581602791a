"""The language-model evaluation platform: one Dagster code location over one DuckDB warehouse, in
one import namespace.

The library is laid out by domain: `common/` (what the domains share: models, gateway, warehouse)
and one folder per domain (`benchmarks/`, `evolution/`, `blind/`, `judging/`), each with its logic
(no Dagster, no DuckDB) and its store. The code location sits above it in the same namespace: the
folders the layout keeps at the top of the tree, linked in (`resources`, `evaluation_assets`,
`jobs`, `schedules`), `definitions.py` (the code location) and `cli/` (the main command). The
rules are checked by tests/code_location/test_structure.py.
"""
