"""The evolution tables' migrations: one module per version step, each with the DDL it makes frozen in it."""

from eval_platform.evolution.store.migrations import to_v1, to_v2

MIGRATIONS = {step: module.migrate for step, module in enumerate((to_v1, to_v2))}
