"""8 -> 9. A harness benchmark's results are kept per settings key, so a run with other shots, system
instruction or task config no longer replaces the benchmark's other runs. Each stored row takes the
key of the settings it was computed with (a sample's and a comparison's: its benchmark and model's,
the one run a version 8 warehouse held of them)."""

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from eval_platform.benchmarks.store.migrations.to_v5 import MODEL_COMPARISONS
from eval_platform.common.warehouse import existing_tables, is_lake, rebuild_table

DATA_LOCATION_KEYS = frozenset({"dataset_path", "dataset_name", "dataset_kwargs"})
HARNESS_SAMPLES = """
    benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL,
    task VARCHAR NOT NULL, doc_id INTEGER NOT NULL, filter VARCHAR NOT NULL, doc JSON NOT NULL,
    prompt VARCHAR NOT NULL, arguments JSON NOT NULL, target VARCHAR, responses JSON NOT NULL,
    filtered_responses JSON NOT NULL, metrics JSON NOT NULL, doc_hash VARCHAR, prompt_hash VARCHAR,
    run_id VARCHAR, request_keys VARCHAR[], settings_key VARCHAR NOT NULL,
    PRIMARY KEY (benchmark, model, settings_key, task, doc_id, filter)"""
HARNESS_RESULTS = """
    benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL,
    task VARCHAR NOT NULL, alias VARCHAR, is_group BOOLEAN NOT NULL, metric VARCHAR NOT NULL,
    filter VARCHAR NOT NULL, value DOUBLE, stderr DOUBLE, n INTEGER, num_fewshot INTEGER,
    higher_is_better BOOLEAN, random_baseline DOUBLE, settings JSON NOT NULL, run_id VARCHAR,
    computed_at TIMESTAMP NOT NULL, settings_key VARCHAR NOT NULL,
    PRIMARY KEY (benchmark, model, settings_key, task, metric, filter)"""
HARNESS_HISTORY = """
    run_id VARCHAR NOT NULL, scored_at TIMESTAMP NOT NULL, benchmark VARCHAR NOT NULL, model VARCHAR NOT NULL,
    model_fingerprint VARCHAR NOT NULL, task VARCHAR NOT NULL, filter VARCHAR NOT NULL, num_fewshot INTEGER,
    metric VARCHAR NOT NULL, doc_id INTEGER NOT NULL, value DOUBLE NOT NULL, settings JSON NOT NULL,
    prediction_run_id VARCHAR, settings_key VARCHAR NOT NULL,
    PRIMARY KEY (run_id, benchmark, model, task, filter, metric, doc_id)"""
HARNESS_COMPARISONS = MODEL_COMPARISONS.replace(
    "PRIMARY KEY (benchmark,", "settings_key VARCHAR NOT NULL, PRIMARY KEY (benchmark, settings_key,"
)


def settings_key(settings: Mapping[str, Any]) -> str:
    """A run's settings key as version 9 made it: its shots, system instruction and task config
    overridden beyond where its data comes from."""

    def digest(value: Any) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:8]

    shots = settings.get("num_fewshot")
    parts = [f"{shots}-shot" if shots is not None else "default shots"]
    if settings.get("system_instruction"):
        parts.append(f"system instruction {digest(settings['system_instruction'])}")
    overridden = {
        task: {key: value for key, value in config.items() if key not in DATA_LOCATION_KEYS}
        for task, config in (settings.get("overrides") or {}).items()
    }
    if any(overridden.values()):
        parts.append(f"overrides {digest({task: config for task, config in overridden.items() if config})}")
    return ", ".join(parts)


def migrate(conn: Any) -> None:
    if "harness_results" not in existing_tables(conn):
        return
    settings = [
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT settings::VARCHAR FROM harness_results UNION SELECT DISTINCT settings::VARCHAR "
            "FROM harness_history"
        ).fetchall()
    ]
    conn.execute("CREATE TEMP TABLE settings_keys (settings VARCHAR, settings_key VARCHAR)")
    conn.executemany(
        "INSERT INTO settings_keys VALUES (?, ?)", [(text, settings_key(json.loads(text))) for text in settings]
    )
    conn.execute(
        "CREATE TEMP TABLE run_keys AS SELECT DISTINCT r.benchmark, r.model, k.settings_key "
        "FROM harness_results r JOIN settings_keys k ON k.settings = r.settings::VARCHAR"
    )
    own = "(SELECT k.settings_key FROM settings_keys k WHERE k.settings = old.settings::VARCHAR)"
    runs = (
        "(SELECT coalesce(any_value(k.settings_key), '{}') FROM run_keys k WHERE k.benchmark = old.benchmark "
        "AND k.model = old.{})"
    )
    unknown = settings_key({})
    for table, columns, value in (
        ("harness_results", HARNESS_RESULTS, own),
        ("harness_history", HARNESS_HISTORY, own),
        ("harness_samples", HARNESS_SAMPLES, runs.format(unknown, "model")),
        ("harness_comparisons", HARNESS_COMPARISONS, runs.format(unknown, "model_a")),
    ):
        if is_lake(conn):  # no keys to change: the column is added in place
            conn.execute(f"ALTER TABLE {table} ADD COLUMN settings_key VARCHAR")
            conn.execute(f"UPDATE {table} AS old SET settings_key = {value}")
        else:
            rebuild_table(conn, table, columns, f"*, {value} AS settings_key")
    conn.execute("DROP TABLE settings_keys")
    conn.execute("DROP TABLE run_keys")
