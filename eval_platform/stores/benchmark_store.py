"""The benchmark domain's tables: raw rows, prompts, predictions and scores, with their rejections.

Every write replaces one partition's rows (or one model's predictions in one mode) in a single
transaction, so a re-run never duplicates and a crash never leaves half a partition.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from eval_platform.core.prediction import METRICS
from eval_platform.stores.warehouse import Store, reads, rebuild_table, writes

PREDICTION_KEY = ("model_fingerprint", "benchmark", "mode", "prompt_format", "num_fewshot")

_PREDICTIONS = """
    model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
    prompt_id VARCHAR NOT NULL, mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL, num_fewshot INTEGER NOT NULL,
    predicted VARCHAR, predicted_norm VARCHAR, predicted_flexible VARCHAR,
    label_probabilities MAP(VARCHAR, DOUBLE), choice_loglikelihoods DOUBLE[], output_text VARCHAR,
    predicted_at TIMESTAMP NOT NULL,
    PRIMARY KEY (model_fingerprint, prompt_id, mode, prompt_format, num_fewshot)"""
_SCORES = """
    model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
    mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL, num_fewshot INTEGER NOT NULL, metric VARCHAR NOT NULL,
    n INTEGER NOT NULL, correct INTEGER NOT NULL, accuracy DOUBLE NOT NULL,
    ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL, report VARCHAR NOT NULL, scored_at TIMESTAMP NOT NULL,
    PRIMARY KEY (model_fingerprint, benchmark, mode, prompt_format, num_fewshot, metric)"""
_INGEST_REJECTIONS = """
    benchmark VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL, row_json JSON, reason VARCHAR NOT NULL,
    rejected_at TIMESTAMP NOT NULL"""
_PROMPT_REJECTIONS = _INGEST_REJECTIONS

# The prediction column each metric reads, as SQL over a scores row `s` and a predictions row `pr`.
_METRIC_COLUMNS = {metric: column for metrics in METRICS.values() for metric, column in metrics.items()}
_METRIC_PREDICTION = "CASE s.metric " + " ".join(
    f"WHEN '{metric}' THEN pr.{column}" for metric, column in _METRIC_COLUMNS.items()) + " END"


def _from_unversioned(conn: Any) -> None:
    """The warehouse of the unversioned platform: one `rejected_rows` table for two writers,
    prompt format 'seed' (now 'chat'), no number of shots."""
    for stage, table in (("ingest", "ingest_rejections"), ("preprocess", "prompt_rejections")):
        conn.execute(f"CREATE TABLE {table} ({_INGEST_REJECTIONS})")
        conn.execute(f"INSERT INTO {table} SELECT benchmark, source_row_id, row_json, reason, rejected_at "
                     f"FROM rejected_rows WHERE stage = '{stage}'")
    conn.execute("DROP TABLE rejected_rows")
    renamed = "CASE prompt_format WHEN 'seed' THEN 'chat' ELSE prompt_format END AS prompt_format"
    rebuild_table(conn, "predictions", _PREDICTIONS, f"* REPLACE ({renamed}), 0 AS num_fewshot")
    rebuild_table(conn, "scores", _SCORES, f"* REPLACE ({renamed}), 0 AS num_fewshot")


class BenchmarkStore(Store):
    name = "benchmarks"
    version = 1
    tables = {
        "raw_rows": """
            benchmark VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL, row_number INTEGER NOT NULL,
            row_json JSON NOT NULL, source VARCHAR NOT NULL, ingested_at TIMESTAMP NOT NULL,
            PRIMARY KEY (benchmark, source_row_id)""",
        "ingest_rejections": _INGEST_REJECTIONS,
        "prompts": """
            prompt_id VARCHAR PRIMARY KEY, benchmark VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL,
            system_prompt VARCHAR NOT NULL, user_prompt VARCHAR NOT NULL, labels VARCHAR[] NOT NULL,
            choices VARCHAR[] NOT NULL, real_answer VARCHAR NOT NULL,
            harness_contexts VARCHAR[] NOT NULL, harness_continuations VARCHAR[] NOT NULL""",
        "prompt_rejections": _PROMPT_REJECTIONS,
        "predictions": _PREDICTIONS,
        "scores": _SCORES,
    }
    views = {
        # every rejected row, at either stage
        "rejected_rows": """
            SELECT benchmark, 'ingest' AS stage, source_row_id, row_json, reason, rejected_at FROM ingest_rejections
            UNION ALL
            SELECT benchmark, 'preprocess', source_row_id, row_json, reason, rejected_at FROM prompt_rejections""",
        # score -> each prediction behind it -> its prompt -> the raw dataset row
        "score_lineage": f"""
            SELECT *, coalesce(predicted = real_answer, FALSE) AS correct FROM (
                SELECT s.model, s.benchmark, s.mode, s.prompt_format, s.num_fewshot, s.metric, s.accuracy,
                       pr.prompt_id, {_METRIC_PREDICTION} AS predicted, p.real_answer,
                       pr.label_probabilities, pr.choice_loglikelihoods, pr.output_text, p.system_prompt,
                       p.user_prompt, r.source_row_id, r.row_number, r.source, r.row_json
                FROM scores s
                JOIN predictions pr USING (model_fingerprint, benchmark, mode, prompt_format, num_fewshot)
                JOIN prompts p ON p.prompt_id = pr.prompt_id
                JOIN raw_rows r ON r.benchmark = p.benchmark AND r.source_row_id = p.source_row_id)""",
    }
    migrations = {0: _from_unversioned}

    # --- raw rows -------------------------------------------------------------------------------

    @writes("raw_rows", "ingest_rejections")
    def replace_raw_rows(self, benchmark: str, rows: pd.DataFrame, rejections: pd.DataFrame) -> None:
        with self.transaction():
            self.replace("raw_rows", rows, "benchmark = ?", [benchmark])
            self.replace("ingest_rejections", rejections, "benchmark = ?", [benchmark])

    @reads("raw_rows")
    def load_raw_rows(self, benchmark: str) -> list[dict[str, Any]]:
        return self.rows("SELECT source_row_id, row_number, row_json FROM raw_rows WHERE benchmark = ? "
                         "ORDER BY row_number", [benchmark])

    # --- prompts --------------------------------------------------------------------------------

    @writes("prompts", "prompt_rejections")
    def replace_prompts(self, benchmark: str, prompts: pd.DataFrame, rejections: pd.DataFrame) -> None:
        with self.transaction():
            self.replace("prompts", prompts, "benchmark = ?", [benchmark])
            self.replace("prompt_rejections", rejections, "benchmark = ?", [benchmark])

    @reads("prompts")
    def load_prompts(self, benchmark: str) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM prompts WHERE benchmark = ? ORDER BY source_row_id", [benchmark])

    # --- predictions ----------------------------------------------------------------------------

    @reads("predictions")
    def stored_prediction_ids(self, key: Mapping[str, Any]) -> set[str]:
        condition = " AND ".join(f"{column} = ?" for column in key)
        return {r["prompt_id"] for r in self.rows(f"SELECT prompt_id FROM predictions WHERE {condition}",
                                                  list(key.values()))}

    @writes("predictions")
    @reads("prompts")
    def save_predictions(self, key: Mapping[str, Any], predictions: pd.DataFrame, replace_all: bool) -> None:
        """Store new predictions under `key` (model, benchmark, mode, format, shots). Predictions
        for prompts the benchmark no longer has are dropped; `replace_all` drops every earlier one."""
        condition = " AND ".join(f"{column} = ?" for column in key)
        stale = "" if replace_all else " AND prompt_id NOT IN (SELECT prompt_id FROM prompts WHERE benchmark = ?)"
        with self.transaction():
            self.replace("predictions", predictions, condition + stale,
                         [*key.values(), *([] if replace_all else [key["benchmark"]])],
                         "* EXCLUDE (label_keys, label_values), map(label_keys, label_values) AS label_probabilities")

    @reads("predictions", "prompts")
    def load_scored_predictions(self, benchmark: str) -> pd.DataFrame:
        """Every stored prediction of the benchmark's current prompts, with the reference answer
        (missing values as None)."""
        return self.frame_of_rows("""
            SELECT pr.model, pr.model_fingerprint, pr.mode, pr.prompt_format, pr.num_fewshot, pr.predicted,
                   pr.predicted_norm, pr.predicted_flexible, p.real_answer
            FROM predictions pr JOIN prompts p USING (prompt_id)
            WHERE p.benchmark = ? ORDER BY p.source_row_id""", [benchmark])

    # --- scores ---------------------------------------------------------------------------------

    @writes("scores")
    def replace_scores(self, benchmark: str, scores: pd.DataFrame) -> None:
        with self.transaction():
            self.replace("scores", scores, "benchmark = ?", [benchmark])

    @reads("scores")
    def score_table(self) -> pd.DataFrame:
        """Every score, one line each, for a console summary."""
        return self.frame("""
            SELECT benchmark, mode || ' / ' || prompt_format || ' / ' || num_fewshot || '-shot / ' || metric AS metric,
                   n, round(accuracy, 3) AS accuracy, '[' || round(ci_low, 3) || ', ' || round(ci_high, 3) || ']' AS ci95
            FROM scores ORDER BY benchmark, metric""")

    # --- data-quality checks ----------------------------------------------------------------------

    @reads("scores")
    def accuracies_outside_unit_interval(self) -> list[tuple]:
        return self.sql("""
            SELECT benchmark, model, mode, num_fewshot, metric, accuracy FROM scores
            WHERE NOT (accuracy BETWEEN 0 AND 1 AND ci_low BETWEEN 0 AND accuracy
                       AND ci_high BETWEEN accuracy AND 1)""").fetchall()

    @reads("predictions")
    def duplicate_predictions(self) -> list[tuple]:
        return self.sql("""
            SELECT model_fingerprint, prompt_id, mode, prompt_format, num_fewshot, count(*) FROM predictions
            GROUP BY ALL HAVING count(*) > 1""").fetchall()

    @reads("ingest_rejections", "prompt_rejections", "prompts")
    def reject_rates_above(self, threshold: float) -> list[tuple]:
        return self.sql("""
            WITH counts AS (
                SELECT benchmark, count(*) AS rejected, 0 AS kept FROM ingest_rejections GROUP BY benchmark
                UNION ALL SELECT benchmark, count(*), 0 FROM prompt_rejections GROUP BY benchmark
                UNION ALL SELECT benchmark, 0, count(*) FROM prompts GROUP BY benchmark)
            SELECT benchmark, sum(rejected) AS rejected, sum(kept) AS kept,
                   round(sum(rejected) / (sum(rejected) + sum(kept)), 4) AS reject_rate
            FROM counts GROUP BY benchmark HAVING sum(rejected) / (sum(rejected) + sum(kept)) > ?""",
                        [threshold]).fetchall()


def prediction_key(model_fingerprint: str, benchmark: str, mode: str, prompt_format: str,
                   num_fewshot: int) -> dict[str, Any]:
    return dict(zip(PREDICTION_KEY, (model_fingerprint, benchmark, mode, prompt_format, num_fewshot)))


def predictions_frame(model: str, key: Mapping[str, Any], predictions: Sequence[Any], at: Any) -> pd.DataFrame:
    """Prediction records as rows of `predictions` (label probabilities as key and value lists)."""
    frame = pd.DataFrame([vars(p) for p in predictions],
                         columns=["prompt_id", "predicted", "predicted_norm", "predicted_flexible",
                                  "label_probabilities", "choice_loglikelihoods", "output_text"])
    distributions = frame.pop("label_probabilities")
    return frame.assign(
        label_keys=[list(d) if isinstance(d, dict) else None for d in distributions],
        label_values=[list(d.values()) if isinstance(d, dict) else None for d in distributions],
        model=model, **key, predicted_at=at,
    ).astype({"predicted": "object", "predicted_norm": "object", "predicted_flexible": "object",
              "output_text": "object", "choice_loglikelihoods": "object"})
