"""`eval-platform move-warehouse`: a warehouse moved into the configured one, every row kept, or the
configured one's tables exported as Parquet."""

from __future__ import annotations

import sys
from pathlib import Path

from eval_platform.common.warehouse import export_tables, import_tables, registered_stores
from eval_platform.resources import WarehouseResource

NEWER_FILE = "newer version of DuckDB"


def export_warehouse(warehouse: WarehouseResource, folder: str) -> int:
    with warehouse.get_connection() as conn:
        counts = export_tables(conn, registered_stores(), folder)
    print(f"Exported {sum(counts.values())} rows of {len(counts)} tables from {warehouse.location} to {folder}")
    return 0


def move_warehouse(warehouse: WarehouseResource, source: str) -> int:
    """Move `source` (a warehouse file, or a folder `export_warehouse` wrote) into `warehouse`. The
    team's install runs DuckDB 1.4.4 (DuckLake's), which cannot open a file written by DuckDB 2.0:
    export such a file first in the default install, and move the folder."""
    if not Path(source).is_dir():
        try:  # migrated to this version's schema, under the file's lock
            with type(warehouse)(database=source).get_connection():
                pass
        except Exception as error:
            if NEWER_FILE not in str(error):
                raise
            print(f"{source} was written by a newer DuckDB than this install's: in the install that wrote it "
                  f"(.venv), run `eval-platform move-warehouse --export FOLDER` with EVAL_WAREHOUSE={source}, "
                  "then here `eval-platform move-warehouse --from FOLDER`.", file=sys.stderr)  # fmt: skip
            return 2
    with warehouse.get_connection() as conn:
        counts = import_tables(conn, registered_stores(), source)
    print(f"Moved {sum(counts.values())} rows of {len(counts)} tables from {source} into {warehouse.location}:")
    for table, rows in counts.items():
        print(f"  {table}: {rows}")
    return 0
