"""The judging store's reads and writes: sets and items, verdicts (one table per writer), MT-Bench's
inputs and grades, agreement and leaderboards; and what it reads of the other domains' tables (a
blind sheet's ratings, two roster models' generated answers). Every write replaces its own rows in
one transaction: a re-run never duplicates. A panel's verdicts are kept a chunk at a time as they
come, each replacing the stored verdict of its key (judge, set, item, turn, order), with its request
key (what the judge was asked), by which a rerun finds the verdicts it can reuse."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import datetime

import pandas as pd

from eval_platform.common.warehouse import reads, writes
from eval_platform.judging.agreement import AgreementMetric
from eval_platform.judging.datasets import BlindRating, generated_text
from eval_platform.judging.grading import SingleGrade
from eval_platform.judging.ratings import LeaderboardRow
from eval_platform.judging.records import (
    GeneratedAnswer,
    HumanSet,
    JudgeVerdict,
    JudgingInputError,
    ModelAnswer,
    MTBenchQuestion,
    PairwiseItem,
)
from eval_platform.judging.store.schema import JudgingSchema

VERDICT_KEY = ["judge", "set_name", "item_id", "turn", "shown_order"]  # the verdict tables' key


def _verdict(row: Mapping) -> JudgeVerdict:
    samples = row["sample_verdicts"]
    return JudgeVerdict(
        **{name: row[name] for name in JudgeVerdict.__dataclass_fields__ if name not in ("order", "sample_verdicts")},
        order=row["shown_order"],
        sample_verdicts=None if samples is None else tuple(samples),
    )


class JudgingStore(JudgingSchema):
    # --- sets ---------------------------------------------------------------------------------

    @writes("judging_sets", "judging_items")
    def replace_judging_sets(self, sets: Sequence[HumanSet], now: datetime) -> None:
        """These sets, replacing the stored sets of the same names (others kept)."""
        if not sets:
            return
        described = pd.DataFrame(
            [
                {
                    "set_name": s.name,
                    "kind": s.kind,
                    "description": s.description,
                    "tie_policy": s.tie_policy,
                    "source": s.source,
                    "items": len(s.items),
                    "labelled": sum(item.gold is not None for item in s.items),
                    "stored_at": now,
                }
                for s in sets
            ]
        )
        items = pd.DataFrame(
            [
                {**asdict(item), "position": position, "labels": list(item.labels), "longer": item.longer}
                for s in sets
                for position, item in enumerate(s.items)
            ]
        )
        names = [s.name for s in sets]
        self.replace("judging_sets", described, "list_contains(?, set_name)", [names])
        self.replace(
            "judging_items", items, "list_contains(?, set_name)", [names], "* REPLACE (labels::VARCHAR[] AS labels)"
        )

    @reads("judging_sets", "judging_items")
    def load_judging_sets(self) -> dict[str, HumanSet]:
        """Every stored set with its items in their order, by name."""
        items: dict[str, list[PairwiseItem]] = {}
        for row in self.rows("SELECT * EXCLUDE (position, longer) FROM judging_items ORDER BY set_name, position"):
            items.setdefault(row["set_name"], []).append(PairwiseItem(**{**row, "labels": tuple(row["labels"])}))
        return {
            row["set_name"]: HumanSet(
                name=row["set_name"],
                description=row["description"],
                items=tuple(items.get(row["set_name"], [])),
                tie_policy=row["tie_policy"],
                source=row["source"],
                kind=row["kind"],
            )
            for row in self.rows("SELECT * FROM judging_sets ORDER BY set_name")
        }

    @reads("blind_scores", "blind_answers", "blind_questions")
    def load_blind_ratings(self) -> list[BlindRating]:
        """Every rater's winner on every question of every tallied blind sheet, unblinded, with
        the question and both answers; a rating whose question or answer the store lacks is an error."""
        rows = self.rows("""
            SELECT a.sheet_id, a.Question_ID AS question_id, q.Question AS question, a.rater, a.system AS system_a,
                   b.system AS system_b, answer_a.answer AS answer_a, answer_b.answer AS answer_b,
                   CASE a.outcome WHEN 'win' THEN 'A' WHEN 'loss' THEN 'B' ELSE 'Tie' END AS winner
            FROM blind_scores a
            JOIN blind_scores b ON b.sheet_id = a.sheet_id AND b.rater = a.rater AND b.Question_ID = a.Question_ID
                                 AND b.side = 'B'
            LEFT JOIN blind_questions q ON q.Question_ID = a.Question_ID
            LEFT JOIN blind_answers answer_a ON answer_a.system = a.system AND answer_a.Question_ID = a.Question_ID
            LEFT JOIN blind_answers answer_b ON answer_b.system = b.system AND answer_b.Question_ID = a.Question_ID
            WHERE a.side = 'A'
            ORDER BY a.sheet_id, a.Question_ID, a.rater""")
        for row in rows:
            missing = [name for name in ("question", "answer_a", "answer_b") if row[name] is None]
            if missing:
                raise JudgingInputError(
                    f"blind sheet {row['sheet_id']}: {row['question_id']}: the warehouse has no "
                    f"{', '.join(missing)} ({row['system_a']} against {row['system_b']}); materialise "
                    "blind_eval_questions and blind_eval_answers"
                )
        return [BlindRating(**row) for row in rows]

    @reads("samples")
    def load_generated_answers(self, benchmark: str, models: Sequence[str]) -> list[GeneratedAnswer]:
        """The roster models' generated answers on the benchmark (one per document, solver and
        settings key, whichever its filters); a sample holding no generated text is an error."""
        rows = self.rows(
            """
            SELECT model, solver, settings_key, task, doc_id, prompt, responses::VARCHAR AS responses FROM samples
            WHERE benchmark = ? AND list_contains(?, model)
            QUALIFY row_number() OVER (PARTITION BY model, solver, settings_key, task, doc_id ORDER BY filter) = 1
            ORDER BY model, solver, settings_key, task, doc_id""",
            [benchmark, list(models)],
        )
        answers = []
        for row in rows:
            text = generated_text(json.loads(row.pop("responses") or "null"))
            if text is None:
                raise JudgingInputError(
                    f"{benchmark}: {row['model']}'s sample {row['task']}/{row['doc_id']} (solver {row['solver']}) "
                    "holds no generated text: only a generative benchmark's answers can be judged"
                )
            answers.append(GeneratedAnswer(**row, text=text))
        return answers

    # --- verdicts -----------------------------------------------------------------------------

    def _replace_keyed(self, table: str, frame: pd.DataFrame, key: Sequence[str]) -> None:
        """The frame's rows, replacing the stored rows with the same key (others kept)."""
        if not len(frame):
            return
        columns = ", ".join(key)
        with self.registered("replaced_keys", pd.DataFrame(frame[list(key)]).drop_duplicates()):
            self.sql(f"DELETE FROM {table} WHERE ({columns}) IN (SELECT ({columns}) FROM replaced_keys)")
        self.insert(table, frame)

    def _replace_verdicts(self, table: str, verdicts: Sequence[tuple[str | None, JudgeVerdict]], now: datetime) -> None:
        """These verdicts, each with its request key (None: a recorded one), replacing the stored
        verdicts of the same key (judge, set, item, turn, order)."""
        frame = pd.DataFrame(
            [
                {**asdict(v), "sample_verdicts": v.sample_verdicts and list(v.sample_verdicts), "judged_at": now,
                 "request_key": key}
                for key, v in verdicts
            ]
        )  # fmt: skip
        self._replace_keyed(table, frame.rename(columns={"order": "shown_order"}), VERDICT_KEY)

    @writes("recorded_verdicts")
    def replace_recorded_verdicts(self, verdicts: Sequence[JudgeVerdict], now: datetime) -> None:
        """The verdicts recorded elsewhere, replacing every stored one."""
        self.sql("DELETE FROM recorded_verdicts")
        self._replace_verdicts("recorded_verdicts", [(None, v) for v in verdicts], now)

    @writes("judge_verdicts")
    def keep_judge_verdicts(self, chunk: Sequence[tuple[str, JudgeVerdict]], now: datetime) -> None:
        """A chunk of a panel's verdicts on the stored sets, by request key, as they come."""
        self._replace_verdicts("judge_verdicts", chunk, now)

    @writes("mt_bench_verdicts")
    def keep_mt_bench_verdicts(self, chunk: Sequence[tuple[str, JudgeVerdict]], now: datetime) -> None:
        """A chunk of a panel's verdicts on MT-Bench's model pairs, by request key, as they come."""
        self._replace_verdicts("mt_bench_verdicts", chunk, now)

    def _kept_verdicts(self, table: str, judges: Sequence[str]) -> dict[str, JudgeVerdict]:
        rows = self.rows(
            f"SELECT * FROM {table} WHERE request_key IS NOT NULL AND list_contains(?, judge)", [list(judges)]
        )
        return {row["request_key"]: _verdict(row) for row in rows}

    @reads("judge_verdicts")
    def kept_judge_verdicts(self, judges: Sequence[str]) -> dict[str, JudgeVerdict]:
        """The judges' stored verdicts on the sets, by request key (for a rerun to reuse)."""
        return self._kept_verdicts("judge_verdicts", judges)

    @reads("mt_bench_verdicts")
    def kept_mt_bench_verdicts(self, judges: Sequence[str]) -> dict[str, JudgeVerdict]:
        """The judges' stored verdicts on MT-Bench's pairs, by request key (for a rerun to reuse)."""
        return self._kept_verdicts("mt_bench_verdicts", judges)

    def _verdicts(self, table: str) -> list[JudgeVerdict]:
        return [_verdict(row) for row in self.rows(f"SELECT * EXCLUDE (request_key) FROM {table} ORDER BY ALL")]

    @reads("recorded_verdicts", "judge_verdicts")
    def load_set_verdicts(self) -> list[JudgeVerdict]:
        """Every verdict on the stored sets: recorded, and the panels'."""
        return self._verdicts("recorded_verdicts") + self._verdicts("judge_verdicts")

    @reads("mt_bench_verdicts")
    def load_mt_bench_verdicts(self) -> list[JudgeVerdict]:
        return self._verdicts("mt_bench_verdicts")

    def _pairs_missing_an_order(self, table: str) -> list[tuple]:
        return self.sql(
            f"SELECT judge, set_name, item_id, turn, list(shown_order) FROM {table} WHERE source = 'model' "
            f"GROUP BY ALL HAVING count(DISTINCT shown_order) < 2 ORDER BY ALL"
        ).fetchall()

    @reads("judge_verdicts")
    def set_pairs_missing_an_order(self) -> list[tuple]:
        return self._pairs_missing_an_order("judge_verdicts")

    @reads("mt_bench_verdicts")
    def mt_bench_pairs_missing_an_order(self) -> list[tuple]:
        return self._pairs_missing_an_order("mt_bench_verdicts")

    # --- MT-Bench -----------------------------------------------------------------------------

    @writes("mt_bench_questions", "mt_bench_answers")
    def replace_mt_bench_inputs(
        self, questions: Sequence[MTBenchQuestion], answers: Mapping[str, Mapping[int, ModelAnswer]]
    ) -> None:
        frame = pd.DataFrame(
            [{**asdict(q), "turns": list(q.turns), "reference": list(q.reference or []) or None} for q in questions]
        )
        answered = pd.DataFrame(
            [{**asdict(a), "turns": list(a.turns)} for by_question in answers.values() for a in by_question.values()]
        )
        self.replace("mt_bench_questions", frame, select="* REPLACE (reference::VARCHAR[] AS reference)")
        self.replace("mt_bench_answers", answered)

    @reads("mt_bench_questions", "mt_bench_answers")
    def load_mt_bench_inputs(self) -> tuple[list[MTBenchQuestion], dict[str, dict[int, ModelAnswer]]]:
        """MT-Bench's questions (with their reference answers) and every model's answers."""
        questions = [
            MTBenchQuestion(
                row["question_id"], row["category"], tuple(row["turns"]), tuple(row["reference"] or ()) or None
            )
            for row in self.rows("SELECT * FROM mt_bench_questions ORDER BY question_id")
        ]
        answers: dict[str, dict[int, ModelAnswer]] = {}
        for row in self.rows("SELECT * FROM mt_bench_answers ORDER BY model, question_id"):
            answers.setdefault(row["model"], {})[row["question_id"]] = ModelAnswer(
                row["model"], row["question_id"], tuple(row["turns"])
            )
        return questions, answers

    @writes("judge_grades")
    def save_judge_grades(self, grades: Sequence[SingleGrade], now: datetime) -> None:
        """These grades, replacing the stored grades of the same judge, answer and turn."""
        frame = pd.DataFrame([{**asdict(g), "graded_at": now} for g in grades])
        self._replace_keyed("judge_grades", frame, ["judge", "set_name", "question_id", "model", "turn"])

    # --- agreement and leaderboards -----------------------------------------------------------

    @writes("judge_human_agreement")
    def replace_judge_agreement(self, metrics: Sequence[AgreementMetric], now: datetime) -> None:
        """Every judge's agreement on every labelled set, replacing all of it."""
        self.replace("judge_human_agreement", pd.DataFrame([asdict(m) for m in metrics]).assign(computed_at=now))

    @reads("judge_human_agreement")
    def load_agreement_metrics(self, set_name: str) -> list[AgreementMetric]:
        """Every judge's measured agreement with the humans of one set, metric by metric."""
        return [
            AgreementMetric(**row)
            for row in self.rows(
                "SELECT * EXCLUDE (computed_at) FROM judge_human_agreement WHERE set_name = ? ORDER BY judge, metric",
                [set_name],
            )
        ]

    @reads("judge_vs_human")
    def judge_vs_human_table(self) -> pd.DataFrame:
        """Each judge against each labelled set's humans, one line each, for a console summary."""
        return self.frame("""
            SELECT judge, set_name, items, verdicts, round(accuracy, 3) AS accuracy, round(kappa, 3) AS kappa,
                   round(human_kappa, 3) AS human_kappa, round(position_consistency, 3) AS same_both_orders,
                   round(first_wins, 3) AS first_shown_wins
            FROM judge_vs_human""")

    @writes("judging_leaderboard")
    def replace_judging_leaderboard(
        self, boards: Mapping[str, Sequence[LeaderboardRow]], lc_baseline: str | None, now: datetime
    ) -> None:
        """Each set's leaderboards (every judge's), replacing the set's stored ones."""
        frame = pd.DataFrame(
            [
                {
                    **{k: v for k, v in asdict(row).items() if k != "win_rate"},
                    "set_name": set_name,
                    "win_rate": row.win_rate.value,
                    "win_rate_low": row.win_rate.low,
                    "win_rate_high": row.win_rate.high,
                    "lc_baseline": lc_baseline if row.lc_win_rate is not None else None,
                    "computed_at": now,
                }
                for set_name, rows in boards.items()
                for row in rows
            ]
        )
        self.replace("judging_leaderboard", frame, "list_contains(?, set_name)", [list(boards)])
