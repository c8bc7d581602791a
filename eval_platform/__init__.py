"""The language-model evaluation platform: one Dagster code location over one DuckDB warehouse.

Layers, lowest first; a module imports only from its own layer or lower ones:
`core` (pure logic and model backends) -> `stores` (the warehouse's tables) -> `resources` ->
`partitions` -> `assets` -> `checks` -> `jobs` -> `schedules` -> `definitions` -> `main`.
"""
