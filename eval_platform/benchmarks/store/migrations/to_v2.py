"""1 -> 2. Harness requests move out of `prompts` into their own table (with few-shot ones); rows
and rejections record their file and line; `correct` may be fractional (mc2)."""

from typing import Any

from eval_platform.benchmarks.store.migrations.to_v1 import SCORES
from eval_platform.common.warehouse import rebuild_table

REJECTIONS = """
    benchmark VARCHAR NOT NULL, source_row_id VARCHAR, row_json VARCHAR, reason VARCHAR NOT NULL,
    rejected_at TIMESTAMP NOT NULL"""
SOURCE_REJECTIONS = "source VARCHAR, line INTEGER, " + REJECTIONS
PROMPTS = """
    prompt_id VARCHAR PRIMARY KEY, benchmark VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL, row_number INTEGER,
    system_prompt VARCHAR NOT NULL, user_prompt VARCHAR NOT NULL, labels VARCHAR[] NOT NULL,
    choices VARCHAR[] NOT NULL, real_answer VARCHAR NOT NULL"""


def migrate(conn: Any) -> None:
    conn.execute("ALTER TABLE raw_rows ADD COLUMN line INTEGER")
    rebuild_table(conn, "ingest_rejections", SOURCE_REJECTIONS, "*")
    rebuild_table(conn, "prompt_rejections", REJECTIONS, "*")
    rebuild_table(
        conn,
        "prompts",
        PROMPTS,
        "* EXCLUDE (harness_contexts, harness_continuations), (SELECT r.row_number FROM raw_rows r "
        "WHERE r.benchmark = old.benchmark AND r.source_row_id = old.source_row_id) AS row_number",
    )
    rebuild_table(conn, "scores", SCORES, "* REPLACE (correct::DOUBLE AS correct)")
