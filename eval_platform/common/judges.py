"""Judges: the ways a model is asked for a judgement, registered by name.

A judgement is asked as a `Question`, which has both of its forms: a chat the model answers in its
own words (`read_text` reads the reply), and one or more chats each followed by a choice among
labels (`read_choices` reads the model's distributions over them). A judge asks in one form:

- `written`: the model writes its answer, which is read (the rubric's JSON, MT-Bench's "[[A]]", a
  "[[rating]]");
- `probabilities`: the model's next-token probabilities over each choice's labels (G-Eval's
  probability-weighted digits, the likeliest letter), for a small model that writes no reliable
  answer.

The evolution domain's rubric (an era's panel) and the judging domain's pairwise verdicts and grades
ask through a judge, so a judge registered once (`JUDGES.add`, or named `module:Class`) serves
both. `judge_for` is where a model's judge is chosen: the one named, else the model's own
(`LanguageModel.rubric_judging`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypedDict, TypeVar, cast

from eval_engine import Sampling, draw, probabilities, stream, uniform
from eval_platform.common.models import Chat, Completion, LanguageModel
from eval_platform.registry import Registry

V = TypeVar("V")
V_co = TypeVar("V_co", covariant=True)  # a question read as a V is read as any wider type too
Distribution = dict[str, float] | None  # over a choice's labels; None where the model named none

# Older names of the written judge: judging's `mode: generate` and a model's `rubric_judging: json`.
ALIASES = {"generate": "written", "json": "written"}


@dataclass(frozen=True)
class Choice:
    """A chat whose answer is one of `labels`."""

    chat: Chat
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Question(Generic[V_co]):
    """One judgement to ask: `chat` answered in writing and read by `read_text`, or the `choices`
    answered by next-token distributions and read together by `read_choices` (none: it is asked
    only in writing). A reader raises on an answer it cannot use."""

    chat: Chat
    read_text: Callable[[str], V_co]
    choices: tuple[Choice, ...] = ()
    read_choices: Callable[[list[Distribution]], V_co] | None = None


@dataclass(frozen=True)
class Judgement(Generic[V]):
    """A question's answer as read (None where it failed), the paid call that gave it (None without
    one; kept with a failure too) and the failure."""

    value: V | None
    completion: Completion | None = None
    error: Exception | None = None

    @property
    def answered(self) -> Completion | None:
        """The call that gave a usable answer (None where the judgement failed, whatever it cost)."""
        return self.completion if self.error is None else None


class Judge(Protocol):
    name: str

    def request(self, question: Question[object], max_tokens: int) -> dict[str, object]:
        """All that decides its answer besides the model (JSON-able): a kept judgement is reused
        only where this is the same."""
        ...

    async def ask(
        self,
        model: LanguageModel,
        questions: Sequence[Question[V]],
        max_tokens: int,
        concurrency: int = 8,
        batch_size: int = 8,
    ) -> list[Judgement[V]]:
        """Each question's judgement, in order: a failed call or an unreadable answer is a judgement
        with its error (a model failing for a whole batch raises)."""
        ...


class SampledJudge(Judge, Protocol):
    """A judge that can also be sampled (both built-in judges; a judge of another package where it
    implements `ask_samples`)."""

    async def ask_samples(
        self,
        model: LanguageModel,
        questions: Sequence[Question[V]],
        max_tokens: int,
        sampling: Sampling,
        samples: int,
        concurrency: int = 8,
        batch_size: int = 8,
    ) -> list[list[Judgement[V]]]:
        """Each question's `samples` judgements drawn with `sampling` (sample i from a stream of its
        own: the same seed, the same judgements), in order, failed ones with their errors as `ask`'s."""
        ...


class Drawn(TypedDict, total=False):
    """How a written call is drawn: none of it for a greedy call; a sample's sampling and index."""

    sampling: Sampling
    sample: int


class JudgeError(ValueError):
    """An unknown judge; the message names the registered ones."""


class WrittenJudge:
    """The model writes its answer (greedy, or sampled), within `max_tokens`, read by the question."""

    name = "written"

    def request(self, question: Question[object], max_tokens: int) -> dict[str, object]:
        # "generate": the name request keys have had since judging's `mode` named it so
        return {"mode": "generate", "max_tokens": max_tokens, "chat": [question.chat.system, question.chat.user]}

    async def ask(
        self,
        model: LanguageModel,
        questions: Sequence[Question[V]],
        max_tokens: int,
        concurrency: int = 8,
        batch_size: int = 8,
    ) -> list[Judgement[V]]:
        return await self._written(model, [(question, {}) for question in questions], max_tokens, concurrency)

    async def ask_samples(
        self,
        model: LanguageModel,
        questions: Sequence[Question[V]],
        max_tokens: int,
        sampling: Sampling,
        samples: int,
        concurrency: int = 8,
        batch_size: int = 8,
    ) -> list[list[Judgement[V]]]:
        calls: list[tuple[Question[V], Drawn]] = [
            (q, {"sampling": sampling, "sample": sample}) for q in questions for sample in range(samples)
        ]
        answered = await self._written(model, calls, max_tokens, concurrency)
        return [answered[index * samples : (index + 1) * samples] for index in range(len(questions))]

    async def _written(
        self,
        model: LanguageModel,
        calls: Sequence[tuple[Question[V], Drawn]],
        max_tokens: int,
        concurrency: int,
    ) -> list[Judgement[V]]:
        """Each call's judgement: its question asked with its sampling (none: greedy, as every model takes it)."""
        limit = asyncio.Semaphore(concurrency)

        async def one(question: Question[V], drawn: Drawn) -> Judgement[V]:
            async with limit:
                try:
                    completion = await model.acomplete(question.chat, max_tokens=max_tokens, **drawn)
                except Exception as error:  # a failed call is a failed judgement, paid for where it says so
                    return Judgement(None, getattr(error, "completion", None), error)
            try:
                return Judgement(question.read_text(completion.text), completion)
            except Exception as error:  # an unusable reply was still a paid call
                return Judgement(None, completion, error)

        return list(await asyncio.gather(*(one(question, drawn) for question, drawn in calls)))


class ProbabilitiesJudge:
    """The model's next-token distribution over each choice's labels (`label_probabilities`, every
    question's choices in one batched call), read by the question; sampled, each sample one label
    drawn from the same distributions (`drawn_label`), asked once."""

    name = "probabilities"

    def request(self, question: Question[object], max_tokens: int) -> dict[str, object]:
        chats = [turn for choice in question.choices for turn in (choice.chat.system, choice.chat.user)]
        return {"mode": self.name, "max_tokens": None, "chat": chats}

    async def ask(
        self,
        model: LanguageModel,
        questions: Sequence[Question[V]],
        max_tokens: int,
        concurrency: int = 8,
        batch_size: int = 8,
    ) -> list[Judgement[V]]:
        distributions = await self._distributions(model, questions, batch_size)
        return [self._read(question, answered) for question, answered in zip(questions, distributions, strict=True)]

    async def ask_samples(
        self,
        model: LanguageModel,
        questions: Sequence[Question[V]],
        max_tokens: int,
        sampling: Sampling,
        samples: int,
        concurrency: int = 8,
        batch_size: int = 8,
    ) -> list[list[Judgement[V]]]:
        distributions = await self._distributions(model, questions, batch_size)
        return [
            [
                self._read(
                    question,
                    [
                        drawn_label(distribution, sampling, sample, choice.chat, model.fingerprint)
                        for distribution, choice in zip(answered, question.choices, strict=True)
                    ],
                )
                for sample in range(samples)
            ]
            for question, answered in zip(questions, distributions, strict=True)
        ]

    async def _distributions(
        self, model: LanguageModel, questions: Sequence[Question[V]], batch_size: int
    ) -> list[list[Distribution]]:
        """Each question's choices' distributions over their labels, every choice in one batched call."""
        choices = [choice for question in questions for choice in question.choices]
        distributions = await asyncio.to_thread(
            model.label_probabilities, [c.chat for c in choices], [c.labels for c in choices], batch_size
        )
        answered, start = [], 0
        for question in questions:
            answered.append(distributions[start : start + len(question.choices)])
            start += len(question.choices)
        return answered

    def _read(self, question: Question[V], answered: list[Distribution]) -> Judgement[V]:
        try:
            if question.read_choices is None:
                raise JudgeError(f"the {self.name} judge cannot ask this question: it is asked only in writing")
            return Judgement(question.read_choices(answered))
        except Exception as error:  # an unreadable distribution fails this judgement only
            return Judgement(None, error=error)


def drawn_label(
    distribution: Distribution, sampling: Sampling, sample: int, chat: Chat, fingerprint: str
) -> Distribution:
    """One label drawn from a choice's distribution over its labels: transformers' own warpers
    (temperature, top-k, top-p, min-p, as the engine applies them to a token's) on the labels'
    log-probabilities, inverted at the uniform number of the sample's stream (the seed, the sample's
    index, the judge model's fingerprint and the chat: two judges draw apart), so the same seed gives
    the same verdicts. All its mass on the drawn label."""
    import torch

    if distribution is None:
        return None
    labels = list(distribution)
    logits = torch.log(torch.tensor([[distribution[label] for label in labels]], dtype=torch.float32))
    key = stream(sampling.seed, sample, list(f"{fingerprint}\x1f{chat.system}\x1f{chat.user}".encode()))
    (index,) = draw(probabilities(logits, sampling), [uniform(key, 0)])
    return {label: float(position == index) for position, label in enumerate(labels)}


def sampled(judge: Judge) -> SampledJudge:
    """The judge, where it can be sampled; else an error saying so (before any call is made)."""
    if not callable(getattr(judge, "ask_samples", None)):
        raise JudgeError(
            f"the {judge.name} judge cannot be sampled: it has no ask_samples (docs: add a judge); "
            "set judge_temperature to 0 or use a judge that samples"
        )
    return cast(SampledJudge, judge)


# Judges by name (judging's `mode`, an era's `judge_modes`, a model's `rubric_judging`), or the
# class named `module:Class`; older names of the written judge in ALIASES.
JUDGES: Registry[Judge] = Registry(
    "judge",
    made=lambda found: found() if isinstance(found, type) else found,
    name_of=lambda judge: judge.name,
    aliases=ALIASES,
    error=JudgeError,
)


def judge_named(name: str) -> Judge:
    """A registered judge (or one of its older names, `ALIASES`), or an instance of the class named
    `module:Class`, registered."""
    return JUDGES.get(name)


def judge_for(model: LanguageModel, name: str | None = None) -> Judge:
    """The judge a model is asked by: the one named, else the model's own (`rubric_judging`:
    probabilities for a small local model, written for any other)."""
    return judge_named(name or getattr(model, "rubric_judging", "written"))


JUDGES.add(WrittenJudge())
JUDGES.add(ProbabilitiesJudge())
