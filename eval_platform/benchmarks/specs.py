"""Benchmarks as small declarative specs, with row parsers that accept both circulating layouts.

A spec names its data, its chat prompt, how a raw row becomes a question with choices and an
answer (`parse`, keeping every text verbatim), the prediction modes it supports, its
lm-evaluation-harness task config (`harness`) and where its few-shot examples come from
(`fewshot`). Everything else (prompt building, prediction, scoring) is shared, so a new benchmark
is one spec here and one data slice in data/benchmarks/.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import string
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from eval_platform.benchmarks.harness import (
    GSM8K_COT_FILTERS, GSM8K_FILTERS, AnswerFilter, FewShotSource, FirstNSampler, HarnessTask, RandomSampler, gsm8k_exact_match,
    harness_item,
)
from eval_platform.benchmarks.rows import ParsedRow

LETTERS = string.ascii_uppercase


class RowRejected(ValueError):
    """A raw row that cannot be turned into a prompt; the message is the stored reason."""


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
    harness: HarnessTask
    modes: tuple[str, ...] = ("letter", "loglikelihood")  # prediction modes; the first is the default
    fewshot: FewShotSource | None = None
    chat_format: bool = True  # False: scored in lm-evaluation-harness's format only
    numeric_labels: bool = False
    choice_count: int | None = None  # None: any count from 2 to len(LETTERS)
    chat_filters: tuple[AnswerFilter, ...] = ()  # generation in the chat format: the answers scored
    # the leaderboard's number where no protocol names the benchmark: its metric (default: the
    # harness task's first metric, or first answer filter) and whether with the few-shot source's shots
    headline_metric: str | None = None
    headline_fewshot: bool = False

    def default_headline_metric(self) -> str:
        return self.headline_metric or (self.harness.metrics[0] if self.multiple_choice else self.harness.filter_list[0].name)

    def answer_filters(self, prompt_format: str) -> tuple[AnswerFilter, ...]:
        """A generative benchmark's answer filters in a prompt format (each one metric)."""
        return self.harness.filter_list if prompt_format == "harness" else self.chat_filters

    @property
    def multiple_choice(self) -> bool:
        return self.harness.doc_to_choice is not None

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


GSM8K_CHAT_FILTERS = (AnswerFilter("strict-match", lambda text: extract_numbers(text)[0]),
                      AnswerFilter("flexible-extract", lambda text: extract_numbers(text)[1]))


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


# --- lm-evaluation-harness 0.4.13 task configs ---------------------------------------------------


def _answer_index(doc: ParsedRow) -> int:
    return doc.answer_index


def _choices(doc: ParsedRow) -> list[str]:
    return list(doc.choices)


def _hellaswag_preprocess(text: str) -> str:
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def _hellaswag_query(doc: ParsedRow) -> str:
    ctx = doc.extras["ctx_a"] + " " + doc.extras["ctx_b"].capitalize()
    return _hellaswag_preprocess(doc.extras["activity_label"] + ": " + ctx)


def _mmlu_question(doc: ParsedRow) -> str:
    options = "".join(f"\n{LETTERS[i]}. {choice}" for i, choice in enumerate(doc.choices))
    return f"{doc.question.strip()}{options}\nAnswer:"


def _mmlu_description(doc: ParsedRow) -> str:
    subject = doc.extras.get("subject", "").replace("_", " ")
    return f"The following are multiple choice questions (with answers) about {subject}.\n\n" if subject else ""


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


def _truthfulqa_question(doc: ParsedRow) -> str:
    return f"{TRUTHFULQA_PREPROMPT}\n\nQ: {doc.question}\nA:"


def _winogrande_options(doc: ParsedRow) -> list[str]:
    blank = doc.question.index("_")
    return [doc.question[:blank] + option for option in doc.choices]


def _winogrande_rest(doc: ParsedRow) -> str:
    return doc.question[doc.question.index("_") + 1:].strip()


def _question_answer(doc: ParsedRow) -> str:
    return f"Question: {doc.question}\nAnswer:"


def _gsm8k_cot_target(doc: ParsedRow) -> str:
    """gsm8k-cot.yaml's doc_to_target: an exemplar's worked answer, a test row's final number."""
    return doc.extras.get("target") or doc.extras["answer"].split("####")[-1].strip()


ARC_TASK = HarnessTask(doc_to_text=_question_answer, doc_to_target=_answer_index, doc_to_choice=_choices,
                       metrics=("acc", "acc_norm"))
GSM8K_TASK = HarnessTask(doc_to_text=_question_answer, doc_to_target=lambda doc: doc.extras["answer"],
                         stop=("Question:", "</s>", "<|im_end|>"), filter_list=GSM8K_FILTERS,
                         answer_match=gsm8k_exact_match)
GSM8K_COT_TASK = HarnessTask(doc_to_text=lambda doc: f"Q: {doc.question}\nA:", doc_to_target=_gsm8k_cot_target,
                             stop=("Q:", "</s>", "<|im_end|>"), filter_list=GSM8K_COT_FILTERS,
                             answer_match=gsm8k_exact_match)
HELLASWAG_TASK = HarnessTask(doc_to_text=_hellaswag_query, doc_to_target=_answer_index,
                             doc_to_choice=lambda doc: [_hellaswag_preprocess(e) for e in doc.choices],
                             metrics=("acc", "acc_norm"))
MMLU_TASK = HarnessTask(doc_to_text=_mmlu_question, doc_to_target=_answer_index,
                        doc_to_choice=lambda doc: list(LETTERS[:len(doc.choices)]), description=_mmlu_description)
TRUTHFULQA_MC1_TASK = HarnessTask(doc_to_text=_truthfulqa_question, doc_to_target=_answer_index, doc_to_choice=_choices)
TRUTHFULQA_MC2_TASK = HarnessTask(doc_to_text=_truthfulqa_question, doc_to_target=_answer_index, doc_to_choice=_choices,
                                  gold=lambda doc: doc.true_indices, metrics=("mc2",))
WINOGRANDE_TASK = HarnessTask(doc_to_text=_answer_index, doc_to_target=_winogrande_rest,
                              doc_to_choice=_winogrande_options, multiple_input=True)


# --- the six benchmarks (ARC in two splits, TruthfulQA scored two ways) ---------------------------

_LETTER_ANSWER = "Answer with the letter of the correct option only."
_TRUTHFUL = f"Answer truthfully, avoiding common misconceptions. {_LETTER_ANSWER}"


def _arc(name: str, title: str, hub_name: str) -> "BenchmarkSpec":
    return BenchmarkSpec(
        name=name, title=title, data_file=f"{name}.jsonl", hub_path="allenai/ai2_arc", hub_name=hub_name,
        hub_split="test", system_prompt=f"You are an expert in science. {_LETTER_ANSWER}", parse=parse_arc,
        harness=ARC_TASK, headline_metric="acc_norm", fewshot=FewShotSource(f"{name}_train.jsonl", "allenai/ai2_arc", hub_name, "train",
                                                RandomSampler(), shots=25),
    )


BENCHMARKS: dict[str, BenchmarkSpec] = {
    spec.name: spec
    for spec in [
        _arc("arc_easy", "ARC-Easy", "ARC-Easy"),
        _arc("arc_challenge", "ARC-Challenge", "ARC-Challenge"),
        BenchmarkSpec(
            name="gsm8k", title="GSM8K", data_file="gsm8k.jsonl",
            hub_path="openai/gsm8k", hub_name="main", hub_split="test",
            system_prompt=(
                "You are a careful math tutor. Solve the problem step by step, then give the final "
                "answer on its own line as '#### <number>'."
            ),
            parse=parse_gsm8k, harness=GSM8K_TASK, modes=("generate",), chat_filters=GSM8K_CHAT_FILTERS,
            fewshot=FewShotSource("gsm8k_train.jsonl", "openai/gsm8k", "main", "train", RandomSampler(),
                                  shots=5),
        ),
        BenchmarkSpec(
            name="gsm8k_cot", title="GSM8K (chain of thought)", data_file="gsm8k.jsonl",
            hub_path="openai/gsm8k", hub_name="main", hub_split="test", system_prompt="",
            parse=parse_gsm8k_cot, harness=GSM8K_COT_TASK, modes=("generate",), chat_format=False, headline_fewshot=True,
            # the harness's eight fixed exemplars (Wei et al., 2022), from its gsm8k-cot.yaml
            fewshot=FewShotSource("gsm8k_cot_exemplars.jsonl", "lm-evaluation-harness tasks/gsm8k/gsm8k-cot.yaml",
                                  None, "fewshot_config.samples", FirstNSampler(), shots=8),
        ),
        BenchmarkSpec(
            name="hellaswag", title="HellaSwag", data_file="hellaswag.jsonl",
            hub_path="Rowan/hellaswag", hub_name=None, hub_split="validation",
            system_prompt=f"Choose the most plausible continuation of the text. {_LETTER_ANSWER}",
            parse=parse_hellaswag, harness=HELLASWAG_TASK, choice_count=4,
            # HellaSwag's train split is not shipped (not available offline): load it by hub id.
            fewshot=FewShotSource(None, "Rowan/hellaswag", None, "train", RandomSampler(excludes_evaluated_doc=True),
                                  shots=10),
        ),
        BenchmarkSpec(
            name="mmlu", title="MMLU", data_file="mmlu.jsonl",
            hub_path="cais/mmlu", hub_name="all", hub_split="test",
            system_prompt=f"You are an expert across academic subjects. {_LETTER_ANSWER}",
            parse=parse_mmlu, harness=MMLU_TASK, choice_count=4,
            fewshot=FewShotSource("mmlu_dev.jsonl", "cais/mmlu", "all", "dev", FirstNSampler("subject"),
                                  shots=5),
        ),
        BenchmarkSpec(
            name="truthfulqa", title="TruthfulQA-MC1", data_file="truthfulqa.jsonl",
            hub_path="truthfulqa/truthful_qa", hub_name="multiple_choice", hub_split="validation",
            system_prompt=_TRUTHFUL, parse=parse_truthfulqa, harness=TRUTHFULQA_MC1_TASK,
        ),
        BenchmarkSpec(
            name="truthfulqa_mc2", title="TruthfulQA-MC2", data_file="truthfulqa.jsonl",
            hub_path="truthfulqa/truthful_qa", hub_name="multiple_choice", hub_split="validation",
            system_prompt=_TRUTHFUL, parse=parse_truthfulqa_mc2, harness=TRUTHFULQA_MC2_TASK,
            modes=("loglikelihood",), chat_format=False,
        ),
        BenchmarkSpec(
            name="winogrande", title="Winogrande", data_file="winogrande.jsonl",
            hub_path="allenai/winogrande", hub_name="winogrande_xl", hub_split="validation",
            system_prompt="Fill in the blank (_) in the sentence. Answer with the number of the correct option only.",
            parse=parse_winogrande, harness=WINOGRANDE_TASK, numeric_labels=True, choice_count=2,
            fewshot=FewShotSource("winogrande_train.jsonl", "allenai/winogrande", "winogrande_xl", "train",
                                  RandomSampler(excludes_evaluated_doc=True), shots=5),
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
    options = "\n".join(f"{label}. {choice}" for label, choice in zip(labels, display_choices(parsed)))
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
    """One raw row to its (zero-shot) prompt record with its harness requests; raises RowRejected."""
    parsed = parse_row(spec, row)
    return {**chat_prompt(spec, parsed, source_row_id), "harness": harness_item(spec.harness, parsed)}


@dataclass(frozen=True)
class PreparedRows:
    prompts: list[dict[str, Any]]  # chat prompt records
    requests: list[dict[str, Any]]  # one per prompt and number of shots: prompt_id, num_fewshot, item, fewshot_ids
    rejected: list[dict[str, Any]]  # benchmark, source_row_id, reason
    unavailable_shots: dict[int, str]  # number of shots -> why no prompt has it


def preprocess_rows(
    spec: BenchmarkSpec, rows: Sequence[tuple[str, Mapping[str, Any]]],
    fewshot_rows: Sequence[tuple[str, Mapping[str, Any]]] = (), row_numbers: Sequence[int] | None = None,
) -> PreparedRows:
    """Prompt records for the rows that parse, their harness requests for every number of shots
    the spec declares (the row at position i of its source, `row_numbers[i]`, gets the sampler's
    i-th draw from `fewshot_rows`), and a rejection (with its reason) for each row that does not
    parse."""
    prompts, parsed_docs, rejected = [], [], []
    positions = row_numbers if row_numbers is not None else range(len(rows))
    for position, (source_row_id, row) in zip(positions, rows):
        try:
            parsed = parse_row(spec, row)
        except RowRejected as reason:
            rejected.append({"benchmark": spec.name, "source_row_id": source_row_id, "reason": str(reason)})
            continue
        prompts.append(chat_prompt(spec, parsed, source_row_id))
        parsed_docs.append((position, parsed))
    pool, unusable = [], {}
    for index, (source_row_id, row) in enumerate(fewshot_rows):
        try:
            pool.append(parse_row(spec, row))
        except RowRejected as reason:
            pool.append(None)
            unusable[index] = f"few-shot example {source_row_id} is unusable: {reason}"
    requests, unavailable = [], {}
    for shots in spec.shot_counts():
        if shots and not pool:
            unavailable[shots] = (f"no few-shot examples: load {spec.name}'s few-shot split "
                                  f"({spec.fewshot.hub_path} {spec.fewshot.hub_split})")
            continue
        draws = spec.fewshot.sampler.select(pool, parsed_docs, shots) if shots else [[] for _ in parsed_docs]
        for prompt, (_, parsed), drawn in zip(prompts, parsed_docs, draws):
            broken = [unusable[i] for i in drawn if i in unusable]
            if broken:
                rejected.append({"benchmark": spec.name, "source_row_id": prompt["source_row_id"],
                                 "reason": f"{shots}-shot prompt: {broken[0]}"})
                continue
            requests.append({"prompt_id": prompt["prompt_id"], "num_fewshot": shots,
                             "item": harness_item(spec.harness, parsed, [pool[i] for i in drawn]),
                             "fewshot_ids": [fewshot_rows[i][0] for i in drawn]})
    return PreparedRows(prompts, requests, rejected, unavailable)

