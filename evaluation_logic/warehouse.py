"""DuckDB tables of the warehouse and the one way rows are written: replace a slice in a transaction."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

import pandas as pd

from evaluation_logic.scoring import METRICS

SEED_JUDGES = ("openai", "claude", "gemini")


def judge_struct(names: Sequence[str]) -> str:
    return "STRUCT(" + ", ".join(f'"{name}" DOUBLE' for name in names) + ")"


TABLES = {
    "raw_rows": """
        benchmark VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL, row_number INTEGER NOT NULL,
        row_json JSON NOT NULL, source VARCHAR NOT NULL, ingested_at TIMESTAMP NOT NULL,
        PRIMARY KEY (benchmark, source_row_id)""",
    "rejected_rows": """
        benchmark VARCHAR NOT NULL, stage VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL,
        row_json JSON, reason VARCHAR NOT NULL, rejected_at TIMESTAMP NOT NULL""",
    "prompts": """
        prompt_id VARCHAR PRIMARY KEY, benchmark VARCHAR NOT NULL, source_row_id VARCHAR NOT NULL,
        system_prompt VARCHAR NOT NULL, user_prompt VARCHAR NOT NULL, labels VARCHAR[] NOT NULL,
        choices VARCHAR[] NOT NULL, real_answer VARCHAR NOT NULL,
        harness_contexts VARCHAR[] NOT NULL, harness_continuations VARCHAR[] NOT NULL""",
    "predictions": """
        model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
        prompt_id VARCHAR NOT NULL, mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL,
        predicted VARCHAR, predicted_norm VARCHAR, predicted_flexible VARCHAR,
        label_probabilities MAP(VARCHAR, DOUBLE), choice_loglikelihoods DOUBLE[], output_text VARCHAR,
        predicted_at TIMESTAMP NOT NULL,
        PRIMARY KEY (model_fingerprint, prompt_id, mode, prompt_format)""",
    "scores": """
        model VARCHAR NOT NULL, model_fingerprint VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
        mode VARCHAR NOT NULL, prompt_format VARCHAR NOT NULL, metric VARCHAR NOT NULL,
        n INTEGER NOT NULL, correct INTEGER NOT NULL, accuracy DOUBLE NOT NULL,
        ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL, report VARCHAR NOT NULL, scored_at TIMESTAMP NOT NULL,
        PRIMARY KEY (model_fingerprint, benchmark, mode, prompt_format, metric)""",
    "source_paragraphs": "paragraph_id VARCHAR PRIMARY KEY, title VARCHAR, text VARCHAR NOT NULL",
    "gene_pool": "tag VARCHAR NOT NULL, gene_index INTEGER NOT NULL, text VARCHAR NOT NULL, PRIMARY KEY (tag, gene_index)",
    "generations": f"""
        era VARCHAR NOT NULL, generation INTEGER NOT NULL, prompt_id VARCHAR NOT NULL, operator VARCHAR NOT NULL,
        parents VARCHAR[] NOT NULL, carried_over BOOLEAN NOT NULL, evaluated_generation INTEGER NOT NULL,
        role VARCHAR, compression_target VARCHAR, fidelity VARCHAR, constraints VARCHAR, output VARCHAR,
        prompt_text VARCHAR, paragraph_id VARCHAR, original_text VARCHAR, compressed_text VARCHAR,
        compression_error VARCHAR, original_words INTEGER, compressed_words INTEGER, compression_ratio DOUBLE,
        word_compression_ratio DOUBLE, original_tokens INTEGER, compressed_tokens INTEGER,
        token_compression_ratio DOUBLE, quality_scores {judge_struct(SEED_JUDGES)}, quality_score_avg DOUBLE,
        raw_fitness DOUBLE, survival_factor INTEGER, fitness DOUBLE,
        PRIMARY KEY (era, generation, prompt_id)""",
    "judge_scores": """
        era VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL, evaluated_generation INTEGER NOT NULL,
        judge_name VARCHAR NOT NULL, judge_model VARCHAR NOT NULL, faithfulness DOUBLE, clarity DOUBLE,
        readability DOUBLE, score DOUBLE, reported_score DOUBLE, score_mismatch BOOLEAN, comments VARCHAR,
        error VARCHAR, judge_duration_ms INTEGER, PRIMARY KEY (era, prompt_id, judge_name)""",
    "generation_stats": """
        era VARCHAR NOT NULL, generation INTEGER NOT NULL, population INTEGER NOT NULL,
        mean_fitness DOUBLE, std_fitness DOUBLE, median_fitness DOUBLE, min_fitness DOUBLE, max_fitness DOUBLE,
        new_evaluations INTEGER, judge_failures INTEGER, PRIMARY KEY (era, generation)""",
    "eras": """
        era VARCHAR PRIMARY KEY, config JSON NOT NULL, compression_model VARCHAR NOT NULL, judge_panel JSON NOT NULL,
        population_size INTEGER NOT NULL, total_generations INTEGER, final_mean_fitness DOUBLE,
        final_max_fitness DOUBLE, started_at TIMESTAMP, finished_at TIMESTAMP""",
    "blind_questions": "Question_ID VARCHAR PRIMARY KEY, Question VARCHAR, Ground_Truth VARCHAR",
    "blind_answers": "system VARCHAR, Question_ID VARCHAR, answer VARCHAR, source VARCHAR, PRIMARY KEY (system, Question_ID)",
    "blind_issues": "sheet_id VARCHAR PRIMARY KEY, seed INTEGER, systems VARCHAR[], sheet_path VARCHAR, "
                    "key_path VARCHAR, issued_at TIMESTAMP",
    "blind_key": "sheet_id VARCHAR, Question_ID VARCHAR, system_a VARCHAR, system_b VARCHAR, "
                 "PRIMARY KEY (sheet_id, Question_ID)",
    "blind_scores": "sheet_id VARCHAR, rater VARCHAR, file VARCHAR, Question_ID VARCHAR, system VARCHAR, side VARCHAR, "
                    "score INTEGER, opponent_score INTEGER, outcome VARCHAR, PRIMARY KEY (sheet_id, rater, Question_ID, system)",
    "blind_sheet_problems": "file VARCHAR, cell VARCHAR, problem VARCHAR, checked_at TIMESTAMP",
    "blind_tallies": "sheet_id VARCHAR, scope VARCHAR, system VARCHAR, wins INTEGER, losses INTEGER, ties INTEGER, "
                     "ratings INTEGER, average_score DOUBLE, PRIMARY KEY (sheet_id, scope, system)",
    "blind_results": "sheet_id VARCHAR, scope VARCHAR, sentence VARCHAR, mean_difference DOUBLE, sign_test_p DOUBLE, "
                     "wilcoxon_p DOUBLE, ci_low DOUBLE, ci_high DOUBLE, rater_kappa DOUBLE, PRIMARY KEY (sheet_id, scope)",
}


def judge_json_schema(names: Sequence[str]) -> str:
    return json.dumps({name: "DOUBLE" for name in names})


def widen_quality_scores(conn, names: Sequence[str]) -> list[str]:
    """Make `generations.quality_scores` a struct with a field for every judge name (the seed's
    three first, so the seed's queries run); returns the field names in order."""
    (current,) = conn.execute(
        "SELECT data_type FROM information_schema.columns WHERE table_name = 'generations' "
        "AND column_name = 'quality_scores'").fetchone()
    existing = re.findall(r'"?([A-Za-z0-9_\-]+)"? DOUBLE', current)
    wanted = existing + [n for n in names if n not in existing]
    if wanted != existing:
        conn.execute(f"ALTER TABLE generations ALTER quality_scores TYPE {judge_struct(wanted)} "
                     f"USING from_json(to_json(quality_scores), '{judge_json_schema(wanted)}')")
    return wanted


# The prediction column each metric reads (scoring.METRICS), as SQL over a scores row `s`.
_METRIC_COLUMNS = {metric: column for metrics in METRICS.values() for metric, column in metrics.items()}
_METRIC_PREDICTION = "CASE s.metric " + " ".join(
    f"WHEN '{metric}' THEN pr.{column}" for metric, column in _METRIC_COLUMNS.items()) + " END"

# Views that walk lineage in plain SQL (see README).
VIEWS = {
    # score -> each prediction behind it -> its prompt -> the raw dataset row
    "score_lineage": f"""
        SELECT *, coalesce(predicted = real_answer, FALSE) AS correct FROM (
            SELECT s.model, s.benchmark, s.mode, s.prompt_format, s.metric, s.accuracy, pr.prompt_id,
                   {_METRIC_PREDICTION} AS predicted, p.real_answer,
                   pr.label_probabilities, pr.choice_loglikelihoods, pr.output_text, p.system_prompt,
                   p.user_prompt, r.source_row_id, r.row_number, r.source, r.row_json
            FROM scores s
            JOIN predictions pr USING (model_fingerprint, benchmark, mode, prompt_format)
            JOIN prompts p ON p.prompt_id = pr.prompt_id
            JOIN raw_rows r ON r.benchmark = p.benchmark AND r.source_row_id = p.source_row_id)""",
    # era -> generation -> prompt -> every judge's verdict
    "era_judge_scores": """
        SELECT g.era, g.generation, g.prompt_id, g.operator, g.carried_over, g.fitness, g.quality_score_avg,
               j.judge_name, j.judge_model, j.faithfulness, j.clarity, j.readability, j.score, j.error,
               j.judge_duration_ms, g.compressed_text
        FROM generations g JOIN judge_scores j ON j.era = g.era AND j.prompt_id = g.prompt_id""",
    # every prompt's ancestors (depth 0 is the prompt itself), following parents across generations
    "prompt_ancestry": """
        WITH RECURSIVE created AS (
            SELECT DISTINCT era, prompt_id, operator, parents FROM generations WHERE NOT carried_over
        ), ancestry(era, prompt_id, ancestor_id, depth, ancestor_operator) AS (
            SELECT era, prompt_id, prompt_id, 0, operator FROM created
            UNION ALL
            SELECT a.era, a.prompt_id, parent.prompt_id, a.depth + 1, parent.operator
            FROM ancestry a
            JOIN created child ON child.era = a.era AND child.prompt_id = a.ancestor_id
            JOIN created parent ON parent.era = a.era AND list_contains(child.parents, parent.prompt_id)
        )
        SELECT DISTINCT * FROM ancestry""",
}


def ensure_tables(conn, tables: Mapping[str, str] = TABLES) -> None:
    for name, columns in tables.items():
        conn.execute(f"CREATE TABLE IF NOT EXISTS {name} ({columns})")
    for name, body in VIEWS.items():
        conn.execute(f"CREATE OR REPLACE VIEW {name} AS {body}")


@dataclass(frozen=True)
class Write:
    """Replace the rows of `table` matching `where` (column equalities, plus an optional SQL
    condition `also` with its params) by `frame`. `computed` maps a column to a SQL expression
    over the frame's columns (e.g. building a MAP from two lists); `inputs` are the frame columns
    that only feed those expressions and are not stored themselves."""

    table: str
    frame: pd.DataFrame
    where: Mapping[str, Any]
    also: str = ""
    also_params: Sequence[Any] = ()
    computed: Mapping[str, str] = field(default_factory=dict)
    inputs: Sequence[str] = ()


def replace_many(conn, writes: Sequence[Write]) -> int:
    """Apply several writes in a single transaction; returns the number of rows inserted."""
    inserted = 0
    conn.execute("BEGIN TRANSACTION")
    try:
        for write in writes:
            conditions = [f"{column} = ?" for column in write.where] + ([f"({write.also})"] if write.also else [])
            conn.execute(
                f"DELETE FROM {write.table} WHERE {' AND '.join(conditions) or 'TRUE'}",
                [*write.where.values(), *write.also_params],
            )
            if len(write.frame):
                plain = [c for c in write.frame.columns if c not in write.inputs]
                targets = ", ".join([*plain, *write.computed])
                values = ", ".join([*plain, *write.computed.values()])
                conn.register("incoming_rows", write.frame)
                conn.execute(f"INSERT INTO {write.table} ({targets}) SELECT {values} FROM incoming_rows")
                conn.unregister("incoming_rows")
                inserted += len(write.frame)
        conn.execute("COMMIT")
    except Exception:
        conn.execute("ROLLBACK")
        raise
    return inserted



def utc_now() -> datetime:
    """The current UTC time as a naive timestamp, as DuckDB's TIMESTAMP columns store it."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def records(conn, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Query results as dicts with plain Python values (lists stay lists)."""
    cursor = conn.execute(sql, list(params))
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]
