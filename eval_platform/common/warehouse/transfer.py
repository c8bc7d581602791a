"""Moving a warehouse: its tables exported as Parquet (a form any DuckDB version reads), and imported
into another warehouse (a team's lake) from such a folder or a file, every row checked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

from eval_platform.common.warehouse.catalog import scalar
from eval_platform.common.warehouse.store import SchemaError, Store


def _tables(stores: Sequence[type[Store]]) -> list[str]:
    return sorted(name for store in stores for name in store.tables)


def export_tables(conn: duckdb.DuckDBPyConnection, stores: Sequence[type[Store]], folder: str) -> dict[str, int]:
    """Every table of `stores` as `<table>.parquet` in `folder`: rows per table."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    counts = {}
    for table in _tables(stores):
        conn.execute(f"COPY {table} TO '{Path(folder) / table}.parquet' (FORMAT parquet)")
        counts[table] = scalar(conn, f"SELECT count(*) FROM {table}")
    return counts


def import_tables(conn: duckdb.DuckDBPyConnection, stores: Sequence[type[Store]], source: str) -> dict[str, int]:
    """Copy every table of `stores` from `source` (a warehouse file at this schema version, or a
    folder `export_tables` wrote) into the connection's warehouse, which must hold none of their
    rows, in one transaction: rows per table, each checked equal to the source's."""
    tables = _tables(stores)
    folder = Path(source).is_dir()
    if not folder:
        conn.execute(f"ATTACH '{source}' AS moved_from (READ_ONLY)")

    def relation(table: str) -> str:
        return f"read_parquet('{Path(source) / table}.parquet')" if folder else f"moved_from.main.{table}"

    try:
        occupied = {table: n for table in tables if (n := scalar(conn, f"SELECT count(*) FROM {table}"))}
        if occupied:
            raise SchemaError(f"The warehouse to move into already holds rows ({occupied}): move into an empty one.")
        missing = [table for table in tables if folder and not (Path(source) / f"{table}.parquet").exists()]
        if missing:
            raise SchemaError(f"{source} has no export of {', '.join(missing)}: export it again with this version.")
        counts = {}
        conn.execute("BEGIN TRANSACTION")
        try:
            for table in tables:
                conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {relation(table)}")
                counts[table] = scalar(conn, f"SELECT count(*) FROM {table}")
                expected = scalar(conn, f"SELECT count(*) FROM {relation(table)}")
                if counts[table] != expected:
                    raise SchemaError(f"{table}: {counts[table]} rows moved of {expected} in {source}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return counts
    finally:
        if not folder:
            conn.execute("DETACH moved_from")
