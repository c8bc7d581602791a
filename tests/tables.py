"""Comparisons of stored results computed in different batches, processes or machines: every value
exactly, except floats, which may differ by `LOGLIKELIHOOD_TOLERANCE` (see common/reproducibility.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import duckdb

from eval_engine import LOGLIKELIHOOD_TOLERANCE
from eval_platform.common.warehouse import CLAIMS_TABLE, SCHEMA_TABLE


def differences(actual: Any, expected: Any, where: str = "", tolerance: float = LOGLIKELIHOOD_TOLERANCE) -> list[str]:
    """Where two values differ: floats (in lists, maps and structs too) by more than `tolerance`,
    anything else at all."""
    if isinstance(actual, float) and isinstance(expected, float):
        same = (math.isnan(actual) and math.isnan(expected)) or abs(actual - expected) <= tolerance
        return [] if same else [f"{where}: {actual!r} != {expected!r} (tolerance {tolerance})"]
    if isinstance(actual, dict) and isinstance(expected, dict) and actual.keys() == expected.keys():
        return [d for key in actual for d in differences(actual[key], expected[key], f"{where}.{key}", tolerance)]
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)) and len(actual) == len(expected):
        return [
            d
            for i, (a, e) in enumerate(zip(actual, expected, strict=False))
            for d in differences(a, e, f"{where}[{i}]", tolerance)
        ]
    return [] if actual == expected else [f"{where}: {actual!r} != {expected!r}"]


def _without_floats(value: Any) -> Any:
    """The value with every float blanked, to order rows by what must match exactly."""
    if isinstance(value, float):
        return None
    if isinstance(value, dict):
        return [(key, _without_floats(v)) for key, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [_without_floats(v) for v in value]
    return value


def sorted_rows(rows: Sequence[tuple]) -> list[tuple]:
    """Rows in the order of their exact parts (floats set aside), so rows that differ only in the
    last digits of a float still pair up."""
    return sorted(rows, key=lambda row: repr(_without_floats(row)))


def assert_same_rows(actual: dict[str, list[tuple]], expected: dict[str, list[tuple]]) -> None:
    """Two snapshots ({table: rows}) hold the same tables and rows: exact but for floats."""
    assert sorted(actual) == sorted(expected)
    found = []
    for table in sorted(expected):
        mine, theirs = sorted_rows(actual[table]), sorted_rows(expected[table])
        if len(mine) != len(theirs):
            found.append(f"{table}: {len(mine)} rows, expected {len(theirs)}")
            continue
        found += [
            d for i, (a, e) in enumerate(zip(mine, theirs, strict=False)) for d in differences(a, e, f"{table} row {i}")
        ]
    assert not found, "\n".join(found[:20])


def table_rows(path, queries: dict[str, str], params: Sequence[Any] = ()) -> dict[str, list[tuple]]:
    """{name: rows of its query} from a warehouse file, opened read-only."""
    with duckdb.connect(str(path), read_only=True) as conn:
        return {name: conn.execute(query, list(params)).fetchall() for name, query in queries.items()}


# Columns that differ between two runs of the same work: when, which run, how long, which path.
VOLATILE_SUFFIXES = ("_at", "run_id", "duration_ms", "_path")
# Of two identical concurrent requests one pays and one is answered by it; retries depend on timing.
# Each blind run reads answers from its own copy of the folder.
VOLATILE = {"gateway_calls": ("attempts", "cached", "cost_usd"), "blind_answers": ("source",)}
# The schema's versions, and a lake's write claims (how often each table was written).
SKIPPED_TABLES = {SCHEMA_TABLE, CLAIMS_TABLE}


def snapshot(conn) -> dict[str, list[tuple]]:
    """Every table of the connection's warehouse (a file, or a lake), its rows sorted, without the
    columns that record when and where they were made; a JSON column's values parsed (so that the
    floats in a sample's answers compare within the tolerance)."""
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() ORDER BY 1"
        ).fetchall()
    ]
    rows = {}
    for table in set(tables) - SKIPPED_TABLES:
        columns = [
            (name, kind)
            for name, kind in conn.execute(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
                "AND database_name = current_database() ORDER BY column_index",
                [table],
            ).fetchall()
            if not name.endswith(VOLATILE_SUFFIXES) and name not in VOLATILE.get(table, ())
        ]
        kept = ", ".join(f'"{name}"' for name, _ in columns)
        parsed = [i for i, (_, kind) in enumerate(columns) if kind == "JSON"]
        rows[table] = [
            tuple(json.loads(v) if i in parsed and v is not None else v for i, v in enumerate(row))
            for row in conn.execute(f"SELECT {kept} FROM {table} ORDER BY ALL").fetchall()
        ]
    return rows


def file_snapshot(path) -> dict[str, list[tuple]]:
    """`snapshot` of a warehouse file, opened read-only."""
    with duckdb.connect(str(path), read_only=True) as conn:
        return snapshot(conn)
