"""Milliseconds to open a store on the warehouse on DuckLake (a throwaway PostgreSQL catalog on this
machine), and read one partition's rows through it: a process's stores share its one attachment of
the catalog, against attaching it anew at every store (the baseline: what each store paid before).
Run it in the team's install:

    .venv-team/bin/python speed/lake_store_open.py --stores 50
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_platform.benchmarks.store import InputStore  # noqa: E402
from eval_platform.common.connections import ATTACHED_LAKES
from eval_platform.resources import WarehouseResource  # noqa: E402
from tests.team.postgres_server import postgres_server  # noqa: E402

READ = "SELECT count(*) AS n FROM raw_rows WHERE benchmark = 'arc_easy'"


def open_and_read(warehouse: WarehouseResource, stores: int, attach_each: bool) -> list[float]:
    """Each store's milliseconds: opened, one read, closed."""
    times = []
    for _ in range(stores):
        if attach_each:
            ATTACHED_LAKES.close()
        start = time.perf_counter()
        with warehouse.store(InputStore) as store:
            store.rows(READ)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", type=int, default=50)
    args = parser.parse_args()
    with postgres_server(("lake",)) as url, tempfile.TemporaryDirectory() as folder:
        warehouse = WarehouseResource(database=f"ducklake:postgres:{url}", data_path=folder)
        open_and_read(warehouse, 3, attach_each=False)  # the lake's tables, created once
        baseline = open_and_read(warehouse, args.stores, attach_each=True)
        shared = open_and_read(warehouse, args.stores, attach_each=False)
    for label, times in (("attached anew at every store (baseline)", baseline), ("one attachment per process", shared)):
        print(
            f"{label}: median {statistics.median(times):.1f} ms, mean {statistics.mean(times):.1f} ms "
            f"over {len(times)} stores"
        )
    print(f"ratio (baseline / shared, medians): {statistics.median(baseline) / statistics.median(shared):.1f}x")


if __name__ == "__main__":
    main()
