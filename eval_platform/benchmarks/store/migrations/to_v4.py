"""3 -> 4. Generative metrics take the harness's filter names (`strict-match`, `flexible-extract`)
in every table that names a metric."""

from typing import Any

from eval_platform.common.warehouse import existing_tables

HARNESS_METRIC_NAMES = {"strict_match": "strict-match", "flexible_match": "flexible-extract"}


def migrate(conn: Any) -> None:
    for table in {"scores", "item_scores", "score_history", "model_comparisons", "protocol_results"} & existing_tables(
        conn
    ):
        for old, new in HARNESS_METRIC_NAMES.items():
            conn.execute(f"UPDATE {table} SET metric = ? WHERE metric = ?", [new, old])
