"""The blind evaluation's rows: questions and answers, each issued sheet and its key, the ratings
read back (with each sheet's problems), and the tallies and results."""

from __future__ import annotations

from typing import Any

import pandas as pd

from eval_platform.blind.store.schema import BlindSchema
from eval_platform.common.warehouse import reads, writes


class BlindStore(BlindSchema):
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
    def load_system_answers(self) -> dict[str, dict[str, str]]:
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
