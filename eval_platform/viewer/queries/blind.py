"""The blind evaluation's pages' reads: the issued sheets, a sheet's questions with their ratings,
and one question with both answers as the raters saw them (A and B), each rater's scores, winner
and notes. Which system answered A and which B (the key) is read only once the sheet has a tally:
before that, no page can show it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from eval_platform.viewer.warehouse import Connection, fetch, fetch_one

_NATURAL = "TRY_CAST(regexp_extract(Question_ID, '\\d+') AS INTEGER) NULLS LAST, Question_ID"  # Q2 before Q10


@dataclass(frozen=True)
class SheetRow:
    sheet_id: str
    seed: int | None
    issued_at: datetime | None
    questions: int
    raters: int
    tallied: bool


@dataclass(frozen=True)
class QuestionRow:
    question_id: str
    question: str | None
    raters: int
    mean_a: float | None
    mean_b: float | None


@dataclass(frozen=True)
class Rating:
    rater: str
    file: str | None
    score_a: int | None
    score_b: int | None
    winner: str | None  # A, B or Tie, as the rater marked it
    notes: str | None


@dataclass(frozen=True)
class TallyRow:
    scope: str  # a rater, or pooled
    system: str
    wins: int
    losses: int
    ties: int
    ratings: int
    average_score: float | None


@dataclass(frozen=True)
class ResultRow:
    scope: str
    sentence: str | None
    mean_difference: float | None
    sign_test_p: float | None
    wilcoxon_p: float | None
    ci_low: float | None
    ci_high: float | None
    rater_kappa: float | None


@dataclass(frozen=True)
class BlindQuestion:
    question_id: str
    question: str | None
    ground_truth: str | None
    answer_a: str | None
    answer_b: str | None
    system_a: str | None  # None until the sheet has a tally
    system_b: str | None


def sheets(conn: Connection) -> list[SheetRow]:
    return fetch(
        conn,
        """SELECT i.sheet_id, i.seed, i.issued_at,
                  (SELECT count(*) FROM blind_key k WHERE k.sheet_id = i.sheet_id) AS questions,
                  (SELECT count(DISTINCT rater) FROM blind_scores s WHERE s.sheet_id = i.sheet_id) AS raters,
                  EXISTS (SELECT 1 FROM blind_tallies t WHERE t.sheet_id = i.sheet_id) AS tallied
           FROM blind_issues i ORDER BY i.issued_at DESC NULLS LAST, i.sheet_id""",
        [],
        SheetRow,
    )


def sheet(conn: Connection, sheet_id: str) -> SheetRow | None:
    return next((row for row in sheets(conn) if row.sheet_id == sheet_id), None)


def questions(conn: Connection, sheet_id: str) -> list[QuestionRow]:
    """The sheet's questions, with how many raters scored each and their mean score of A and of B."""
    return fetch(
        conn,
        f"""SELECT k.Question_ID AS question_id, any_value(q.Question) AS question,
                   count(DISTINCT s.rater) AS raters, avg(s.score) FILTER (WHERE s.side = 'A') AS mean_a,
                   avg(s.score) FILTER (WHERE s.side = 'B') AS mean_b
            FROM blind_key k LEFT JOIN blind_questions q USING (Question_ID)
            LEFT JOIN blind_scores s ON s.sheet_id = k.sheet_id AND s.Question_ID = k.Question_ID
            WHERE k.sheet_id = $sheet GROUP BY k.Question_ID ORDER BY {_NATURAL}""",
        {"sheet": sheet_id},
        QuestionRow,
    )


def question(conn: Connection, sheet_id: str, question_id: str, tallied: bool) -> BlindQuestion | None:
    """The question with answer A and answer B as issued; which system gave each only if `tallied`."""
    systems = "k.system_a, k.system_b" if tallied else "NULL AS system_a, NULL AS system_b"
    return fetch_one(
        conn,
        f"""SELECT k.Question_ID AS question_id, q.Question AS question, q.Ground_Truth AS ground_truth,
                   a.answer AS answer_a, b.answer AS answer_b, {systems}
            FROM blind_key k LEFT JOIN blind_questions q USING (Question_ID)
            LEFT JOIN blind_answers a ON a.system = k.system_a AND a.Question_ID = k.Question_ID
            LEFT JOIN blind_answers b ON b.system = k.system_b AND b.Question_ID = k.Question_ID
            WHERE k.sheet_id = $sheet AND k.Question_ID = $question""",
        {"sheet": sheet_id, "question": question_id},
        BlindQuestion,
    )


def ratings(conn: Connection, sheet_id: str, question_id: str) -> list[Rating]:
    """Each rater's scores of A and B, winner and notes on the question."""
    return fetch(
        conn,
        """SELECT rater, any_value(file) AS file, max(score) FILTER (WHERE side = 'A') AS score_a,
                  max(score) FILTER (WHERE side = 'B') AS score_b,
                  CASE any_value(outcome) FILTER (WHERE side = 'A') WHEN 'win' THEN 'A' WHEN 'loss' THEN 'B'
                       WHEN 'tie' THEN 'Tie' END AS winner,
                  any_value(notes) AS notes
           FROM blind_scores WHERE sheet_id = $sheet AND Question_ID = $question GROUP BY rater ORDER BY rater""",
        {"sheet": sheet_id, "question": question_id},
        Rating,
    )


def tally(conn: Connection, sheet_id: str) -> tuple[list[TallyRow], list[ResultRow]]:
    """The sheet's tally per system and scope (each rater, pooled) and its statistics: empty until tallied."""
    tallies = fetch(
        conn,
        """SELECT scope, system, wins, losses, ties, ratings, average_score FROM blind_tallies
           WHERE sheet_id = $sheet ORDER BY scope = 'pooled' DESC, scope, system""",
        {"sheet": sheet_id},
        TallyRow,
    )
    results = fetch(
        conn,
        """SELECT scope, sentence, mean_difference, sign_test_p, wilcoxon_p, ci_low, ci_high, rater_kappa
           FROM blind_results WHERE sheet_id = $sheet ORDER BY scope = 'pooled' DESC, scope""",
        {"sheet": sheet_id},
        ResultRow,
    )
    return tallies, results
