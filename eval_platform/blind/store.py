"""The blind-evaluation domain's tables: questions, answers, issued sheets and keys, ratings read
back from filled sheets (and their problems), tallies and results."""

from __future__ import annotations

from typing import Any

import pandas as pd

from eval_platform.common.warehouse import Store, add_column, reads, writes


class BlindStore(Store):
    name = "blind_evaluation"
    version = 2
    tables = {
        "blind_questions": "Question_ID VARCHAR PRIMARY KEY, Question VARCHAR, Ground_Truth VARCHAR",
        "blind_answers": "system VARCHAR, Question_ID VARCHAR, answer VARCHAR, source VARCHAR, "
        "PRIMARY KEY (system, Question_ID)",
        "blind_issues": "sheet_id VARCHAR PRIMARY KEY, seed INTEGER, systems VARCHAR[], sheet_path VARCHAR, "
        "key_path VARCHAR, issued_at TIMESTAMP",
        "blind_key": "sheet_id VARCHAR, Question_ID VARCHAR, system_a VARCHAR, system_b VARCHAR, "
        "PRIMARY KEY (sheet_id, Question_ID)",
        "blind_scores": "sheet_id VARCHAR, rater VARCHAR, file VARCHAR, Question_ID VARCHAR, system VARCHAR, "
        "side VARCHAR, score INTEGER, opponent_score INTEGER, outcome VARCHAR, notes VARCHAR, "
        "PRIMARY KEY (sheet_id, rater, Question_ID, system)",
        "blind_sheet_problems": "file VARCHAR, cell VARCHAR, problem VARCHAR, checked_at TIMESTAMP",
        "blind_tallies": "sheet_id VARCHAR, scope VARCHAR, system VARCHAR, wins INTEGER, losses INTEGER, "
        "ties INTEGER, ratings INTEGER, average_score DOUBLE, PRIMARY KEY (sheet_id, scope, system)",
        "blind_results": "sheet_id VARCHAR, scope VARCHAR, sentence VARCHAR, mean_difference DOUBLE, "
        "sign_test_p DOUBLE, wilcoxon_p DOUBLE, ci_low DOUBLE, ci_high DOUBLE, rater_kappa DOUBLE, "
        "PRIMARY KEY (sheet_id, scope)",
    }
    migrations = {
        0: lambda conn: None,  # the unversioned platform had the same tables
        1: lambda conn: add_column(conn, "blind_scores", "notes", "VARCHAR"),  # the rater's notes, kept since
    }

    @writes("blind_questions")
    def replace_questions(self, questions: pd.DataFrame) -> None:
        self.replace_together("TRUE", [], blind_questions=questions)

    @reads("blind_questions")
    def load_questions(self) -> pd.DataFrame:
        return self.frame("SELECT * FROM blind_questions ORDER BY Question_ID")

    @writes("blind_answers")
    def replace_answers(self, answers: pd.DataFrame) -> None:
        self.replace_together("TRUE", [], blind_answers=answers)

    @reads("blind_answers")
    def load_answers(self) -> dict[str, dict[str, str]]:
        """system -> Question_ID -> answer."""
        answers: dict[str, dict[str, str]] = {}
        for row in self.rows("SELECT system, Question_ID, answer FROM blind_answers"):
            answers.setdefault(row["system"], {})[row["Question_ID"]] = row["answer"]
        return answers

    @writes("blind_issues", "blind_key")
    def save_issue(self, sheet_id: str, issue: pd.DataFrame, key: pd.DataFrame) -> None:
        self.replace_together("sheet_id = ?", [sheet_id], blind_issues=issue, blind_key=key)

    @reads("blind_issues")
    def latest_issue(self) -> dict[str, Any] | None:
        issues = self.rows("SELECT * FROM blind_issues ORDER BY issued_at DESC LIMIT 1")
        return issues[0] if issues else None

    @writes("blind_scores", "blind_sheet_problems")
    def replace_ratings(self, sheet_id: str, scores: pd.DataFrame, problems: pd.DataFrame) -> None:
        self.replace("blind_scores", scores, "sheet_id = ?", [sheet_id])
        self.replace("blind_sheet_problems", problems)

    @reads("blind_scores")
    def load_ratings(self, sheet_id: str) -> pd.DataFrame:
        return self.frame("SELECT * FROM blind_scores WHERE sheet_id = ?", [sheet_id])

    @writes("blind_tallies", "blind_results")
    def replace_tally(self, sheet_id: str, tallies: pd.DataFrame, results: pd.DataFrame) -> None:
        self.replace_together("sheet_id = ?", [sheet_id], blind_tallies=tallies, blind_results=results)

    @reads("blind_results")
    def pooled_sentence(self) -> str | None:
        row = self.sql("SELECT sentence FROM blind_results WHERE scope = 'pooled' ORDER BY sheet_id LIMIT 1").fetchone()
        return row[0] if row else None
