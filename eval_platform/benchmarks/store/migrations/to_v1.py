"""0 -> 1. The unversioned platform's warehouse: one `rejected_rows` table for two writers, prompt
format 'seed' (now 'chat'), no number of shots."""

from typing import Any

from eval_platform.common.warehouse import rebuild_table

V1_REJECTIONS = """
    benchmark VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL, row_json JSON, reason VARCHAR NOT NULL,
    rejected_at TIMESTAMP NOT NULL"""
# predictions and scores as versions 1 to 5 (predictions) and 1 to 4 (scores) hold them
PREDICTIONS = """
    model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL, mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL, num_fewshot INTEGER NOT NULL,
    predicted VARCHAR, predicted_norm VARCHAR, predicted_flexible VARCHAR,
    label_probabilities MAP(VARCHAR, DOUBLE), choice_loglikelihoods DOUBLE[], output_text VARCHAR,
    predicted_at TIMESTAMP NOT NULL, run_id VARCHAR,
    PRIMARY KEY (model_fingerprint, prompt_id, mode, prompt_format, num_fewshot)"""
SCORES = """
    model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
    mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL, num_fewshot INTEGER NOT NULL, metric VARCHAR NOT NULL,
    n INTEGER NOT NULL, correct DOUBLE NOT NULL, accuracy DOUBLE NOT NULL,
    ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL, report VARCHAR NOT NULL, scored_at TIMESTAMP NOT NULL,
    PRIMARY KEY (model_fingerprint, benchmark, mode, prompt_format, num_fewshot, metric)"""


def migrate(conn: Any) -> None:
    for stage, table in (("ingest", "ingest_rejections"), ("preprocess", "prompt_rejections")):
        conn.execute(f"CREATE TABLE {table} ({V1_REJECTIONS})")
        conn.execute(
            f"INSERT INTO {table} BY NAME SELECT benchmark, source_row_id, row_json, reason, rejected_at "
            f"FROM rejected_rows WHERE stage = '{stage}'"
        )
    conn.execute("DROP TABLE rejected_rows")
    renamed = "CASE prompt_format WHEN 'seed' THEN 'chat' ELSE prompt_format END AS prompt_format"
    rebuild_table(conn, "predictions", PREDICTIONS, f"* REPLACE ({renamed}), 0 AS num_fewshot")
    rebuild_table(
        conn, "scores", SCORES.replace("correct DOUBLE", "correct INTEGER"), f"* REPLACE ({renamed}), 0 AS num_fewshot"
    )
