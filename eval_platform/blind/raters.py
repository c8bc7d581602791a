"""Raters that are not people: the demo's programmatic stand-in and an LLM rater, each filling a copy
of the issued sheet as a human rater would."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from eval_platform.blind.sheets import ISSUED_COLUMNS, SCORES, SHEET_NAME, Rubric, expected_winner, header_columns
from eval_platform.common.models import Chat, LanguageModel


def fill_sheet(
    sheet_path: Path, filled_path: Path, score: Callable[[list[dict[str, str]]], list[tuple[int, int]]], note: str
) -> Path:
    """Save a copy of an issued sheet with Score_A, Score_B, Winner and Notes filled in by `score`,
    which receives the issued rows (by header name) and returns (Score_A, Score_B) per row."""
    from openpyxl import load_workbook

    workbook = load_workbook(sheet_path)
    sheet = workbook[SHEET_NAME]
    column = header_columns(sheet)
    rows = list(range(2, sheet.max_row + 1))
    issued = [{name: str(sheet[f"{column[name]}{r}"].value or "") for name in ISSUED_COLUMNS} for r in rows]
    for r, (score_a, score_b) in zip(rows, score(issued), strict=False):
        sheet[f"{column['Score_A']}{r}"], sheet[f"{column['Score_B']}{r}"] = score_a, score_b
        sheet[f"{column['Winner']}{r}"] = expected_winner(score_a, score_b)
        sheet[f"{column['Notes']}{r}"] = note
    filled_path.parent.mkdir(parents=True, exist_ok=True)
    workbook.save(filled_path)
    return filled_path


def demo_rater_fill(sheet_path: Path, filled_path: Path, rater_seed: int = 0) -> Path:
    """DEMO ONLY, not a human rating: fills a sheet programmatically (score = 1 + how many of the
    ground truth's longer words an answer repeats, capped at 5, plus seeded noise) so the offline
    demo can show the whole flow."""
    rng = random.Random(rater_seed)

    def score(rows: list[dict[str, str]]) -> list[tuple[int, int]]:
        scores = []
        for row in rows:
            truth = {w.lower().strip(".,;:") for w in row["Ground_Truth"].split() if len(w) > 4}
            pair = []
            for name in ("Answer_A", "Answer_B"):
                answer = {w.lower().strip(".,;:") for w in row[name].split()}
                pair.append(max(1, min(5, 1 + len(truth & answer) // 2 + rng.choice([-1, 0, 0, 1]))))
            scores.append((pair[0], pair[1]))
        return scores

    return fill_sheet(sheet_path, filled_path, score, "Filled by the demo rater (programmatic stand-in, not a human).")


def rater_prompt(rubric: Rubric, question: str, ground_truth: str, answer: str) -> str:
    levels = "\n".join(f"{score} - {level}: {criteria}" for score, level, criteria in rubric.levels)
    return (
        f"Score the answer to a {rubric.subject} from 1 to 5 with this rubric:\n{levels}\n\n"
        f"Question: {question}\n\nExpert answer (reference): {ground_truth}\n\nAnswer to score: {answer}\n\n"
        "Respond with only the score, a single digit from 1 to 5."
    )


def llm_rater_fill(sheet_path: Path, filled_path: Path, model: LanguageModel, rubric: Rubric) -> Path:
    """An LLM rater: the most probable score digit for every answer of the issued sheet (from the
    model's label probabilities, or the digit in its reply), saved as a filled sheet, as a human
    rater would."""
    digits = [str(d) for d in SCORES]

    def score(rows: list[dict[str, str]]) -> list[tuple[int, int]]:
        chats = [
            Chat(
                f"You are a strict rater of answers to a {rubric.subject}.",
                rater_prompt(rubric, row["Question"], row["Ground_Truth"], row[name]),
            )
            for row in rows
            for name in ("Answer_A", "Answer_B")
        ]
        distributions = model.label_probabilities(chats, [digits] * len(chats), 8)
        picked = []
        for chat, distribution in zip(chats, distributions, strict=False):
            if not distribution:
                raise ValueError(f"{model.name} gave no score from 1 to 5 for: {chat.user[-200:]!r}")
            picked.append(int(max(distribution, key=distribution.__getitem__)))
        return list(zip(picked[0::2], picked[1::2], strict=False))

    return fill_sheet(sheet_path, filled_path, score, f"Scored by the LLM rater {model.name}.")
