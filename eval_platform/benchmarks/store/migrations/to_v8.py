"""7 -> 8. A harness document names its requests (`harness_samples.request_keys`), so its answers in
`harness_answers`, and the run that computed them (`harness_runs`), are found from it; a document
stored before has none."""

from typing import Any

from eval_platform.common.warehouse import add_column


def migrate(conn: Any) -> None:
    add_column(conn, "harness_samples", "request_keys", "VARCHAR[]")
