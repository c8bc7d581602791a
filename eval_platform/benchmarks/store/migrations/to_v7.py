"""6 -> 7. The leaderboard holds the harness benchmarks' headlines beside the specs' (mode `harness`,
a benchmark of either kind by one name apart), whose shots, documents and interval may be unknown."""

from typing import Any

from eval_platform.common.warehouse import existing_tables, rebuild_table

LEADERBOARD = """
    model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
    mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL, num_fewshot INTEGER, metric VARCHAR NOT NULL,
    n INTEGER, accuracy DOUBLE NOT NULL, ci_low DOUBLE, ci_high DOUBLE,
    computed_at TIMESTAMP NOT NULL, PRIMARY KEY (model, benchmark, mode)"""


def migrate(conn: Any) -> None:
    if "leaderboard" in existing_tables(conn):
        rebuild_table(conn, "leaderboard", LEADERBOARD, "*")
