"""Move a warehouse into another, every row kept: a DuckDB file into a DuckLake (a team's warehouse).

    python -m jobs.move_warehouse --from data/warehouse.duckdb    (into EVAL_WAREHOUSE, e.g. a lake)
    python -m jobs.move_warehouse --export FOLDER                 (EVAL_WAREHOUSE's tables as Parquet)

The team's install runs DuckDB 1.4.4 (DuckLake's), which cannot open a file written by DuckDB 2.0
(the default install's). Such a file is exported first, in the default install, and the folder is
moved: `.venv/bin/python -m jobs.move_warehouse --export FOLDER`, then in the team's install
`python -m jobs.move_warehouse --from FOLDER`. The source file is migrated to this version first.
"""

import argparse
import sys
from pathlib import Path

from eval_platform.common.resources import DEFAULT_WAREHOUSE, WarehouseResource
from eval_platform.common.warehouse import export_tables, import_tables
from eval_platform.definitions import ALL_STORES, defs

NEWER_FILE = "newer version of DuckDB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--from", dest="source", help="A warehouse file, or a folder --export wrote.")
    action.add_argument("--export", help="A folder to write the configured warehouse's tables to, as Parquet.")
    args = parser.parse_args(argv)
    warehouse: WarehouseResource = defs.resources["warehouse"]
    if args.export:
        with warehouse.get_connection() as conn:
            counts = export_tables(conn, ALL_STORES, args.export)
        print(f"Exported {sum(counts.values())} rows of {len(counts)} tables from {DEFAULT_WAREHOUSE} to {args.export}")
        return 0
    if not Path(args.source).is_dir():
        try:  # migrated to this version's schema, under the file's lock
            with WarehouseResource(database=args.source).get_connection():
                pass
        except Exception as error:
            if NEWER_FILE not in str(error):
                raise
            print(
                f"{args.source} was written by a newer DuckDB than this install's: in the install that wrote it "
                f"(.venv), run `python -m jobs.move_warehouse --export FOLDER` with EVAL_WAREHOUSE={args.source}, "
                f"then here `python -m jobs.move_warehouse --from FOLDER`.",
                file=sys.stderr,
            )
            return 2
    with warehouse.get_connection() as conn:
        counts = import_tables(conn, ALL_STORES, args.source)
    print(f"Moved {sum(counts.values())} rows of {len(counts)} tables from {args.source} into {DEFAULT_WAREHOUSE}:")
    for table, rows in counts.items():
        print(f"  {table}: {rows}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
