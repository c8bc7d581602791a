"""The judging domain's tables (schema version 3) and views (`views/*.sql`).

Pairwise sets and their items (labels where humans gave them); every verdict in the item's own
order with the order it was shown in, the judge's raw text and its cost, in one table per writer
(recorded elsewhere, a panel on the stored sets, a panel on MT-Bench's model pairs; the view
`all_verdicts` holds them all); MT-Bench's questions, answers and single-answer grades; each judge's
agreement with humans per set (one row per metric, with its interval); and the leaderboards.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from eval_platform.common.warehouse import Store

VERSION = 3

# A verdict: `verdict` in the item's order ("a": answer_a won), `shown_order` how the judge saw the
# pair ("as_is": answer_a first, "swapped": answer_b first); `source` "recorded" or "model";
# `request_key` what the judge was asked (pairwise.verdict_request_key: the verdict's pair and order,
# the judge's fingerprint, mode and budget, the chat it was sent), by which a rerun reuses it (NULL:
# recorded elsewhere; never reused); `sample_verdicts` a sampled judge's k verdicts (`verdict`: their majority).
VERDICTS = """
    judge VARCHAR NOT NULL, set_name VARCHAR NOT NULL, item_id VARCHAR NOT NULL, turn INTEGER NOT NULL,
    shown_order VARCHAR NOT NULL, verdict VARCHAR NOT NULL, raw VARCHAR NOT NULL, prompt VARCHAR,
    model_a VARCHAR, model_b VARCHAR, prompt_tokens INTEGER, completion_tokens INTEGER, cost_usd DOUBLE,
    error VARCHAR, source VARCHAR NOT NULL, judged_at TIMESTAMP NOT NULL, request_key VARCHAR,
    sample_verdicts VARCHAR[], PRIMARY KEY (judge, set_name, item_id, turn, shown_order)"""

TABLES = {
    # kind: shipped, blind (a blind-evaluation sheet's raters) or generations (two roster models')
    "judging_sets": """
        set_name VARCHAR PRIMARY KEY, kind VARCHAR NOT NULL, description VARCHAR NOT NULL,
        tie_policy VARCHAR NOT NULL, source VARCHAR NOT NULL, items INTEGER NOT NULL, labelled INTEGER NOT NULL,
        stored_at TIMESTAMP NOT NULL""",
    # position: the item's place in its set; labels: each human's (a, b or tie); gold: the set's label
    # (gold, or the humans' majority); longer: the longer answer (a, b or tie), in characters
    "judging_items": """
        set_name VARCHAR NOT NULL, item_id VARCHAR NOT NULL, position INTEGER NOT NULL, instruction VARCHAR NOT NULL,
        answer_a VARCHAR NOT NULL, answer_b VARCHAR NOT NULL, labels VARCHAR[] NOT NULL, gold VARCHAR,
        model_a VARCHAR, model_b VARCHAR, question_id VARCHAR, category VARCHAR, longer VARCHAR NOT NULL,
        PRIMARY KEY (set_name, item_id)""",
    "recorded_verdicts": VERDICTS,
    "judge_verdicts": VERDICTS,
    "mt_bench_verdicts": VERDICTS,
    "mt_bench_questions": """
        question_id INTEGER PRIMARY KEY, category VARCHAR NOT NULL, turns VARCHAR[] NOT NULL, reference VARCHAR[]""",
    "mt_bench_answers": """
        model VARCHAR NOT NULL, question_id INTEGER NOT NULL, turns VARCHAR[] NOT NULL,
        PRIMARY KEY (model, question_id)""",
    # MT-Bench's single-answer grading: score 1-10, NULL where the judgment holds no rating
    "judge_grades": """
        judge VARCHAR NOT NULL, set_name VARCHAR NOT NULL, question_id INTEGER NOT NULL, model VARCHAR NOT NULL,
        turn INTEGER NOT NULL, score DOUBLE, raw VARCHAR NOT NULL, prompt VARCHAR NOT NULL, prompt_tokens INTEGER,
        completion_tokens INTEGER, cost_usd DOUBLE, error VARCHAR, graded_at TIMESTAMP NOT NULL,
        PRIMARY KEY (judge, set_name, question_id, model, turn)""",
    # one metric of one judge on one human-labelled set, with its 95% interval and how it was made
    "judge_human_agreement": """
        judge VARCHAR NOT NULL, set_name VARCHAR NOT NULL, metric VARCHAR NOT NULL, value DOUBLE, low DOUBLE,
        high DOUBLE, n INTEGER NOT NULL, method VARCHAR NOT NULL, computed_at TIMESTAMP NOT NULL,
        PRIMARY KEY (judge, set_name, metric)""",
    # one judge's leaderboard on one set: win rate (ties half), Bradley-Terry rating, length-controlled
    # win rate against lc_baseline; each with its interval
    "judging_leaderboard": """
        judge VARCHAR NOT NULL, set_name VARCHAR NOT NULL, model VARCHAR NOT NULL, battles INTEGER NOT NULL,
        wins INTEGER NOT NULL, losses INTEGER NOT NULL, ties INTEGER NOT NULL, win_rate DOUBLE, win_rate_low DOUBLE,
        win_rate_high DOUBLE, rating DOUBLE NOT NULL, rating_low DOUBLE NOT NULL, rating_high DOUBLE NOT NULL,
        lc_baseline VARCHAR, lc_win_rate DOUBLE, lc_low DOUBLE, lc_high DOUBLE, computed_at TIMESTAMP NOT NULL,
        PRIMARY KEY (judge, set_name, model)""",
}

VIEW_FOLDER = Path(__file__).with_name("views")
VIEWS = {path.stem: path.read_text(encoding="utf-8") for path in sorted(VIEW_FOLDER.glob("*.sql"))}


def _with_sampled_verdicts(conn: duckdb.DuckDBPyConnection) -> None:
    """Version 2 to 3: a sampled judge's k verdicts beside their majority."""
    for table in ("recorded_verdicts", "judge_verdicts", "mt_bench_verdicts"):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN sample_verdicts VARCHAR[]")


class JudgingSchema(Store):
    """The judging tables and their views (the store class reads and writes them)."""

    name = "judging"
    version = VERSION
    tables = TABLES
    views = VIEWS
    migrations = {2: _with_sampled_verdicts}
