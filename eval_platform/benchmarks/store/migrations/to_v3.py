"""2 -> 3. Each prediction names the run that computed it (`prediction_runs`, created with the new
tables, records where); earlier predictions have none. A score's history names the prediction run
behind it; a model comparison, the environments that differ between its sides."""

from typing import Any

from eval_platform.common.warehouse import add_column


def migrate(conn: Any) -> None:
    add_column(conn, "predictions", "run_id", "VARCHAR")
    add_column(conn, "score_history", "prediction_run_id", "VARCHAR")
    add_column(conn, "model_comparisons", "environment_differences", "VARCHAR")
