"""MT-Bench's single-answer grading by a panel: every answer graded by each judge in turn, and each
judge's mean grade of each model per turn."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from statistics import mean

import pandas as pd

from eval_platform.common.models import LanguageModel
from eval_platform.judging.pairwise import GradeTask, SingleGrade, grade_answers


def panel_grades(
    judges: Sequence[str], open_model: Callable[[str], LanguageModel], tasks: Sequence[GradeTask], max_tokens: int
) -> list[SingleGrade]:
    """Every task graded by each judge (opened by name with `open_model`), one judge after another."""
    grades: list[SingleGrade] = []
    for judge in judges:
        grades += asyncio.run(grade_answers(judge, open_model(judge), tasks, max_tokens))
    return grades


def mean_grades(grades: Sequence[SingleGrade]) -> pd.DataFrame:
    """Each judge's mean grade of each model per turn over the answers it rated, and how many it rated."""
    rated: dict[tuple[str, str, int], list[float]] = {}
    for grade in grades:
        if grade.score is not None:
            rated.setdefault((grade.judge, grade.model, grade.turn), []).append(grade.score)
    return pd.DataFrame(
        [
            {"judge": judge, "model": model, "turn": turn, "mean_score": round(mean(values), 2), "rated": len(values)}
            for (judge, model, turn), values in sorted(rated.items())
        ]
    )
