"""How one document's sample reads on a page, whatever its solver: the exact prompt as turns (a chat
solver's system and user turns, a chat API's messages, or the harness's context with its few-shot
examples in it), the answer (each choice's log-likelihood, the label probabilities, or each
generated text with the reasoning block that was stripped from it), and two generated texts as a
diff. Pure functions of stored values; every text stays text (the templates escape it)."""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from eval_platform.benchmarks.records import CHAT_MESSAGES

CHAT_SOLVERS = ("letter", "choices", "generate")  # their arguments start with the system and user turns


@dataclass(frozen=True)
class Turn:
    role: str  # system, user, assistant; `context` for a harness prompt given as one text
    text: str


@dataclass(frozen=True)
class Choice:
    text: str
    loglikelihood: float | None
    greedy: bool | None  # whether the continuation is the model's greedy one (the harness reports it)
    highest: bool  # the highest log-likelihood of the document's choices
    reference: bool  # the reference answer's choice


@dataclass(frozen=True)
class Generated:
    text: str  # as scored (after the reasoning block, where one was stripped)
    reasoning: str | None  # the block the settings' reasoning_end stripped, as the model wrote it
    ended: str | None = None  # why the generation ended (answers.ended), where recorded


@dataclass(frozen=True)
class AnswerView:
    kind: str  # loglikelihood, label_probabilities, generated, rolling, or other
    choices: list[Choice] = field(default_factory=list)
    probabilities: list[tuple[str, float]] = field(default_factory=list)  # most probable first
    generated: list[Generated] = field(default_factory=list)
    values: list[float] = field(default_factory=list)  # a rolling (perplexity) log-likelihood per request
    other: str = ""  # any other shape, as JSON


@dataclass(frozen=True)
class StoredAnswer:
    """A request's answer as `answers` keeps it: its type and the response before any stripping."""

    request_type: str
    response: object  # the stored JSON, decoded
    ended: str | None = None  # a generation's: why it ended


@dataclass(frozen=True)
class DiffPiece:
    kind: str  # same, removed (only in the first text), added (only in the second)
    text: str


def parsed(value: object) -> Any:
    """A JSON column's value (DuckDB returns JSON as text)."""
    return json.loads(value) if isinstance(value, str) else value


def prompt_turns(solver: str, prompt: str, arguments: Sequence[Sequence[object]]) -> list[Turn]:
    """The exact prompt as the model was given it."""
    if solver in CHAT_SOLVERS and arguments and len(arguments[0]) >= 2:
        system, user = arguments[0][0], arguments[0][1]
        return [Turn("system", str(system))] * bool(system) + [Turn("user", str(user))]
    if prompt.startswith(CHAT_MESSAGES):
        try:
            messages = json.loads(prompt[len(CHAT_MESSAGES) :])
            return [Turn(str(m["role"]), str(m["content"])) for m in messages]
        except (ValueError, TypeError, KeyError):
            pass  # not the messages it says: shown as the text it is
    return [Turn("context", prompt)]


def split_reasoning(raw: str, scored: str) -> Generated:
    """A generated text as scored, and the reasoning block before it where one was stripped (the
    stored answer is the text before stripping; the scored one is its end)."""
    if raw != scored and scored.strip() and raw.rstrip().endswith(scored.strip()):
        block = raw.rstrip()[: len(raw.rstrip()) - len(scored.strip())]
        return Generated(scored, block.rstrip() if block.strip() else None)
    return Generated(scored, None)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _first(response: object) -> Any:
    """A harness response is a list of one answer per request; a chat solver's is the answer."""
    return response[0] if isinstance(response, list) and len(response) == 1 else response


def _several_texts(response: object) -> bool:
    return isinstance(response, list) and len(response) > 1 and all(isinstance(text, str) for text in response)


def _reference_index(target: str | None, count: int) -> int | None:
    return int(target) if target is not None and target.isdigit() and int(target) < count else None


def answer_view(
    arguments: Sequence[Sequence[object]],
    responses: Any,
    request_keys: Sequence[str] | None,
    stored: Mapping[str, StoredAnswer],
    target: str | None,
    labels: Sequence[str] = (),
) -> AnswerView:
    """A sample's answer, shaped by its requests' type (as `answers` names it, else by its shape)."""
    responses = list(responses or [])
    kinds = [stored[key].request_type for key in request_keys or [] if key in stored]
    kind = kinds[0] if kinds else ""
    if responses and isinstance(responses[0], dict):
        shown = sorted(((str(k), float(v)) for k, v in responses[0].items()), key=lambda kv: -kv[1])
        return AnswerView("label_probabilities", probabilities=shown)
    if kind in ("loglikelihood", "chat_loglikelihood") or (
        arguments and all(len(a) in (2, 3) and isinstance(a[-1], str) for a in arguments) and kind == ""
    ):
        pairs = []
        for args, response in zip(arguments, responses, strict=False):
            answer = _first(response)
            if isinstance(answer, list):
                pairs.append((str(args[-1]), _number(answer[0]), bool(answer[1]) if len(answer) > 1 else None))
            else:
                pairs.append((str(args[-1]), _number(answer), None))
        scores = [value for _, value, _ in pairs if value is not None and not math.isnan(value)]
        best = max(scores) if scores else None
        reference = _reference_index(target, len(pairs))
        if reference is None and target is not None and target in labels:
            reference = list(labels).index(target)
        return AnswerView(
            "loglikelihood",
            choices=[
                Choice(text, value, greedy, best is not None and value == best, index == reference)
                for index, (text, value, greedy) in enumerate(pairs)
            ],
        )
    if kind == "loglikelihood_rolling":
        return AnswerView("rolling", values=[v for r in responses if (v := _number(_first(r))) is not None])
    # a request's k sampled answers (a task's repeats), one after another, as `request_keys` keys them
    texts = [t for r in responses for t in (r if _several_texts(r) else [_first(r)])]
    if texts and all(isinstance(t, str) for t in texts):
        found = [stored.get(key) for key in request_keys or []]
        found += [None] * (len(texts) - len(found))
        return AnswerView(
            "generated",
            generated=[
                replace(split_reasoning(answer.response, text), ended=answer.ended)
                if answer is not None and isinstance(answer.response, str)
                else Generated(text, None)
                for text, answer in zip(texts, found, strict=False)
            ],
        )
    return AnswerView("other", other=json.dumps(responses, ensure_ascii=False, indent=1))


def shown_value(value: object) -> str:
    """What a filter took out of an answer, or a metric's value, as short text."""
    value = parsed(value)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


_TOKENS = re.compile(r"\s+|\w+|[^\w\s]")


def text_diff(first: str, second: str) -> list[DiffPiece]:
    """Two texts as runs of words the same, only in the first, or only in the second."""
    a, b = _TOKENS.findall(first), _TOKENS.findall(second)
    pieces: list[DiffPiece] = []
    for operation, a_start, a_end, b_start, b_end in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if operation == "equal":
            pieces.append(DiffPiece("same", "".join(a[a_start:a_end])))
            continue
        if a_end > a_start:
            pieces.append(DiffPiece("removed", "".join(a[a_start:a_end])))
        if b_end > b_start:
            pieces.append(DiffPiece("added", "".join(b[b_start:b_end])))
    return pieces
