"""Hold a warehouse the way another user or run would, until a line (or the end of input) arrives
on standard input, or until killed.

    python -m tests.faults.hold_warehouse WAREHOUSE session|run

`session`: a read-only DuckDB session (as a notebook or the duckdb CLI keeps open); `run`: a
platform run's connection (its file lock and its DuckDB connection). Prints "held" once it holds it.
"""

import sys
from contextlib import AbstractContextManager

import duckdb


def held(path: str, kind: str) -> AbstractContextManager:
    if kind == "session":
        return duckdb.connect(path, read_only=True)
    from eval_platform.resources import WarehouseResource

    return WarehouseResource(database=path).get_connection()


if __name__ == "__main__":
    with held(sys.argv[1], sys.argv[2]):
        print("held", flush=True)
        sys.stdin.readline()
