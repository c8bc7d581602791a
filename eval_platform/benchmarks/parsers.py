"""Dataset rows in the seed's and the Hugging Face layouts, turned into documents.

A parser reads one raw row into a `ParsedRow` (question, choices, answer; every text verbatim) or
rejects it with a reason, and gives the row in the layout its harness task reads (`harness_layout`:
MMLU's `options` and letter answer become `choices` and an index). Parsers and answer filters are
registered by name, so a declaration names them (`parser: arc`); one of another package is named
`module:function`.
"""

from __future__ import annotations

import hashlib
import random
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from eval_platform.registry import Registry

LETTERS = string.ascii_uppercase


class RowRejected(ValueError):
    """A raw row that cannot be turned into a document; the message is the stored reason."""


@dataclass(frozen=True)
class ParsedRow:
    """A benchmark row in canonical form, every text as the dataset has it."""

    question: str
    choices: tuple[str, ...] = ()
    answer_index: int | None = None  # the correct choice (the first true one where several are)
    answer_text: str | None = None  # a generation task's final answer (GSM8K's number)
    true_indices: tuple[int, ...] = ()  # every true choice, where several are (TruthfulQA mc2)
    display_order: tuple[int, ...] | None = None  # the chat prompt's order, where the dataset's gives the answer away
    extras: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Parser:
    """How a dataset's rows become documents: `parse` (raises RowRejected) and the row in its
    harness task's layout (rows as given where None)."""

    parse: Callable[[Mapping[str, object]], ParsedRow]
    harness_layout: Callable[[Mapping[str, object]], Mapping[str, object]] | None = None
    multiple_choice: bool = True

    def task_row(self, row: Mapping[str, object]) -> Mapping[str, object]:
        return self.harness_layout(row) if self.harness_layout else row


# --- field access -------------------------------------------------------------------------


def _text(row: Mapping[str, object], *names: str) -> str:
    """The first of `names` present in the row as non-blank text, verbatim."""
    for name in names:
        value = row.get(name)
        if value is not None and str(value).strip():
            return str(value)
    raise RowRejected(f"missing field {' or '.join(repr(n) for n in names)}")


def _choice_list(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise RowRejected(f"field {name!r} is not a list of choices")
    choices = tuple("" if c is None else str(c) for c in value)
    if any(not c.strip() for c in choices):
        raise RowRejected(f"field {name!r} has an empty choice")
    return choices


def _index(value: object, n_choices: int, name: str, *, one_based: bool = False, letters: bool = False) -> int:
    """An answer given as an index (int or digit string) or, where allowed, a letter."""
    text = "" if value is None else str(value).strip()
    if letters and len(text) == 1 and text.upper() in LETTERS:
        index = LETTERS.index(text.upper())
    elif re.fullmatch(r"-?\d+", text):
        index = int(text) - (1 if one_based else 0)
    else:
        raise RowRejected(f"unknown answer key {text!r} in field {name!r}")
    if not 0 <= index < n_choices:
        raise RowRejected(f"answer {text!r} in field {name!r} is out of range for {n_choices} choices")
    return index


def _targets(row: Mapping[str, object], name: str) -> tuple[tuple[str, ...], list[int]]:
    """TruthfulQA's `mc1_targets` / `mc2_targets`: choices and their 0/1 labels."""
    targets = row.get(name)
    if not isinstance(targets, Mapping):
        raise RowRejected(f"field {name!r} is not a mapping of choices and labels")
    choices = _choice_list(targets.get("choices"), f"{name}.choices")
    flags = list(targets.get("labels") or [])
    if len(flags) != len(choices) or any(flag not in (0, 1) for flag in flags) or 1 not in flags:
        raise RowRejected(f"{name}.labels must give 0 or 1 for each choice, at least one 1")
    return choices, flags


# --- parsers ---------------------------------------------------------------------------------


def parse_arc(row: Mapping[str, object]) -> ParsedRow:
    choices = row.get("choices")
    if not isinstance(choices, Mapping) or "text" not in choices or "label" not in choices:
        raise RowRejected("missing field 'choices' with 'label' and 'text'")
    texts = _choice_list(choices["text"], "choices.text")
    keys = [str(k).strip() for k in choices["label"]]
    if len(keys) != len(texts):
        raise RowRejected(f"choices has {len(keys)} labels but {len(texts)} texts")
    answer_key = _text(row, "answerKey").strip()
    if answer_key not in keys:
        raise RowRejected(f"unknown answer key {answer_key!r}: choice labels are {keys}")
    return ParsedRow(_text(row, "question"), texts, keys.index(answer_key))


def gsm8k_final_number(text: str) -> str | None:
    """The number after `####` in a GSM8K answer, without commas or a dollar sign."""
    match = re.search(r"####\s*\$?(-?[\d,]*\.?\d+)", text)
    return normalize_number(match.group(1)) if match else None


def normalize_number(text: str) -> str:
    value = text.replace(",", "").replace("$", "").strip().rstrip(".")
    if re.fullmatch(r"-?\d+\.0+", value):
        value = value.split(".")[0]
    return value


def extract_numbers(text: str) -> tuple[str | None, str | None]:
    """GSM8K answers from a chat reply: (strict: after `####`, flexible: the last number)."""
    numbers = re.findall(r"-?\$?\d[\d,]*(?:\.\d+)?", text)
    flexible = normalize_number(numbers[-1]) if numbers else None
    return gsm8k_final_number(text), flexible


def parse_gsm8k(row: Mapping[str, object]) -> ParsedRow:
    answer = _text(row, "answer")
    number = gsm8k_final_number(answer)
    if number is None:
        raise RowRejected("field 'answer' has no final '#### <number>'")
    return ParsedRow(_text(row, "question"), answer_text=number, extras={"answer": answer})


def parse_gsm8k_cot(row: Mapping[str, object]) -> ParsedRow:
    """A GSM8K test row, or one of the chain-of-thought exemplars (`question` and a worked `target`)."""
    if "answer" in row or "target" not in row:
        return parse_gsm8k(row)
    return ParsedRow(_text(row, "question"), extras={"target": _text(row, "target")})


def parse_hellaswag(row: Mapping[str, object]) -> ParsedRow:
    endings = _choice_list(row.get("endings"), "endings")
    ctx_a, ctx_b = str(row.get("ctx_a") or ""), str(row.get("ctx_b") or "")
    context = str(row.get("ctx") or "").strip() or f"{ctx_a.strip()} {ctx_b.strip()}".strip()
    if not context:
        raise RowRejected("missing field 'ctx' (or 'ctx_a')")
    extras = {"activity_label": str(row.get("activity_label") or ""), "ctx_a": ctx_a or context, "ctx_b": ctx_b}
    return ParsedRow(context, endings, _index(row.get("label"), len(endings), "label"), extras=extras)


def parse_mmlu(row: Mapping[str, object]) -> ParsedRow:
    name = "options" if row.get("options") is not None else "choices"
    choices = _choice_list(row.get(name), name)
    answer = _index(row.get("answer"), len(choices), "answer", letters=True)
    return ParsedRow(_text(row, "question"), choices, answer, extras={"subject": str(row.get("subject") or "")})


def mmlu_harness_layout(row: Mapping[str, object]) -> Mapping[str, object]:
    """The seed's MMLU layout (`options`, a letter `answer`) as the Hugging Face one the harness reads."""
    if row.get("options") is None:
        return row
    parsed = parse_mmlu(row)
    return {
        "question": parsed.question,
        "subject": parsed.extras["subject"],
        "choices": list(parsed.choices),
        "answer": parsed.answer_index,
    }


def _shuffled(question: str, n: int) -> tuple[int, ...]:
    """A seeded display order: the Hugging Face TruthfulQA layout lists the true answer first, so a
    model that always answers "A" must not score 100% in the letter mode."""
    order = list(range(n))
    random.Random(hashlib.sha256(question.strip().encode()).hexdigest()).shuffle(order)
    return tuple(order)


def parse_truthfulqa(row: Mapping[str, object]) -> ParsedRow:
    question = _text(row, "question")
    if row.get("mc1_targets") is None:
        choices = _choice_list(row.get("choices"), "choices")
        return ParsedRow(question, choices, _index(row.get("label"), len(choices), "label"))
    choices, flags = _targets(row, "mc1_targets")
    if sum(flags) != 1:
        raise RowRejected("mc1_targets.labels must mark exactly one of the choices with 1")
    return ParsedRow(question, choices, flags.index(1), display_order=_shuffled(question, len(choices)))


def truthfulqa_harness_layout(row: Mapping[str, object]) -> Mapping[str, object]:
    """The seed's TruthfulQA layout (`choices`, a `label` index) as the harness's `truthfulqa_mc1`
    reads the Hugging Face one: `mc1_targets`, the true answer first."""
    if row.get("mc1_targets") is not None:
        return row
    parsed = parse_truthfulqa(row)
    assert parsed.answer_index is not None
    order = [parsed.answer_index, *(i for i in range(len(parsed.choices)) if i != parsed.answer_index)]
    return {
        "question": parsed.question,
        "mc1_targets": {"choices": [parsed.choices[i] for i in order], "labels": [1] + [0] * (len(order) - 1)},
    }


def parse_truthfulqa_mc2(row: Mapping[str, object]) -> ParsedRow:
    question = _text(row, "question")
    choices, flags = _targets(row, "mc2_targets")
    true = tuple(i for i, flag in enumerate(flags) if flag == 1)
    return ParsedRow(question, choices, true[0], true_indices=true, display_order=_shuffled(question, len(choices)))


def parse_winogrande(row: Mapping[str, object]) -> ParsedRow:
    sentence = _text(row, "sentence")
    if sentence.count("_") != 1:
        raise RowRejected("field 'sentence' must contain exactly one blank '_'")
    choices = (_text(row, "option1"), _text(row, "option2"))
    return ParsedRow(sentence, choices, _index(row.get("answer"), 2, "answer", one_based=True))


# A dataset's row parsers, by the name a declaration's `parser` gives, or a function named
# `module:name` (made a `Parser`).
PARSERS: Registry[Parser] = Registry("parser", made=lambda found: found if isinstance(found, Parser) else Parser(found))
PARSERS.register("arc", Parser(parse_arc))
PARSERS.register("gsm8k", Parser(parse_gsm8k, multiple_choice=False))
PARSERS.register("gsm8k_cot", Parser(parse_gsm8k_cot, multiple_choice=False))
PARSERS.register("hellaswag", Parser(parse_hellaswag))
PARSERS.register("mmlu", Parser(parse_mmlu, mmlu_harness_layout))
PARSERS.register("truthfulqa", Parser(parse_truthfulqa, truthfulqa_harness_layout))
PARSERS.register("truthfulqa_mc2", Parser(parse_truthfulqa_mc2))
PARSERS.register("winogrande", Parser(parse_winogrande))

# A generated chat answer's filters, by the harness's filter names, or a function named `module:name`:
# each takes the answer out of the text.
ANSWER_FILTERS: Registry[Callable[[str], str | None]] = Registry("answer filter")


@ANSWER_FILTERS.register("strict-match")
def strict_match(text: str) -> str | None:
    """The number after `####`, without commas or a dollar sign."""
    return extract_numbers(text)[0]


@ANSWER_FILTERS.register("flexible-extract")
def flexible_extract(text: str) -> str | None:
    """The text's last number, without commas or a dollar sign."""
    return extract_numbers(text)[1]


def parser(name: str) -> Parser:
    """A registered parser, or a `Parser` named `module:name`."""
    return PARSERS.get(name)


def answer_filter(name: str) -> Callable[[str], str | None]:
    """A registered answer filter, or a function named `module:name`."""
    return ANSWER_FILTERS.get(name)
