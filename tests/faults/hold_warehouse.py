"""Hold a warehouse the way another user or run would, until killed (or for SECONDS).

    python -m tests.faults.hold_warehouse WAREHOUSE session|run [SECONDS]

`session`: a read-only DuckDB session (as a notebook or the duckdb CLI keeps open); `run`: a
platform run's connection (its file lock and its DuckDB connection). Prints "held" once it holds it.
"""

import sys
import time

import duckdb


def main(path: str, kind: str, seconds: float) -> None:
    if kind == "session":
        with duckdb.connect(path, read_only=True):
            print("held", flush=True)
            time.sleep(seconds)
        return
    from eval_platform.resources import WarehouseResource

    with WarehouseResource(database=path).get_connection():
        print("held", flush=True)
        time.sleep(seconds)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 3600)
