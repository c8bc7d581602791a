"""What an evaluation produces, whatever the solver: each document's sample and each task's result.

A `Sample` is one document under one filter: the exact prompt, every request's arguments and key
(as `answers` keys its answer), the answers before and after the filter, the reference and the
per-document metrics. A `Result` is one task's (or group's) aggregate of a metric under a filter.
They are the harness's own sample and result shapes, which the chat solvers produce too.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eval_platform.common.keeping import content_key

CHAT_MESSAGES = "chat-messages:"  # a chat API's "rendered" prompt: its messages as JSON, sent as a chat


@dataclass(frozen=True)
class Sample:
    task: str
    doc_id: int
    filter: str
    prompt: str  # the exact text the model was given (a chat: its turns)
    arguments: Sequence[Sequence[object]]  # each request's arguments
    request_keys: list[str]
    target: str | None
    responses: object  # each request's answer
    filtered_responses: object  # what the filter took out of them
    metrics: dict[str, Any]  # per-document metric values (numbers, IFEval's lists, a corpus metric's items)
    doc: object  # the document as the task read it
    doc_hash: str | None = None
    prompt_hash: str | None = None
    document_id: str | None = None  # a dataset's document (documents table)
    fewshot_ids: list[str] | None = None  # the few-shot rows drawn into its prompt, by source row id
    # a sampled request's answers (a task's repeats) each filtered and scored alone: what the filter
    # took out of each and its numeric metrics, in sample order (None for one answer a request)
    sample_answers: list[str] | None = None
    sample_metrics: list[dict[str, float]] | None = None

    def numeric_metrics(self) -> dict[str, float]:
        """The metrics whose value is a number (IFEval's per-instruction lists are not)."""
        return {
            name: float(value)
            for name, value in self.metrics.items()
            if isinstance(value, bool | int | float) and value == value
        }


@dataclass(frozen=True)
class Result:
    task: str
    metric: str
    filter: str
    value: float | None
    stderr: float | None = None
    n: int | None = None
    num_fewshot: int | None = None
    is_group: bool = False
    alias: str | None = None
    higher_is_better: bool | None = None
    random_baseline: float | None = None
    ci_low: float | None = None  # its 95% interval (common/intervals.py), None for a value that is no proportion
    ci_high: float | None = None
    cut_at_budget: float | None = None  # the share of its generations cut at the budget (None: no generation)


@dataclass(frozen=True)
class Answer:
    """One request's answer: its type and arguments, the response, whether this run computed it and,
    for a generation, why it ended."""

    request_type: str
    arguments: list[object]
    response: object  # loglikelihood: [log-likelihood, is_greedy]; generate_until: the text, unstripped
    computed: bool
    ended: str | None = None  # a generation's: why it ended (the engine's endings.py), None where unknown


@dataclass
class Evaluation:
    """One solver's evaluation of a benchmark: its samples, results and answers (by request key),
    under the key of the settings it measured, and the seconds spent in the model alone."""

    solver: str
    settings_key: str
    samples: Collection[Sample] = field(default_factory=list)  # an import's: read from its file as stored
    results: list[Result] = field(default_factory=list)
    answers: dict[str, Answer] = field(default_factory=dict)
    model_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # what the run logs: the path taken, what was skipped

    @property
    def computed(self) -> int:
        return sum(answer.computed for answer in self.answers.values())


def as_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def request_key(request_type: str, arguments: Sequence[object]) -> str:
    """A request's identity: its type and arguments (context, continuation or generation settings;
    a chat's turns), whatever task, document or solver asked it."""
    return content_key([request_type, list(arguments)])


def with_budget(gen_kwargs: Mapping[str, object], max_gen_toks: int | None) -> Mapping[str, object]:
    """A generation request's settings as asked: the run's generation budget over the task's own."""
    return {**gen_kwargs, "max_gen_toks": max_gen_toks} if max_gen_toks else gen_kwargs


def sampled_arguments(arguments: Sequence[object], seed: int, sample: int) -> list[object]:
    """A sampled request's arguments for sample `sample` under `seed`: its key, a sample's own."""
    return [*arguments, {"seed": seed, "sample": sample}]
