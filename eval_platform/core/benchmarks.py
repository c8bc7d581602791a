"""Benchmarks as small declarative specs, with row parsers that accept both circulating layouts.

A spec names its data, its system prompt, how a raw row becomes a question with choices and an
answer (`parse`), the prediction modes it supports, and how lm-evaluation-harness would phrase it
for log-likelihood scoring (`harness`). Everything else (prompt building, prediction, scoring) is
shared, so a new benchmark is one spec here and one data slice in data/benchmarks/.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import string
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

LETTERS = string.ascii_uppercase


class RowRejected(ValueError):
    """A raw row that cannot be turned into a prompt; the message is the stored reason."""


@dataclass(frozen=True)
class ParsedRow:
    """A benchmark row in canonical form: the question, its choices and the correct one."""

    question: str
    choices: tuple[str, ...] = ()
    answer_index: int | None = None
    answer_text: str | None = None
    extras: Mapping[str, str] = field(default_factory=dict)


# A harness request: (context, continuation) per choice, scored as log P(continuation | context).
HarnessRequests = list[tuple[str, str]]


@dataclass(frozen=True)
class BenchmarkSpec:
    name: str
    title: str
    data_file: str
    hub_path: str
    hub_name: str | None
    hub_split: str
    system_prompt: str
    parse: Callable[[Mapping[str, Any]], ParsedRow]
    harness: Callable[[ParsedRow], HarnessRequests] | None = None
    modes: tuple[str, ...] = ("letter", "loglikelihood")  # prediction modes; the first is the default
    numeric_labels: bool = False
    choice_count: int | None = None  # None: any count from 2 to len(LETTERS)

    @property
    def multiple_choice(self) -> bool:
        return self.harness is not None

    def labels(self, n_choices: int) -> list[str]:
        if self.numeric_labels:
            return [str(i + 1) for i in range(n_choices)]
        return list(LETTERS[:n_choices])


# --- field access -------------------------------------------------------------------------


def _text(row: Mapping[str, Any], *names: str) -> str:
    """The first of `names` present in the row as non-empty text."""
    for name in names:
        value = row.get(name)
        if value is not None and str(value).strip():
            return str(value).strip()
    raise RowRejected(f"missing field {' or '.join(repr(n) for n in names)}")


def _choice_list(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise RowRejected(f"field {name!r} is not a list of choices")
    choices = tuple("" if c is None else str(c).strip() for c in value)
    if any(not c for c in choices):
        raise RowRejected(f"field {name!r} has an empty choice")
    return choices


def _index(value: Any, n_choices: int, name: str, *, one_based: bool = False, letters: bool = False) -> int:
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


# --- parsers, one per benchmark ---------------------------------------------------------------


def parse_arc(row: Mapping[str, Any]) -> ParsedRow:
    choices = row.get("choices")
    if not isinstance(choices, Mapping) or "text" not in choices or "label" not in choices:
        raise RowRejected("missing field 'choices' with 'label' and 'text'")
    texts = _choice_list(choices["text"], "choices.text")
    keys = [str(k).strip() for k in choices["label"]]
    if len(keys) != len(texts):
        raise RowRejected(f"choices has {len(keys)} labels but {len(texts)} texts")
    answer_key = _text(row, "answerKey")
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


def parse_gsm8k(row: Mapping[str, Any]) -> ParsedRow:
    answer = _text(row, "answer")
    number = gsm8k_final_number(answer)
    if number is None:
        raise RowRejected("field 'answer' has no final '#### <number>'")
    return ParsedRow(_text(row, "question"), answer_text=number)


def parse_hellaswag(row: Mapping[str, Any]) -> ParsedRow:
    endings = _choice_list(row.get("endings"), "endings")
    ctx_a = str(row.get("ctx_a") or "").strip()
    ctx_b = str(row.get("ctx_b") or "").strip()
    context = str(row.get("ctx") or "").strip() or f"{ctx_a} {ctx_b}".strip()
    if not context:
        raise RowRejected("missing field 'ctx' (or 'ctx_a')")
    extras = {"activity_label": str(row.get("activity_label") or ""), "ctx_a": ctx_a or context, "ctx_b": ctx_b}
    return ParsedRow(context, endings, _index(row.get("label"), len(endings), "label"), extras=extras)


def parse_mmlu(row: Mapping[str, Any]) -> ParsedRow:
    name = "options" if row.get("options") is not None else "choices"
    choices = _choice_list(row.get(name), name)
    answer = _index(row.get("answer"), len(choices), "answer", letters=True)
    return ParsedRow(_text(row, "question"), choices, answer, extras={"subject": str(row.get("subject") or "")})


def parse_truthfulqa(row: Mapping[str, Any]) -> ParsedRow:
    question = _text(row, "question")
    targets = row.get("mc1_targets")
    if targets is None:
        choices = _choice_list(row.get("choices"), "choices")
        return ParsedRow(question, choices, _index(row.get("label"), len(choices), "label"))
    if not isinstance(targets, Mapping):
        raise RowRejected("field 'mc1_targets' is not a mapping of choices and labels")
    choices = _choice_list(targets.get("choices"), "mc1_targets.choices")
    flags = list(targets.get("labels") or [])
    if len(flags) != len(choices) or sorted(flags) != [0] * (len(flags) - 1) + [1]:
        raise RowRejected("mc1_targets.labels must mark exactly one of the choices with 1")
    # The Hugging Face layout always lists the true answer first; a seeded shuffle keeps letter
    # scoring honest (a model that always says "A" must not score 100%).
    order = list(range(len(choices)))
    random.Random(hashlib.sha256(question.encode()).hexdigest()).shuffle(order)
    return ParsedRow(question, tuple(choices[i] for i in order), order.index(flags.index(1)))


def parse_winogrande(row: Mapping[str, Any]) -> ParsedRow:
    sentence = _text(row, "sentence")
    if sentence.count("_") != 1:
        raise RowRejected("field 'sentence' must contain exactly one blank '_'")
    choices = (_text(row, "option1"), _text(row, "option2"))
    return ParsedRow(sentence, choices, _index(row.get("answer"), 2, "answer", one_based=True))


# --- lm-evaluation-harness formats --------------------------------------------------------------


def question_answer_format(parsed: ParsedRow) -> HarnessRequests:
    """ARC's harness format: `Question: ...\\nAnswer:` continued by each choice."""
    return [(f"Question: {parsed.question}\nAnswer:", f" {choice}") for choice in parsed.choices]


def mmlu_format(parsed: ParsedRow) -> HarnessRequests:
    subject = parsed.extras.get("subject", "").replace("_", " ")
    description = f"The following are multiple choice questions (with answers) about {subject}.\n\n" if subject else ""
    options = "".join(f"{LETTERS[i]}. {c}\n" for i, c in enumerate(parsed.choices))
    context = f"{description}{parsed.question}\n{options}Answer:"
    return [(context, f" {LETTERS[i]}") for i in range(len(parsed.choices))]


def _hellaswag_clean(text: str) -> str:
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def hellaswag_format(parsed: ParsedRow) -> HarnessRequests:
    ctx = parsed.extras["ctx_a"] + " " + parsed.extras["ctx_b"].capitalize()
    label = parsed.extras.get("activity_label", "")
    context = _hellaswag_clean(f"{label}: {ctx}" if label else ctx)
    return [(context, " " + _hellaswag_clean(ending)) for ending in parsed.choices]


TRUTHFULQA_PREPROMPT = (
    "Q: What is human life expectancy in the United States?\n"
    "A: Human life expectancy in the United States is 78 years.\n\n"
    "Q: Who was president of the United States in 1955?\n"
    "A: Dwight D. Eisenhower was president of the United States in 1955.\n\n"
    "Q: Which party did he belong to?\n"
    "A: He belonged to the Republican Party.\n\n"
    "Q: What is the square root of banana?\n"
    "A: I have no comment.\n\n"
    "Q: How does a telescope work?\n"
    "A: Telescopes use lenses or mirrors to focus light and make objects appear closer.\n\n"
    "Q: Where were the 1992 Olympics held?\n"
    "A: The 1992 Olympics were held in Barcelona, Spain."
)


def truthfulqa_format(parsed: ParsedRow) -> HarnessRequests:
    context = f"{TRUTHFULQA_PREPROMPT}\n\nQ: {parsed.question}\nA:"
    return [(context, f" {choice}") for choice in parsed.choices]


def winogrande_partial_format(parsed: ParsedRow) -> HarnessRequests:
    """Partial scoring: the sentence up to `_` with each option, scoring the rest."""
    blank = parsed.question.index("_")
    rest = " " + parsed.question[blank + 1 :].strip()
    return [(parsed.question[:blank] + option, rest) for option in parsed.choices]


# --- the six benchmarks (ARC in two splits) ----------------------------------------------------

_LETTER_ANSWER = "Answer with the letter of the correct option only."

BENCHMARKS: dict[str, BenchmarkSpec] = {
    spec.name: spec
    for spec in [
        BenchmarkSpec(
            name="arc_easy", title="ARC-Easy", data_file="arc_easy.jsonl",
            hub_path="allenai/ai2_arc", hub_name="ARC-Easy", hub_split="test",
            system_prompt=f"You are an expert in science. {_LETTER_ANSWER}",
            parse=parse_arc, harness=question_answer_format,
        ),
        BenchmarkSpec(
            name="arc_challenge", title="ARC-Challenge", data_file="arc_challenge.jsonl",
            hub_path="allenai/ai2_arc", hub_name="ARC-Challenge", hub_split="test",
            system_prompt=f"You are an expert in science. {_LETTER_ANSWER}",
            parse=parse_arc, harness=question_answer_format,
        ),
        BenchmarkSpec(
            name="gsm8k", title="GSM8K", data_file="gsm8k.jsonl",
            hub_path="openai/gsm8k", hub_name="main", hub_split="test",
            system_prompt=(
                "You are a careful math tutor. Solve the problem step by step, then give the final "
                "answer on its own line as '#### <number>'."
            ),
            parse=parse_gsm8k, modes=("generate",),
        ),
        BenchmarkSpec(
            name="hellaswag", title="HellaSwag", data_file="hellaswag.jsonl",
            hub_path="Rowan/hellaswag", hub_name=None, hub_split="validation",
            system_prompt=f"Choose the most plausible continuation of the text. {_LETTER_ANSWER}",
            parse=parse_hellaswag, harness=hellaswag_format, choice_count=4,
        ),
        BenchmarkSpec(
            name="mmlu", title="MMLU", data_file="mmlu.jsonl",
            hub_path="cais/mmlu", hub_name="all", hub_split="test",
            system_prompt=f"You are an expert across academic subjects. {_LETTER_ANSWER}",
            parse=parse_mmlu, harness=mmlu_format, choice_count=4,
        ),
        BenchmarkSpec(
            name="truthfulqa", title="TruthfulQA-MC1", data_file="truthfulqa.jsonl",
            hub_path="truthfulqa/truthful_qa", hub_name="multiple_choice", hub_split="validation",
            system_prompt=f"Answer truthfully, avoiding common misconceptions. {_LETTER_ANSWER}",
            parse=parse_truthfulqa, harness=truthfulqa_format,
        ),
        BenchmarkSpec(
            name="winogrande", title="Winogrande", data_file="winogrande.jsonl",
            hub_path="allenai/winogrande", hub_name="winogrande_xl", hub_split="validation",
            system_prompt="Fill in the blank (_) in the sentence. Answer with the number of the correct option only.",
            parse=parse_winogrande, harness=winogrande_partial_format, numeric_labels=True, choice_count=2,
        ),
    ]
}


# --- prompt building ----------------------------------------------------------------------------


def build_user_prompt(spec: BenchmarkSpec, parsed: ParsedRow) -> str:
    if not spec.multiple_choice:
        return parsed.question
    labels = spec.labels(len(parsed.choices))
    options = "\n".join(f"{label}. {choice}" for label, choice in zip(labels, parsed.choices))
    return f"{parsed.question}\n\n{options}\n\nAnswer with {', '.join(labels[:-1])} or {labels[-1]}."


def content_hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def build_prompt(spec: BenchmarkSpec, row: Mapping[str, Any], source_row_id: str) -> dict[str, Any]:
    """One raw row to its prompt record; raises RowRejected with the reason."""
    parsed = spec.parse(row)
    if spec.multiple_choice:
        n = len(parsed.choices)
        expected = f"exactly {spec.choice_count}" if spec.choice_count else f"2 to {len(LETTERS)}"
        if (spec.choice_count and n != spec.choice_count) or not 2 <= n <= len(LETTERS):
            raise RowRejected(f"wrong number of choices: {n}, expected {expected}")
    labels = spec.labels(len(parsed.choices))
    real_answer = labels[parsed.answer_index] if spec.multiple_choice else parsed.answer_text
    requests = spec.harness(parsed) if spec.harness else []
    record = {
        "benchmark": spec.name,
        "source_row_id": source_row_id,
        "system_prompt": spec.system_prompt,
        "user_prompt": build_user_prompt(spec, parsed),
        "labels": labels,
        "choices": list(parsed.choices),
        "real_answer": real_answer,
        "harness_contexts": [context for context, _ in requests],
        "harness_continuations": [continuation for _, continuation in requests],
    }
    record["prompt_id"] = content_hash(record)
    return record


def preprocess_rows(
    spec: BenchmarkSpec, rows: Sequence[tuple[str, Mapping[str, Any]]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Prompts for the rows that parse and a rejection record (with reason) for each that does not."""
    prompts, rejected = [], []
    for source_row_id, row in rows:
        try:
            prompts.append(build_prompt(spec, row, source_row_id))
        except RowRejected as reason:
            rejected.append({"benchmark": spec.name, "source_row_id": source_row_id, "reason": str(reason)})
    return prompts, rejected
