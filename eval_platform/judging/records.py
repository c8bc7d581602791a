"""The rows that cross the judging domain's layers: items with their human labels, verdicts (a
model's or one recorded elsewhere), MT-Bench's questions, answers and judge prompts.

Every label and verdict is in the item's own order: "a" is `answer_a` (LLMBar's `output_1`,
PandaLM's `response1`), whichever position the judge was shown it in. `order` says how the judge
saw the pair: "as_is" shows `answer_a` first, "swapped" shows `answer_b` first.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

Label = Literal["a", "b", "tie"]
VerdictLabel = Literal["a", "b", "tie", "unparsed"]
Order = Literal["as_is", "swapped"]
ORDERS: tuple[Order, Order] = ("as_is", "swapped")
# How a set counts ties (see `HumanSet.tie_policy`).
TiePolicy = Literal["tie_is_label", "tie_is_wrong", "tie_excluded"]
VerdictSource = Literal["recorded", "model"]
# Where a set comes from: the shipped files, a blind-evaluation sheet's raters, or two roster
# models' generations on a benchmark (no labels).
SetKind = Literal["shipped", "blind", "generations"]


class JudgingInputError(ValueError):
    """An input file or row that cannot be used; the message names the file and the row."""


@dataclass(frozen=True)
class PairwiseItem:
    """One instruction with two answers, and what humans said of them."""

    set_name: str
    item_id: str
    instruction: str  # everything the answers respond to (PandaLM: the instruction and its input)
    answer_a: str
    answer_b: str
    labels: tuple[Label, ...] = ()  # each human's label (PandaLM's three annotators, a blind sheet's raters)
    gold: Label | None = None  # the set's reference: the gold label, or the humans' majority (None: no majority)
    model_a: str | None = None  # the models that wrote the answers, where known
    model_b: str | None = None
    question_id: str | None = None  # MT-Bench's question id, where known
    category: str | None = None

    @property
    def longer(self) -> Label:
        """The longer answer, in characters ("tie" when equally long)."""
        a, b = len(self.answer_a), len(self.answer_b)
        return "a" if a > b else "b" if b > a else "tie"


@dataclass(frozen=True)
class HumanSet:
    """A human-labelled set and how it counts ties.

    - "tie_is_label": a tie is one of the labels (PandaLM's 0, a blind sheet's "Tie"); a judge is
      right when its verdict equals the label, ties included.
    - "tie_is_wrong": the labels never tie (LLMBar's gold); a judge's tie is a wrong verdict, as in
      LLMBar, whose prompts force a choice.
    - "tie_excluded": the labels never tie because tied items were removed (LLMBar's MT-Bench
      majority set); a judge's tie is left out, as MT-Bench's agreement "without tie" does.
    An unparsed verdict is always wrong (and counted apart)."""

    name: str
    description: str
    items: tuple[PairwiseItem, ...]
    tie_policy: TiePolicy
    source: str  # where the labels come from (a provenance line)
    kind: SetKind = "shipped"

    @cached_property
    def by_id(self) -> dict[str, PairwiseItem]:
        return {item.item_id: item for item in self.items}


@dataclass(frozen=True)
class JudgeVerdict:
    """One judge call on one pair in one order, from a model or recorded elsewhere."""

    judge: str
    set_name: str
    item_id: str
    order: Order
    verdict: VerdictLabel  # in the item's order: "a" means answer_a won, wherever it was shown
    raw: str  # the judge's text, as it came (a recorded verdict: the recorded field)
    model_a: str | None = None
    model_b: str | None = None
    turn: int = 1
    prompt: str | None = None  # the user prompt the judge was sent (None for a recorded verdict)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = None  # a failed call: verdict "unparsed", the error here
    source: VerdictSource = "model"
    # a sampled judge's: each sample's verdict in the item's order, `verdict` their majority
    sample_verdicts: tuple[VerdictLabel, ...] | None = None

    @property
    def decisive(self) -> bool:
        return self.verdict in ("a", "b")

    @property
    def self_consistency(self) -> float | None:
        """A sampled judge's share of samples that gave its (majority) verdict; None for one verdict."""
        if not self.sample_verdicts:
            return None
        return sum(v == self.verdict for v in self.sample_verdicts) / len(self.sample_verdicts)

    @property
    def first_won(self) -> bool | None:
        """Whether the answer shown first won (None for a tie or an unparsed verdict)."""
        if not self.decisive:
            return None
        return (self.verdict == "a") == (self.order == "as_is")


def shown_to_item_order(shown: Literal["A", "B", "tie", "error"], order: Order) -> VerdictLabel:
    """A verdict on the positions shown ("A": the first) in the item's own order."""
    if shown == "tie":
        return "tie"
    if shown == "error":
        return "unparsed"
    first, second = ("a", "b") if order == "as_is" else ("b", "a")
    return first if shown == "A" else second


@dataclass(frozen=True)
class GeneratedAnswer:
    """A roster model's generated answer to one document of a benchmark (its samples row)."""

    model: str  # the roster entry
    solver: str
    settings_key: str
    task: str
    doc_id: int
    prompt: str  # what the model was given
    text: str  # what it generated


@dataclass(frozen=True)
class MTBenchQuestion:
    question_id: int
    category: str
    turns: tuple[str, ...]
    reference: tuple[str, ...] | None = None  # GPT-4's reference answers (math, reasoning, coding)


@dataclass(frozen=True)
class ModelAnswer:
    model: str
    question_id: int
    turns: tuple[str, ...]


@dataclass(frozen=True)
class JudgePrompt:
    """One of MT-Bench's judge prompts (judge_prompts.jsonl), as FastChat uses it."""

    name: str
    type: Literal["pairwise", "single"]
    system_prompt: str
    prompt_template: str
    output_format: str  # "[[A]]", "[[rating]]" or "[[rating_a,rating_b]]"
    category: str
    description: str

    @property
    def multi_turn(self) -> bool:
        return self.name.endswith("-multi-turn")

    @property
    def needs_reference(self) -> bool:
        return "ref_answer_1" in self.prompt_template
