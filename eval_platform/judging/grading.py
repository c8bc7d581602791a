"""MT-Bench's single-answer grading: each answer's turn asked of a judge in writing and read as
FastChat reads a 1-10 rating, by a panel (every answer graded by each judge in turn), and each
judge's mean grade of each model per turn."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import mean

import pandas as pd

from eval_platform.common.gateway import describe_error
from eval_platform.common.judges import Judgement, Question, judge_named
from eval_platform.common.models import Chat, LanguageModel
from eval_platform.judging.pairwise import JUDGE_MAX_TOKENS, MT_BENCH_SET, parse_rating, prompt_name, single_user_prompt
from eval_platform.judging.records import JudgePrompt, ModelAnswer, MTBenchQuestion


@dataclass(frozen=True)
class GradeTask:
    """One answer's turn to grade: its set, question, model and turn, and the judge's chat."""

    set_name: str
    question_id: int
    model: str
    turn: int
    chat: Chat


@dataclass(frozen=True)
class SingleGrade:
    """One 1-10 grade of one answer (MT-Bench's single-answer grading)."""

    judge: str
    set_name: str
    question_id: int
    model: str
    turn: int
    score: float | None  # None: no rating in the judgment (FastChat's -1)
    raw: str
    prompt: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = None


def mt_bench_grade_tasks(
    questions: Sequence[MTBenchQuestion],
    answers: Mapping[str, Mapping[int, ModelAnswer]],
    models: Sequence[str],
    prompts: Mapping[str, JudgePrompt],
    turns: Sequence[int] = (1, 2),
) -> list[GradeTask]:
    """Each model's answer to each question graded on each turn, with the judge prompt FastChat
    gives the question's category and turn (a reference where it has one)."""
    tasks = []
    for question in questions:
        for model in models:
            for turn in turns:
                prompt = prompts[prompt_name("single", question.category, turn)]
                user = single_user_prompt(
                    prompt, question.turns, answers[model][question.question_id].turns, question.reference
                )
                tasks.append(
                    GradeTask(MT_BENCH_SET, question.question_id, model, turn, Chat(prompt.system_prompt, user))
                )
    return tasks


async def grade_answers(
    judge: str,
    model: LanguageModel,
    tasks: Sequence[GradeTask],
    max_tokens: int = JUDGE_MAX_TOKENS,
    concurrency: int = 8,
) -> list[SingleGrade]:
    """Every answer graded 1-10 in writing (FastChat's parsing); a failed call is a grade of None
    with its error."""
    questions = [Question(task.chat, parse_rating) for task in tasks]
    judgements = await judge_named("written").ask(model, questions, max_tokens, concurrency)

    def grade(task: GradeTask, judgement: Judgement[float | None]) -> SingleGrade:
        completion = judgement.answered
        return SingleGrade(
            judge=judge,
            set_name=task.set_name,
            question_id=task.question_id,
            model=task.model,
            turn=task.turn,
            score=judgement.value,
            raw=completion.text if completion else "",
            prompt=task.chat.user,
            prompt_tokens=completion.prompt_tokens if completion else None,
            completion_tokens=completion.completion_tokens if completion else None,
            cost_usd=completion.cost_usd if completion else None,
            error=describe_error(judgement.error) if judgement.error else None,
        )

    return [grade(task, judgement) for task, judgement in zip(tasks, judgements, strict=True)]


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
