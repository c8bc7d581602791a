"""A benchmark row in canonical form: what every spec's parser makes of its dataset's row."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


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
