"""Dagster assets of the evaluation platform, one module per domain; `definitions` is the code location."""
