"""The benchmark tables' migrations: one module per version step, each with the DDL of the tables it
makes frozen in it (a later change to a table is a later step's), so an old warehouse is carried
through every version it missed. A step leaves alone a table the warehouse never had: the tables
of the current schema are created afterwards."""

from eval_platform.benchmarks.store.migrations import (
    to_v1,
    to_v2,
    to_v3,
    to_v4,
    to_v5,
    to_v6,
    to_v7,
    to_v8,
    to_v9,
    to_v10,
)

MIGRATIONS = {
    step: module.migrate
    for step, module in enumerate((to_v1, to_v2, to_v3, to_v4, to_v5, to_v6, to_v7, to_v8, to_v9, to_v10))
}
