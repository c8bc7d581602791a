"""Comparisons of stored results computed in different batches, processes or machines: every value
exactly, except floats, which may differ by `LOGLIKELIHOOD_TOLERANCE` (see common/reproducibility.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import duckdb

from eval_platform.common.reproducibility import LOGLIKELIHOOD_TOLERANCE
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


# The tables schema 9 keys by a harness run's settings, and the keys the previous release's harness rows
# (tests/data/v8_warehouse: two roster models, one run twice, the other 0-shot and compared) take
SETTINGS_KEYED_TABLES = ("harness_samples", "harness_results", "harness_history", "harness_comparisons")
V8_SETTINGS_KEYS = [
    ("harness_comparisons", "smollm2-chat", "0-shot", 2),
    ("harness_history", "smollm2", "default shots", 16),
    ("harness_history", "smollm2-chat", "0-shot", 8),
    ("harness_results", "smollm2", "default shots", 2),
    ("harness_results", "smollm2-chat", "0-shot", 2),
    ("harness_samples", "smollm2", "default shots", 4),
    ("harness_samples", "smollm2-chat", "0-shot", 4),
]


def settings_keys(conn) -> list[tuple]:
    """Each settings-keyed table's rows per model (a comparison's model_a) and settings key."""
    return conn.execute(
        " UNION ALL ".join(
            f"SELECT '{table}', {'model_a' if table == 'harness_comparisons' else 'model'}, settings_key, count(*) "
            f"FROM {table} GROUP BY ALL"
            for table in SETTINGS_KEYED_TABLES
        )
        + " ORDER BY ALL"
    ).fetchall()


# Where each row of a version 9 warehouse's benchmark tables goes in version 10 (migrations/to_v10.py):
# (what, a query over version 9's tables, a query over version 10's), each pair's rows equal. A
# prediction becomes a sample per filter under its solver, its item scores that sample's metrics; a
# score and a harness result become results; both histories, both comparisons, both runs tables and
# both evaluations tables become one; a protocol's rows keep one per protocol, model and task (v9 kept
# one per model fingerprint as well), the leaderboard one per model and benchmark (rebuilt by its asset).
V10_KEPT = ("raw_rows", "ingest_rejections", "fewshot_rows", "fewshot_rejections")  # as version 9 had them
V9_TO_V10 = [
    *((table, f"SELECT * FROM {table}", f"SELECT * FROM {table}") for table in V10_KEPT),
    (
        "prompts -> documents",
        "SELECT benchmark, prompt_id, source_row_id, row_number, system_prompt, user_prompt, labels, choices, "
        "real_answer FROM prompts",
        "SELECT benchmark, document_id, source_row_id, row_number, system_prompt, user_prompt, labels, choices, "
        "real_answer FROM documents",
    ),
    (
        "prompt_rejections -> document_rejections",
        "SELECT benchmark, source_row_id, row_json, reason, rejected_at FROM prompt_rejections",
        "SELECT benchmark, source_row_id, row_json, reason, rejected_at FROM document_rejections",
    ),
    (
        "harness_answers -> answers",
        "SELECT model_fingerprint, request_key, request_type, arguments::VARCHAR, response::VARCHAR, run_id, "
        "answered_at FROM harness_answers",
        "SELECT model_fingerprint, request_key, request_type, arguments::VARCHAR, response::VARCHAR, run_id, "
        "answered_at FROM answers",
    ),
    (
        "harness_samples -> samples (solver harness)",
        "SELECT benchmark, model, model_fingerprint, settings_key, task, doc_id, filter, prompt, arguments::VARCHAR, "
        "target, responses::VARCHAR, filtered_responses::VARCHAR, metrics::VARCHAR, doc::VARCHAR, request_keys, run_id "
        "FROM harness_samples",
        "SELECT benchmark, model, model_fingerprint, settings_key, task, doc_id, filter, prompt, arguments::VARCHAR, "
        "target, responses::VARCHAR, filtered_responses::VARCHAR, metrics::VARCHAR, doc::VARCHAR, request_keys, run_id "
        "FROM samples WHERE document_id IS NULL AND solver = 'harness'",
    ),
    (
        "predictions -> samples (one per filter)",
        "SELECT e.model, p.benchmark, p.prompt_id, p.run_id FROM predictions p "
        "JOIN model_evaluations e USING (benchmark, model_fingerprint, mode, prompt_format, num_fewshot)",
        "SELECT model, benchmark, document_id, run_id FROM (SELECT DISTINCT model, benchmark, document_id, run_id, "
        "solver, settings_key FROM samples WHERE document_id IS NOT NULL)",
    ),
    (
        "item_scores -> samples' metrics (under the harness's names: mc2 is acc, a generated answer's "
        "strict-match and flexible-extract are exact_match under those filters)",
        "SELECT model, benchmark, prompt_id, CASE WHEN mode = 'generate' THEN 'exact_match' WHEN metric = 'mc2' "
        "THEN 'acc' ELSE metric END, CASE WHEN mode = 'generate' THEN metric ELSE 'none' END, value FROM item_scores",
        "SELECT s.model, s.benchmark, s.document_id, m.key, s.filter, m.value::DOUBLE "
        "FROM samples s, json_each(s.metrics) m WHERE s.document_id IS NOT NULL",
    ),
    (
        "scores, harness_results -> results",
        "SELECT benchmark, model, model_fingerprint, n, accuracy FROM scores "
        "UNION ALL SELECT benchmark, model, model_fingerprint, n, value FROM harness_results",
        "SELECT benchmark, model, model_fingerprint, n, value FROM results",
    ),
    (
        "score_history, harness_history -> history",
        "SELECT run_id, benchmark, model, model_fingerprint, value, prediction_run_id FROM score_history "
        "UNION ALL SELECT run_id, benchmark, model, model_fingerprint, value, prediction_run_id FROM harness_history",
        "SELECT run_id, benchmark, model, model_fingerprint, value, prediction_run_id FROM history",
    ),
    (
        "model_comparisons, harness_comparisons -> comparisons",
        "SELECT benchmark, model_a, model_b, relation, items, accuracy_a, accuracy_b, only_a, only_b, mcnemar_p, "
        "paired_test, flipped_to_wrong, environment_differences FROM model_comparisons UNION ALL "
        "SELECT benchmark, model_a, model_b, relation, items, accuracy_a, accuracy_b, only_a, only_b, mcnemar_p, "
        "paired_test, flipped_to_wrong, environment_differences FROM harness_comparisons",
        "SELECT benchmark, model_a, model_b, relation, items, accuracy_a, accuracy_b, only_a, only_b, mcnemar_p, "
        "paired_test, flipped_to_wrong, environment_differences FROM comparisons",
    ),
    (
        "prediction_runs, harness_runs -> evaluation_runs",
        "SELECT * EXCLUDE (recorded_at) FROM prediction_runs UNION SELECT * EXCLUDE (recorded_at) FROM harness_runs",
        "SELECT * EXCLUDE (recorded_at) FROM evaluation_runs",
    ),
    (
        "model_evaluations, harness results' runs -> evaluations",
        "SELECT benchmark, model, model_fingerprint, model_source FROM model_evaluations UNION ALL "
        "SELECT benchmark, model, model_fingerprint, split_part(model_fingerprint, '@', 1) FROM "
        "(SELECT DISTINCT benchmark, model, model_fingerprint, settings_key FROM harness_results)",
        "SELECT benchmark, model, model_fingerprint, model_source FROM evaluations",
    ),
    (
        "protocol_results, normalized_scores -> protocol_scores",
        "SELECT DISTINCT protocol, model, benchmark, status FROM protocol_results "
        "UNION ALL SELECT protocol, model, benchmark, status FROM normalized_scores",
        "SELECT protocol, model, task, status FROM protocol_scores",
    ),
    (
        "leaderboard -> leaderboard",
        "SELECT DISTINCT model, benchmark FROM leaderboard",
        "SELECT model, benchmark FROM leaderboard",
    ),
]


def v9_rows(conn) -> dict[str, list[tuple]]:
    """A version 9 warehouse's benchmark rows, as each goes into version 10 (V9_TO_V10)."""
    return {what: conn.execute(old).fetchall() for what, old, _ in V9_TO_V10}


def v10_rows(conn) -> dict[str, list[tuple]]:
    """The version 10 rows that hold them."""
    return {what: conn.execute(new).fetchall() for what, _, new in V9_TO_V10}


def assert_every_v9_row_moved(before: dict[str, list[tuple]], after: dict[str, list[tuple]]) -> None:
    """Every version 9 row is in version 10 exactly (a migration copies values, it computes none),
    as often as it was there."""
    moved = [what for what in before if sorted(before[what], key=repr) != sorted(after[what], key=repr)]
    assert not moved, "\n".join(
        f"{what}: {len(before[what])} rows, {len(after[what])} after; first lost: "
        f"{next((row for row in before[what] if row not in after[what]), None)}"
        for what in moved
    )
