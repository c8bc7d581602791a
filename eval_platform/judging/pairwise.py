"""Pairwise judging as MT-Bench does it: FastChat's judge prompts (judge_prompts.jsonl), its verdict
and rating parsing, every pair judged in both orders.

Any model judges, asked by a registered judge (common/judges.py): `written` (it writes MT-Bench's
judgment) or `probabilities` (a small local model cannot write "[[A]]" reliably: the verdict is the
letter with the highest next-token probability after the same prompt and a one-letter question).
`mode` names the judge; by default the model's own, as for the evolution domain's rubric.

What FastChat does, and this module does too (fastchat/llm_judge/common.py):
- `pair-v2` for general questions, `pair-math-v1` (with GPT-4's reference answer) for math,
  reasoning and coding, and their `-multi-turn` versions for the second turn; the system prompt is
  the prompt's, the user prompt its template filled in;
- the verdict is "A" if "[[A]]" is in the judgment, else "B" if "[[B]]" is, else a tie if "[[C]]"
  is, else an error (unparsed); a rating is the first "[[n]]" (else "[n]"), -1 in FastChat and None
  here where there is none; two ratings within 0.1 of each other are a tie (`TIE_DELTA`);
- a pair's two orders: "game 1" shows model_1's answer as A, "game 2" shows it as B.
"""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from itertools import combinations
from typing import Literal

from eval_engine import Sampling
from eval_platform.common.gateway import describe_error
from eval_platform.common.judges import (
    Choice,
    Distribution,
    Judge,
    Judgement,
    Question,
    judge_for,
    sampled,
)
from eval_platform.common.keeping import Keeping, content_key
from eval_platform.common.models import Chat, LanguageModel
from eval_platform.judging.datasets import NEED_REFERENCE_CATEGORIES
from eval_platform.judging.ratings import Battle
from eval_platform.judging.records import (
    ORDERS,
    JudgePrompt,
    JudgeVerdict,
    ModelAnswer,
    MTBenchQuestion,
    Order,
    PairwiseItem,
    shown_to_item_order,
)

TIE_DELTA = 0.1
ONE_SCORE = re.compile(r"\[\[(\d+\.?\d*)\]\]")
ONE_SCORE_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")
TWO_SCORES = re.compile(r"\[\[(\d+\.?\d*),\s?(\d+\.?\d*)\]\]")
TWO_SCORES_BACKUP = re.compile(r"\[(\d+\.?\d*),\s?(\d+\.?\d*)\]")
JUDGE_MAX_TOKENS = 2048  # FastChat's for its API judges
MT_BENCH_SET = "mt_bench"
ShownVerdict = Literal["A", "B", "tie", "error"]
ReadVerdict = tuple[ShownVerdict, str]  # a verdict on the positions shown, and its raw text
PairsMode = Literal["pairwise-all", "pairwise-baseline"]

# --- prompts ------------------------------------------------------------------------------------


def prompt_name(kind: Literal["pairwise", "single"], category: str | None, turn: int) -> str:
    """The judge prompt FastChat uses for a question's category and turn."""
    math = category in NEED_REFERENCE_CATEGORIES
    base = (
        ("pair-math-v1" if math else "pair-v2") if kind == "pairwise" else ("single-math-v1" if math else "single-v1")
    )
    return f"{base}-multi-turn" if turn == 2 else base


def _reference_fields(prompt: JudgePrompt, reference: Sequence[str] | None) -> dict[str, str]:
    if not prompt.needs_reference:
        return {}
    if not reference:
        raise ValueError(f"judge prompt {prompt.name} needs a reference answer")
    return {"ref_answer_1": reference[0], "ref_answer_2": reference[1] if len(reference) > 1 else ""}


def _turn(texts: Sequence[str], index: int, what: str) -> str:
    if len(texts) <= index:
        raise ValueError(f"{what} has no turn {index + 1}")
    return texts[index]


def pairwise_user_prompt(
    prompt: JudgePrompt,
    question: Sequence[str],
    answer_a: Sequence[str],
    answer_b: Sequence[str],
    reference: Sequence[str] | None = None,
) -> str:
    """The prompt's template filled in as FastChat's `run_judge_pair` does (turns of the question,
    of answer A, of answer B, and of the reference where the prompt has one)."""
    if prompt.type != "pairwise":
        raise ValueError(f"{prompt.name} is not a pairwise prompt")
    fields = _reference_fields(prompt, reference)
    if prompt.multi_turn:
        return prompt.prompt_template.format(
            question_1=_turn(question, 0, "the question"),
            question_2=_turn(question, 1, "the question"),
            answer_a_1=_turn(answer_a, 0, "answer A"),
            answer_b_1=_turn(answer_b, 0, "answer B"),
            answer_a_2=_turn(answer_a, 1, "answer A"),
            answer_b_2=_turn(answer_b, 1, "answer B"),
            **fields,
        )
    return prompt.prompt_template.format(
        question=_turn(question, 0, "the question"),
        answer_a=_turn(answer_a, 0, "answer A"),
        answer_b=_turn(answer_b, 0, "answer B"),
        **fields,
    )


def single_user_prompt(
    prompt: JudgePrompt, question: Sequence[str], answer: Sequence[str], reference: Sequence[str] | None = None
) -> str:
    """The single-answer grading template filled in as FastChat's `run_judge_single` does."""
    if prompt.type != "single":
        raise ValueError(f"{prompt.name} is not a single-answer prompt")
    fields = _reference_fields(prompt, reference)
    if prompt.multi_turn:
        return prompt.prompt_template.format(
            question_1=_turn(question, 0, "the question"),
            question_2=_turn(question, 1, "the question"),
            answer_1=_turn(answer, 0, "the answer"),
            answer_2=_turn(answer, 1, "the answer"),
            **fields,
        )
    return prompt.prompt_template.format(
        question=_turn(question, 0, "the question"), answer=_turn(answer, 0, "the answer"), **fields
    )


# --- parsing ------------------------------------------------------------------------------------


def parse_pairwise(judgment: str, output_format: str = "[[A]]") -> ShownVerdict:
    """FastChat's verdict: on the positions shown, "A" (the first), "B", "tie" or "error"."""
    if output_format == "[[A]]":
        if "[[A]]" in judgment:
            return "A"
        if "[[B]]" in judgment:
            return "B"
        if "[[C]]" in judgment:
            return "tie"
        return "error"
    if output_format == "[[rating_a,rating_b]]":
        match = TWO_SCORES.search(judgment) or TWO_SCORES_BACKUP.search(judgment)
        if not match:
            return "error"
        score_a, score_b = (float(ast.literal_eval(s.strip())) for s in match.groups())
        return scores_to_verdict(score_a, score_b)
    raise ValueError(f"invalid output format: {output_format}")


def parse_rating(judgment: str) -> float | None:
    """FastChat's rating: the first "[[n]]", else the first "[n]"; None where there is none (-1 in
    FastChat, which drops those)."""
    match = ONE_SCORE.search(judgment) or ONE_SCORE_BACKUP.search(judgment)
    return float(ast.literal_eval(match.group(1))) if match else None


def scores_to_verdict(score_a: float | None, score_b: float | None) -> ShownVerdict:
    """Two grades as a pairwise verdict (FastChat's single mode): a tie within `TIE_DELTA`."""
    if score_a is None or score_b is None:
        return "error"
    if abs(score_a - score_b) <= TIE_DELTA:
        return "tie"
    return "A" if score_a > score_b else "B"


# --- what to judge ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairTask:
    """One pair to judge in both orders: the chat showing answer a first, and answer b first."""

    set_name: str
    item_id: str
    as_is: Chat
    swapped: Chat
    model_a: str | None = None
    model_b: str | None = None
    turn: int = 1

    def chat(self, order: Order) -> Chat:
        return self.as_is if order == "as_is" else self.swapped


def pair_task(
    prompt: JudgePrompt,
    set_name: str,
    item_id: str,
    question: Sequence[str],
    answer_a: Sequence[str],
    answer_b: Sequence[str],
    reference: Sequence[str] | None = None,
    model_a: str | None = None,
    model_b: str | None = None,
    turn: int = 1,
) -> PairTask:
    def chat(first: Sequence[str], second: Sequence[str]) -> Chat:
        return Chat(prompt.system_prompt, pairwise_user_prompt(prompt, question, first, second, reference))

    return PairTask(set_name, item_id, chat(answer_a, answer_b), chat(answer_b, answer_a), model_a, model_b, turn)


def item_task(item: PairwiseItem, prompts: Mapping[str, JudgePrompt], prompt: str = "pair-v2") -> PairTask:
    """A human-labelled item as MT-Bench's general pairwise prompt shows it (the instruction as the
    user question)."""
    return pair_task(
        prompts[prompt],
        item.set_name,
        item.item_id,
        [item.instruction],
        [item.answer_a],
        [item.answer_b],
        model_a=item.model_a,
        model_b=item.model_b,
    )


def mt_bench_item_id(question_id: int, model_a: str, model_b: str) -> str:
    return f"{question_id}:{model_a}:{model_b}"


def mt_bench_answer_length(answers: Mapping[str, Mapping[int, ModelAnswer]]) -> Callable[[Battle, str], int]:
    """The length (characters) of a model's answer in an MT-Bench battle, for the length-controlled
    win rate: the battle's item id names the question, its turn the answer's turn."""

    def length(battle: Battle, model: str) -> int:
        question_id = int(battle.item_id.split(":")[0])
        return len(answers[model][question_id].turns[battle.turn - 1])

    return length


def mt_bench_pairs(models: Sequence[str], mode: PairsMode, baseline: str | None = None) -> list[tuple[str, str]]:
    """The model pairs FastChat's `gen_judgment.py` judges: every pair of models (in the order the
    models are given), or each model against the baseline (the model first)."""
    if mode == "pairwise-all":
        return list(combinations(models, 2))
    if baseline is None:
        raise ValueError("pairwise-baseline needs a baseline model")
    return [(model, baseline) for model in models if model != baseline]


def chosen_questions(questions: Sequence[MTBenchQuestion], ids: Sequence[int]) -> list[MTBenchQuestion]:
    """The questions with these ids, in the ids' order (none given: all); an unknown id is an error."""
    if not ids:
        return list(questions)
    by_id = {q.question_id: q for q in questions}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise ValueError(f"no MT-Bench question {', '.join(map(str, unknown))} (ids {min(by_id)}-{max(by_id)})")
    return [by_id[i] for i in ids]


def chosen_models(answers: Mapping[str, Mapping[int, ModelAnswer]], names: Sequence[str]) -> list[str]:
    """The named models (none given: every model with answers); one without answers is an error."""
    unknown = [name for name in names if name not in answers]
    if unknown:
        raise ValueError(f"no MT-Bench answers of {', '.join(unknown)} (models: {', '.join(sorted(answers))})")
    return list(names) or sorted(answers)


def mt_bench_tasks(
    questions: Sequence[MTBenchQuestion],
    answers: Mapping[str, Mapping[int, ModelAnswer]],
    pairs: Sequence[tuple[str, str]],
    prompts: Mapping[str, JudgePrompt],
    turns: Sequence[int] = (1,),
) -> list[PairTask]:
    """Every question x model pair x turn as a pair to judge, with the prompt FastChat picks for the
    question's category and turn (GPT-4's reference answer for math, reasoning and coding)."""
    tasks = []
    for question in questions:
        for model_a, model_b in pairs:
            for turn in turns:
                prompt = prompts[prompt_name("pairwise", question.category, turn)]
                try:
                    answer_a = answers[model_a][question.question_id].turns
                    answer_b = answers[model_b][question.question_id].turns
                except KeyError as error:
                    raise ValueError(f"no answer of {error} to question {question.question_id}") from error
                tasks.append(
                    pair_task(
                        prompt,
                        MT_BENCH_SET,
                        mt_bench_item_id(question.question_id, model_a, model_b),
                        question.turns,
                        answer_a,
                        answer_b,
                        question.reference,
                        model_a,
                        model_b,
                        turn,
                    )
                )
    return tasks


# --- judging ------------------------------------------------------------------------------------

PROBABILITY_QUESTION = (
    "\n\nWhich assistant's answer is better? Answer with one letter: A if assistant A's is better, "
    "B if assistant B's is better, C for a tie."
)
PROBABILITY_LABELS = ("A", "B", "C")


def probability_verdict(distribution: Distribution) -> ReadVerdict:
    """The most probable letter (C: a tie) and the distribution as the raw text."""
    if not distribution:
        return "error", "no distribution over A, B, C"
    raw = " ".join(f"P({label})={distribution.get(label, 0.0):.4f}" for label in PROBABILITY_LABELS)
    best = max(PROBABILITY_LABELS, key=lambda label: distribution.get(label, 0.0))
    return ("tie" if best == "C" else best), raw  # type: ignore[return-value]


def written_verdict(judgment: str) -> ReadVerdict:
    """FastChat's verdict of a written judgment, and the judgment as the raw text."""
    return parse_pairwise(judgment), judgment


def pair_question(task: PairTask, order: Order) -> Question[ReadVerdict]:
    """A pair in one order as a judge asks it: MT-Bench's verdict written, or the likeliest of A, B
    and C after the same chat and the one-letter question."""
    chat = task.chat(order)
    choice = Choice(Chat(chat.system, chat.user + PROBABILITY_QUESTION), PROBABILITY_LABELS)
    return Question(chat, written_verdict, (choice,), lambda answered: probability_verdict(*answered))


def _verdict(judge: str, task: PairTask, order: Order, judgement: Judgement[ReadVerdict]) -> JudgeVerdict:
    """A judgement as its row; a failed one is an unparsed verdict with its error (and no usage), as
    FastChat's "$ERROR$" is."""
    shown, raw = judgement.value or ("error", "")
    completion = judgement.answered
    return JudgeVerdict(
        judge=judge,
        set_name=task.set_name,
        item_id=task.item_id,
        order=order,
        verdict=shown_to_item_order(shown, order),
        raw=raw,
        model_a=task.model_a,
        model_b=task.model_b,
        turn=task.turn,
        prompt=task.chat(order).user,
        prompt_tokens=completion.prompt_tokens if completion else None,
        completion_tokens=completion.completion_tokens if completion else None,
        cost_usd=completion.cost_usd if completion else None,
        error=describe_error(judgement.error) if judgement.error else None,
    )


def pair_calls(tasks: Sequence[PairTask]) -> list[tuple[PairTask, Order]]:
    """Each pair in both orders (answer a shown first, then answer b), in the tasks' order."""
    return [(task, order) for task in tasks for order in ORDERS]


def verdict_request_key(
    judge: str,
    fingerprint: str,
    task: PairTask,
    order: Order,
    asking: Judge,
    max_tokens: int,
    sampling: Sampling | None = None,
    samples: int = 1,
) -> str:
    """What identifies a verdict for reuse: its row's own key and models (judge, set, item, turn,
    order, model a and b), and all that decides the judge's answer: the model's fingerprint (a local
    model's weights) and what the judge asking it sends (`Judge.request`: its name, the token budget
    where it writes, and the chat: the judge prompt's system prompt and its template filled in with
    the question and both answers in the order shown, with the one-letter question when reading
    probabilities), and a sampled judge's sampling and number of samples. A changed judge, prompt,
    template, item, budget or sampling gives another key, so its stored verdict is not reused."""
    sampled = {"sampling": asdict(sampling), "samples": samples} if sampling is not None else {}
    return content_key(
        {
            "verdict": [judge, task.set_name, task.item_id, task.turn, order, task.model_a, task.model_b],
            "judge": fingerprint,
            **asking.request(pair_question(task, order), max_tokens),
            **sampled,
        }
    )


def reusable(stored: Mapping[str, JudgeVerdict]) -> dict[str, JudgeVerdict]:
    """The stored verdicts a rerun may reuse, by request key: every one but a failed call's (its
    error is asked again)."""
    return {key: verdict for key, verdict in stored.items() if verdict.error is None}


def judge_kept(
    judge: str,
    model: LanguageModel,
    tasks: Sequence[PairTask],
    keeping: Keeping[JudgeVerdict],
    mode: str | None = None,
    max_tokens: int = JUDGE_MAX_TOKENS,
    concurrency: int = 8,
    batch_size: int = 8,
    sampling: Sampling | None = None,
    samples: int = 1,
) -> list[JudgeVerdict]:
    """`judge_pairs` with its verdicts kept as they come: each verdict whose request key
    (`verdict_request_key`) `keeping` has stored is reused, the others are asked in slices and kept
    in chunks (common/keeping.py), so a run killed mid-way loses at most the chunk under way."""
    asking = judge_for(model, mode) if sampling is None else sampled(judge_for(model, mode))
    fingerprint = str(getattr(model, "fingerprint", judge))
    keyed = [
        (verdict_request_key(judge, fingerprint, *call, asking, max_tokens, sampling, samples), call)
        for call in pair_calls(tasks)
    ]
    ask = JudgeCalls(judge, model, asking, max_tokens, concurrency, batch_size, sampling, samples)
    with asyncio.Runner() as runner:  # one event loop for the judge's calls, slice after slice
        return keeping.resolve(keyed, lambda batch: runner.run(ask(batch)), lambda _, v: v, lambda _, stored: stored)


async def judge_pairs(
    judge: str,
    model: LanguageModel,
    tasks: Sequence[PairTask],
    mode: str | None = None,
    max_tokens: int = JUDGE_MAX_TOKENS,
    concurrency: int = 8,
    batch_size: int = 8,
    sampling: Sampling | None = None,
    samples: int = 1,
) -> list[JudgeVerdict]:
    """Every pair judged in both orders (answer a shown first, then answer b shown first): two
    verdicts per task, in the tasks' order, each with its raw text, order, tokens and cost.

    `mode` names the judge asking (`judge_for`): "written" asks for MT-Bench's verdict,
    "probabilities" reads it from the next-token distribution over A, B and C; by default the
    model's own, as for the evolution domain's rubric. A sampled judge (`sampling`) is asked
    `samples` times, its verdict their majority (`majority_verdict`)."""
    ask = JudgeCalls(judge, model, judge_for(model, mode), max_tokens, concurrency, batch_size, sampling, samples)
    return await ask(pair_calls(tasks))


@dataclass(frozen=True)
class JudgeCalls:
    """A judge's calls on pairs in given orders: greedy, or `samples` verdicts of each drawn with
    `sampling` (each sample's stream its own)."""

    judge: str
    model: LanguageModel
    asking: Judge
    max_tokens: int
    concurrency: int
    batch_size: int
    sampling: Sampling | None = None
    samples: int = 1

    async def __call__(self, calls: Sequence[tuple[PairTask, Order]]) -> list[JudgeVerdict]:
        """Each call's verdict, in order."""
        questions = [pair_question(task, order) for task, order in calls]
        sizes = (self.concurrency, self.batch_size)
        if self.sampling is None:
            judgements = await self.asking.ask(self.model, questions, self.max_tokens, *sizes)
            return [_verdict(self.judge, task, order, j) for (task, order), j in zip(calls, judgements, strict=True)]
        drawn = await sampled(self.asking).ask_samples(
            self.model, questions, self.max_tokens, self.sampling, self.samples, *sizes
        )
        return [
            majority_verdict([_verdict(self.judge, task, order, j) for j in each])
            for (task, order), each in zip(calls, drawn, strict=True)
        ]


def majority_verdict(samples: Sequence[JudgeVerdict]) -> JudgeVerdict:
    """A sampled judge's verdict on one call: the verdict most of its samples gave (the first seen of
    a tie, as maj@k breaks it; an unparsed sample counts for none unless none parsed), with that
    sample's text, every sample's verdict, and the tokens and cost of them all."""
    parsed = [s.verdict for s in samples if s.verdict != "unparsed"]
    label = max(parsed, key=lambda v: (parsed.count(v), -parsed.index(v))) if parsed else "unparsed"
    chosen = next(s for s in samples if s.verdict == label)

    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    return replace(
        chosen,
        sample_verdicts=tuple(s.verdict for s in samples),
        prompt_tokens=total([s.prompt_tokens for s in samples]),
        completion_tokens=total([s.completion_tokens for s in samples]),
        cost_usd=total([s.cost_usd for s in samples]),
    )
