"""Benchmarks as small declarative specs, with row parsers that accept both circulating layouts.

A spec names its data, its chat prompt, how a raw row becomes a question with choices and an
answer (`parse`, keeping every text verbatim), the prediction modes it supports, its
lm-evaluation-harness task (`harness_task`, whose own code renders and scores the harness format:
harness_format.py), its headline metric and where its few-shot examples come from (`fewshot`).
Everything else (prompt building, prediction, scoring) is shared, so a new benchmark is one spec
here and one data slice in data/benchmarks/.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eval_platform.benchmarks.harness_format import harness_documents, harness_items
from eval_platform.benchmarks.rows import ParsedRow

LETTERS = string.ascii_uppercase


class RowRejected(ValueError):
    """A raw row that cannot be turned into a prompt; the message is the stored reason."""


@dataclass(frozen=True)
class AnswerFilter:
    """How a generated chat answer is taken out of the text, under the name of the metric it is
    scored as (the harness's filter names, e.g. `flexible-extract`)."""

    name: str
    extract: Callable[[str], str | None]


@dataclass(frozen=True)
class FewShotSource:
    """Where a benchmark's few-shot examples come from (its few-shot split) and how many the Open
    LLM Leaderboard (v1) used; the harness's task draws them (its sampler and seed)."""

    data_file: str | None  # under data/benchmarks/fewshot/; None: not shipped (hub only)
    hub_path: str
    hub_name: str | None
    hub_split: str
    shots: int


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
    harness_task: str  # its lm-evaluation-harness task, e.g. `arc_easy`; fields of the row fill `{subject}`
    harness_folder: str  # the task's folder under lm_eval/tasks (only it is indexed, not the harness's 14,000 YAMLs)
    headline_metric: str  # the leaderboard's number where no protocol names the benchmark
    modes: tuple[str, ...] = ("letter", "loglikelihood")  # prediction modes; the first is the default
    fewshot: FewShotSource | None = None
    chat_format: bool = True  # False: scored in lm-evaluation-harness's format only
    numeric_labels: bool = False
    choice_count: int | None = None  # None: any count from 2 to len(LETTERS)
    chat_filters: tuple[AnswerFilter, ...] = ()  # generation in the chat format: the answers scored
    harness_metric_names: Mapping[str, str] = field(default_factory=dict)  # the harness's metric -> ours
    # a row of another layout (the seed's) in the one the harness task reads; None: rows as given
    harness_layout: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
    headline_fewshot: bool = False  # the headline with the few-shot source's shots

    @property
    def multiple_choice(self) -> bool:
        return "generate" not in self.modes

    def labels(self, n_choices: int) -> list[str]:
        if self.numeric_labels:
            return [str(i + 1) for i in range(n_choices)]
        return list(LETTERS[:n_choices])

    def shot_counts(self) -> tuple[int, ...]:
        """The numbers of shots prompts are built for: zero and the few-shot source's."""
        return (0, self.fewshot.shots) if self.fewshot else (0,)


# --- field access -------------------------------------------------------------------------


def _text(row: Mapping[str, Any], *names: str) -> str:
    """The first of `names` present in the row as non-blank text, verbatim."""
    for name in names:
        value = row.get(name)
        if value is not None and str(value).strip():
            return str(value)
    raise RowRejected(f"missing field {' or '.join(repr(n) for n in names)}")


def _choice_list(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise RowRejected(f"field {name!r} is not a list of choices")
    choices = tuple("" if c is None else str(c) for c in value)
    if any(not c.strip() for c in choices):
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


def _targets(row: Mapping[str, Any], name: str) -> tuple[tuple[str, ...], list[int]]:
    """TruthfulQA's `mc1_targets` / `mc2_targets`: choices and their 0/1 labels."""
    targets = row.get(name)
    if not isinstance(targets, Mapping):
        raise RowRejected(f"field {name!r} is not a mapping of choices and labels")
    choices = _choice_list(targets.get("choices"), f"{name}.choices")
    flags = list(targets.get("labels") or [])
    if len(flags) != len(choices) or any(flag not in (0, 1) for flag in flags) or 1 not in flags:
        raise RowRejected(f"{name}.labels must give 0 or 1 for each choice, at least one 1")
    return choices, flags


# --- parsers, one per benchmark ---------------------------------------------------------------


def parse_arc(row: Mapping[str, Any]) -> ParsedRow:
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


GSM8K_CHAT_FILTERS = (
    AnswerFilter("strict-match", lambda text: extract_numbers(text)[0]),
    AnswerFilter("flexible-extract", lambda text: extract_numbers(text)[1]),
)


def parse_gsm8k(row: Mapping[str, Any]) -> ParsedRow:
    answer = _text(row, "answer")
    number = gsm8k_final_number(answer)
    if number is None:
        raise RowRejected("field 'answer' has no final '#### <number>'")
    return ParsedRow(_text(row, "question"), answer_text=number, extras={"answer": answer})


def parse_gsm8k_cot(row: Mapping[str, Any]) -> ParsedRow:
    """A GSM8K test row, or one of the chain-of-thought exemplars (`question` and a worked `target`)."""
    if "answer" in row or "target" not in row:
        return parse_gsm8k(row)
    return ParsedRow(_text(row, "question"), extras={"target": _text(row, "target")})


def parse_hellaswag(row: Mapping[str, Any]) -> ParsedRow:
    endings = _choice_list(row.get("endings"), "endings")
    ctx_a, ctx_b = str(row.get("ctx_a") or ""), str(row.get("ctx_b") or "")
    context = str(row.get("ctx") or "").strip() or f"{ctx_a.strip()} {ctx_b.strip()}".strip()
    if not context:
        raise RowRejected("missing field 'ctx' (or 'ctx_a')")
    extras = {"activity_label": str(row.get("activity_label") or ""), "ctx_a": ctx_a or context, "ctx_b": ctx_b}
    return ParsedRow(context, endings, _index(row.get("label"), len(endings), "label"), extras=extras)


def parse_mmlu(row: Mapping[str, Any]) -> ParsedRow:
    name = "options" if row.get("options") is not None else "choices"
    choices = _choice_list(row.get(name), name)
    answer = _index(row.get("answer"), len(choices), "answer", letters=True)
    return ParsedRow(_text(row, "question"), choices, answer, extras={"subject": str(row.get("subject") or "")})


def mmlu_harness_layout(row: Mapping[str, Any]) -> Mapping[str, Any]:
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


def parse_truthfulqa(row: Mapping[str, Any]) -> ParsedRow:
    question = _text(row, "question")
    if row.get("mc1_targets") is None:
        choices = _choice_list(row.get("choices"), "choices")
        return ParsedRow(question, choices, _index(row.get("label"), len(choices), "label"))
    choices, flags = _targets(row, "mc1_targets")
    if sum(flags) != 1:
        raise RowRejected("mc1_targets.labels must mark exactly one of the choices with 1")
    return ParsedRow(question, choices, flags.index(1), display_order=_shuffled(question, len(choices)))


def truthfulqa_harness_layout(row: Mapping[str, Any]) -> Mapping[str, Any]:
    """The seed's TruthfulQA layout (`choices`, a `label` index) as the harness's `truthfulqa_mc1`
    reads the Hugging Face one: `mc1_targets`, the true answer first."""
    if row.get("mc1_targets") is not None:
        return row
    parsed = parse_truthfulqa(row)
    order = [parsed.answer_index, *(i for i in range(len(parsed.choices)) if i != parsed.answer_index)]
    return {
        "question": parsed.question,
        "mc1_targets": {"choices": [parsed.choices[i] for i in order], "labels": [1] + [0] * (len(order) - 1)},
    }


def parse_truthfulqa_mc2(row: Mapping[str, Any]) -> ParsedRow:
    question = _text(row, "question")
    choices, flags = _targets(row, "mc2_targets")
    true = tuple(i for i, flag in enumerate(flags) if flag == 1)
    return ParsedRow(question, choices, true[0], true_indices=true, display_order=_shuffled(question, len(choices)))


def parse_winogrande(row: Mapping[str, Any]) -> ParsedRow:
    sentence = _text(row, "sentence")
    if sentence.count("_") != 1:
        raise RowRejected("field 'sentence' must contain exactly one blank '_'")
    choices = (_text(row, "option1"), _text(row, "option2"))
    return ParsedRow(sentence, choices, _index(row.get("answer"), 2, "answer", one_based=True))


# --- the six benchmarks (ARC in two splits, TruthfulQA scored two ways) ---------------------------

_LETTER_ANSWER = "Answer with the letter of the correct option only."
_TRUTHFUL = f"Answer truthfully, avoiding common misconceptions. {_LETTER_ANSWER}"


def _arc(name: str, title: str, hub_name: str) -> BenchmarkSpec:
    return BenchmarkSpec(
        name=name,
        title=title,
        data_file=f"{name}.jsonl",
        hub_path="allenai/ai2_arc",
        hub_name=hub_name,
        hub_split="test",
        system_prompt=f"You are an expert in science. {_LETTER_ANSWER}",
        parse=parse_arc,
        harness_task=name,
        harness_folder="arc",
        headline_metric="acc_norm",
        fewshot=FewShotSource(f"{name}_train.jsonl", "allenai/ai2_arc", hub_name, "train", shots=25),
    )


BENCHMARKS: dict[str, BenchmarkSpec] = {
    spec.name: spec
    for spec in [
        _arc("arc_easy", "ARC-Easy", "ARC-Easy"),
        _arc("arc_challenge", "ARC-Challenge", "ARC-Challenge"),
        BenchmarkSpec(
            name="gsm8k",
            title="GSM8K",
            data_file="gsm8k.jsonl",
            hub_path="openai/gsm8k",
            hub_name="main",
            hub_split="test",
            system_prompt=(
                "You are a careful math tutor. Solve the problem step by step, then give the final "
                "answer on its own line as '#### <number>'."
            ),
            parse=parse_gsm8k,
            harness_task="gsm8k",
            harness_folder="gsm8k",
            headline_metric="strict-match",
            modes=("generate",),
            chat_filters=GSM8K_CHAT_FILTERS,
            fewshot=FewShotSource("gsm8k_train.jsonl", "openai/gsm8k", "main", "train", shots=5),
        ),
        BenchmarkSpec(
            name="gsm8k_cot",
            title="GSM8K (chain of thought)",
            data_file="gsm8k.jsonl",
            hub_path="openai/gsm8k",
            hub_name="main",
            hub_split="test",
            system_prompt="",
            parse=parse_gsm8k_cot,
            harness_task="gsm8k_cot",
            harness_folder="gsm8k",
            headline_metric="strict-match",
            modes=("generate",),
            chat_format=False,
            headline_fewshot=True,
            # the harness's eight fixed exemplars (Wei et al., 2022), from its gsm8k-cot.yaml
            fewshot=FewShotSource(
                "gsm8k_cot_exemplars.jsonl",
                "lm-evaluation-harness tasks/gsm8k/gsm8k-cot.yaml",
                None,
                "fewshot_config.samples",
                shots=8,
            ),
        ),
        BenchmarkSpec(
            name="hellaswag",
            title="HellaSwag",
            data_file="hellaswag.jsonl",
            hub_path="Rowan/hellaswag",
            hub_name=None,
            hub_split="validation",
            system_prompt=f"Choose the most plausible continuation of the text. {_LETTER_ANSWER}",
            parse=parse_hellaswag,
            harness_task="hellaswag",
            harness_folder="hellaswag",
            headline_metric="acc_norm",
            choice_count=4,
            # HellaSwag's train split is not shipped (not available offline): load it by hub id.
            fewshot=FewShotSource(None, "Rowan/hellaswag", None, "train", shots=10),
        ),
        BenchmarkSpec(
            name="mmlu",
            title="MMLU",
            data_file="mmlu.jsonl",
            hub_path="cais/mmlu",
            hub_name="all",
            hub_split="test",
            system_prompt=f"You are an expert across academic subjects. {_LETTER_ANSWER}",
            parse=parse_mmlu,
            harness_task="mmlu_{subject}",
            harness_folder="mmlu/default",
            headline_metric="acc",
            choice_count=4,
            harness_layout=mmlu_harness_layout,
            fewshot=FewShotSource("mmlu_dev.jsonl", "cais/mmlu", "all", "dev", shots=5),
        ),
        BenchmarkSpec(
            name="truthfulqa",
            title="TruthfulQA-MC1",
            data_file="truthfulqa.jsonl",
            hub_path="truthfulqa/truthful_qa",
            hub_name="multiple_choice",
            hub_split="validation",
            system_prompt=_TRUTHFUL,
            parse=parse_truthfulqa,
            harness_task="truthfulqa_mc1",
            harness_folder="truthfulqa",
            headline_metric="acc",
            harness_layout=truthfulqa_harness_layout,
        ),
        BenchmarkSpec(
            name="truthfulqa_mc2",
            title="TruthfulQA-MC2",
            data_file="truthfulqa.jsonl",
            hub_path="truthfulqa/truthful_qa",
            hub_name="multiple_choice",
            hub_split="validation",
            system_prompt=_TRUTHFUL,
            parse=parse_truthfulqa_mc2,
            harness_task="truthfulqa_mc2",
            harness_folder="truthfulqa",
            headline_metric="mc2",
            harness_metric_names={"acc": "mc2"},
            modes=("loglikelihood",),
            chat_format=False,
        ),
        BenchmarkSpec(
            name="winogrande",
            title="Winogrande",
            data_file="winogrande.jsonl",
            hub_path="allenai/winogrande",
            hub_name="winogrande_xl",
            hub_split="validation",
            system_prompt="Fill in the blank (_) in the sentence. Answer with the number of the correct option only.",
            parse=parse_winogrande,
            harness_task="winogrande",
            harness_folder="winogrande",
            headline_metric="acc",
            numeric_labels=True,
            choice_count=2,
            fewshot=FewShotSource("winogrande_train.jsonl", "allenai/winogrande", "winogrande_xl", "train", shots=5),
        ),
    ]
}


# --- prompt building ----------------------------------------------------------------------------


def display_choices(parsed: ParsedRow) -> list[str]:
    """The choices in the chat prompt's order, stripped."""
    order = parsed.display_order or range(len(parsed.choices))
    return [parsed.choices[i].strip() for i in order]


def build_user_prompt(spec: BenchmarkSpec, parsed: ParsedRow) -> str:
    if not spec.multiple_choice:
        return parsed.question.strip()
    labels = spec.labels(len(parsed.choices))
    options = "\n".join(f"{label}. {choice}" for label, choice in zip(labels, display_choices(parsed), strict=False))
    return f"{parsed.question.strip()}\n\n{options}\n\nAnswer with {', '.join(labels[:-1])} or {labels[-1]}."


def content_hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def parse_row(spec: BenchmarkSpec, row: Mapping[str, Any]) -> ParsedRow:
    """The spec's parser, plus its rules on the number of choices; raises RowRejected."""
    parsed = spec.parse(row)
    if spec.multiple_choice:
        n = len(parsed.choices)
        expected = f"exactly {spec.choice_count}" if spec.choice_count else f"2 to {len(LETTERS)}"
        if (spec.choice_count and n != spec.choice_count) or not 2 <= n <= len(LETTERS):
            raise RowRejected(f"wrong number of choices: {n}, expected {expected}")
    return parsed


def chat_prompt(spec: BenchmarkSpec, parsed: ParsedRow, source_row_id: str) -> dict[str, Any]:
    """The prompt record of a parsed row: system and user prompt, labels, choices (in display
    order) and the real answer."""
    labels = spec.labels(len(parsed.choices))
    if spec.multiple_choice:
        order = list(parsed.display_order or range(len(parsed.choices)))
        real_answer = ",".join(labels[order.index(i)] for i in (parsed.true_indices or (parsed.answer_index,)))
    else:
        real_answer = parsed.answer_text
    record = {
        "benchmark": spec.name,
        "source_row_id": source_row_id,
        "system_prompt": spec.system_prompt,
        "user_prompt": build_user_prompt(spec, parsed),
        "labels": labels,
        "choices": display_choices(parsed),
        "real_answer": real_answer,
    }
    record["prompt_id"] = content_hash(record)
    return record


def build_prompt(spec: BenchmarkSpec, row: Mapping[str, Any], source_row_id: str) -> dict[str, Any]:
    """One raw row to its chat prompt record; raises RowRejected."""
    return chat_prompt(spec, parse_row(spec, row), source_row_id)


@dataclass(frozen=True)
class PreparedRows:
    prompts: list[dict[str, Any]]  # chat prompt records
    requests: list[dict[str, Any]]  # one per prompt and number of shots: prompt_id, num_fewshot, item
    rejected: list[dict[str, Any]]  # benchmark, source_row_id, reason
    unavailable_shots: dict[int, str]  # number of shots -> why no prompt has it

    def with_requests(self, shots: int) -> list[dict[str, Any]]:
        """The prompt records that have a `shots`-shot request, with its fields (as stored)."""
        items = {r["prompt_id"]: r["item"] for r in self.requests if r["num_fewshot"] == shots}
        return [{**p, **items[p["prompt_id"]].fields()} for p in self.prompts if p["prompt_id"] in items]


def preprocess_rows(
    spec: BenchmarkSpec,
    rows: Sequence[tuple[str, Mapping[str, Any]]],
    fewshot_rows: Sequence[tuple[str, Mapping[str, Any]]] = (),
) -> PreparedRows:
    """Prompt records for the rows that parse, a rejection (with its reason) for each row that does
    not, and the harness's requests for the rows that parse (in order) at every number of shots the
    spec declares, its examples drawn from the few-shot rows that parse (one that does not is left
    out of the pool, and says why). Shots the harness cannot build say why in `unavailable_shots`."""
    prompts, docs, rejected = [], [], []
    for source_row_id, row in rows:
        try:
            prompt = chat_prompt(spec, parse_row(spec, row), source_row_id)
        except RowRejected as reason:
            rejected.append({"benchmark": spec.name, "source_row_id": source_row_id, "reason": str(reason)})
            continue
        prompts.append(prompt)
        docs.append((prompt["prompt_id"], row))
    pool = []
    for source_row_id, row in fewshot_rows:
        try:
            parse_row(spec, row)
            pool.append((source_row_id, row))
        except RowRejected as reason:
            rejected.append(
                {
                    "benchmark": spec.name,
                    "source_row_id": None,
                    "reason": f"few-shot example {source_row_id} left out of the pool: {reason}",
                }
            )
    requests, unavailable = [], {}
    for shots in spec.shot_counts() if docs else ():
        if shots and not pool:
            unavailable[shots] = (
                f"no few-shot examples: load {spec.name}'s few-shot split "
                f"({spec.fewshot.hub_path} {spec.fewshot.hub_split})"
            )
            continue
        try:
            items = harness_items(harness_documents(spec, docs, pool, shots))
        except Exception as error:  # the harness's own, e.g. a row in a layout its task cannot read
            unavailable[shots] = f"{spec.harness_task} could not build the requests: {type(error).__name__}: {error}"
            continue
        requests += [{"prompt_id": key, "num_fewshot": shots, "item": items[key]} for key, _ in docs]
    return PreparedRows(prompts, requests, rejected, unavailable)
