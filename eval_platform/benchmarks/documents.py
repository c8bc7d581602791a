"""A dataset benchmark's rows as documents: what its harness task reads, and its chat prompt.

Each row that parses becomes one document: the row in its task's layout (`doc`) and the harness
task it belongs to (MMLU's `mmlu_{subject}` filled from the row), and the chat prompt the chat
solvers ask (system and user turns, labels, choices in display order, the real answer). A row that
does not parse is rejected with its reason; a few-shot row that does not is left out of the pool
and says why.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from eval_platform.benchmarks.declarations import Benchmark, ChatFormat
from eval_platform.benchmarks.parsers import LETTERS, ParsedRow, Parser, RowRejected, parser


@dataclass(frozen=True)
class Document:
    """One document of a dataset benchmark: its row in the task's layout and its chat prompt."""

    benchmark: str
    document_id: str  # a digest of the chat prompt and the task's row
    source_row_id: str
    task: str | None  # its harness task; None where the row lacks the field that names it (MMLU's subject)
    doc: Mapping[str, object]  # the row as its harness task reads it
    system_prompt: str
    user_prompt: str
    labels: tuple[str, ...]
    choices: tuple[str, ...]  # in the chat prompt's order
    real_answer: str

    def as_row(self) -> dict[str, object]:
        return {
            **asdict(self),
            "doc": json.dumps(self.doc, ensure_ascii=False),
            "labels": list(self.labels),
            "choices": list(self.choices),
        }


@dataclass(frozen=True)
class RowRejection:
    benchmark: str
    source_row_id: str | None
    reason: str


@dataclass(frozen=True)
class Documents:
    documents: list[Document]
    rejected: list[RowRejection]
    pool: list[tuple[str, Mapping[str, object]]]  # the few-shot rows that parse (id, row in the task's layout)


def content_hash(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def labels(chat: ChatFormat, n_choices: int) -> list[str]:
    if chat.labels == "numbers":
        return [str(i + 1) for i in range(n_choices)]
    return list(LETTERS[:n_choices])


def display_choices(parsed: ParsedRow) -> list[str]:
    """The choices in the chat prompt's order, stripped."""
    order = parsed.display_order or range(len(parsed.choices))
    return [parsed.choices[i].strip() for i in order]


def user_prompt(chat: ChatFormat, parsed: ParsedRow, multiple_choice: bool) -> str:
    if not multiple_choice:
        return parsed.question.strip()
    shown = labels(chat, len(parsed.choices))
    options = "\n".join(f"{label}. {choice}" for label, choice in zip(shown, display_choices(parsed), strict=True))
    return f"{parsed.question.strip()}\n\n{options}\n\nAnswer with {', '.join(shown[:-1])} or {shown[-1]}."


def parse_row(benchmark: Benchmark, rules: Parser, row: Mapping[str, object]) -> ParsedRow:
    """The benchmark's parser, plus its rules on the number of choices; raises RowRejected."""
    parsed = rules.parse(row)
    if rules.multiple_choice:
        n, expected = len(parsed.choices), benchmark.chat.choice_count if benchmark.chat else None
        if (expected and n != expected) or not 2 <= n <= len(LETTERS):
            raise RowRejected(f"wrong number of choices: {n}, expected {expected or f'2 to {len(LETTERS)}'}")
    return parsed


def task_of(template: str, row: Mapping[str, object]) -> str | None:
    """The harness task a row belongs to: `template` with the row's fields filled in ({subject});
    None where the row lacks one."""
    fields = re.findall(r"{(\w+)}", template)
    if any(not str(row.get(name) or "").strip() for name in fields):
        return None
    return template.format_map(row)


def document(benchmark: Benchmark, rules: Parser, source_row_id: str, row: Mapping[str, object]) -> Document:
    """One raw row as a document; raises RowRejected."""
    parsed = parse_row(benchmark, rules, row)
    chat = benchmark.chat or ChatFormat()
    shown = labels(chat, len(parsed.choices))
    if rules.multiple_choice:
        order = list(parsed.display_order or range(len(parsed.choices)))
        true = parsed.true_indices or ((parsed.answer_index,) if parsed.answer_index is not None else ())
        real_answer = ",".join(shown[order.index(i)] for i in true)
    else:
        real_answer = parsed.answer_text or ""
    doc = rules.task_row(row)
    prompt = {
        "benchmark": benchmark.name,
        "source_row_id": source_row_id,
        "system_prompt": chat.system_prompt,
        "user_prompt": user_prompt(chat, parsed, rules.multiple_choice),
        "labels": shown,
        "choices": display_choices(parsed),
        "real_answer": real_answer,
    }
    return Document(
        document_id=content_hash(prompt),  # as version 9 named a prompt: its ids carry over
        task=task_of(benchmark.task, doc),
        doc=doc,
        **{**prompt, "labels": tuple(shown), "choices": tuple(prompt["choices"])},
    )


def build_documents(
    benchmark: Benchmark,
    rows: Sequence[tuple[str, Mapping[str, object]]],
    fewshot_rows: Sequence[tuple[str, Mapping[str, object]]] = (),
) -> Documents:
    """The documents of the rows that parse, a rejection (with its reason) for each row that does
    not, and the few-shot pool: the few-shot rows that parse, in the task's layout (one that does
    not is left out, and says why)."""
    rules = parser(benchmark.parser or "")
    documents, rejected = [], []
    for source_row_id, row in rows:
        try:
            documents.append(document(benchmark, rules, source_row_id, row))
        except RowRejected as reason:
            rejected.append(RowRejection(benchmark.name, source_row_id, str(reason)))
    pool, left_out = fewshot_pool(benchmark, fewshot_rows)
    return Documents(documents, rejected + left_out, pool)


def fewshot_pool(
    benchmark: Benchmark, rows: Sequence[tuple[str, Mapping[str, object]]]
) -> tuple[list[tuple[str, Mapping[str, object]]], list[RowRejection]]:
    """The few-shot rows that parse, in the task's layout, and why each other one is left out."""
    rules = parser(benchmark.parser or "")
    pool, left_out = [], []
    for source_row_id, row in rows:
        try:
            parse_row(benchmark, rules, row)
            pool.append((source_row_id, rules.task_row(row)))
        except RowRejected as reason:
            left_out.append(
                RowRejection(benchmark.name, None, f"few-shot example {source_row_id} left out of the pool: {reason}")
            )
    return pool, left_out
