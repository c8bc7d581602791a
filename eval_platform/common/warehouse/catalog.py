"""What the connection's current database is and holds, asked of DuckDB's catalog functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb


def scalar(conn: duckdb.DuckDBPyConnection, statement: str, params: Sequence[object] = ()) -> Any:
    """The first value of a query's first row (an aggregate's, which always has one)."""
    row = conn.execute(statement, list(params)).fetchone()
    if row is None:
        raise LookupError(f"No row from {statement}")
    return row[0]


def is_lake(conn: duckdb.DuckDBPyConnection) -> bool:
    """Whether the connection's current database is a DuckLake catalog."""
    return scalar(conn, "SELECT type FROM duckdb_databases() WHERE database_name = current_database()") == "ducklake"


def warehouse_name(conn: duckdb.DuckDBPyConnection) -> str:
    """The current database's file (a lake's catalog), or its name when it has none (in memory)."""
    return scalar(
        conn, "SELECT coalesce(path, database_name) FROM duckdb_databases() WHERE database_name = current_database()"
    )


def existing_tables(conn: duckdb.DuckDBPyConnection) -> set[str]:
    """The names of the current database's tables."""
    return {
        name
        for (name,) in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
        ).fetchall()
    }


def existing_views(conn: duckdb.DuckDBPyConnection) -> dict[str, str | None]:
    """The current database's views, each with its comment."""
    return dict(
        conn.execute(
            "SELECT view_name, comment FROM duckdb_views() WHERE NOT internal AND database_name = current_database()"
        ).fetchall()
    )
