"""lm-evaluation-harness's prompt protocol, reproduced text for text (version 0.4.13).

A `HarnessTask` is one task config of the harness over a parsed row: `doc_to_text`,
`doc_to_choice`, `doc_to_target`, its description and delimiters. A few-shot context is the
description, then each example as question + target delimiter + answer + few-shot delimiter, then
the question; each choice is scored as log P(target delimiter + choice | context), or, for a
multiple-input task (Winogrande), each choice is its own context continued by the target.

Few-shot examples come from a pool (the task's few-shot split) through a sampler: the harness's
default sampler is one `random.Random(1234)` that draws `n` examples per evaluated document, in
document order, so document i gets the i-th draw; `first_n` takes the first `n` of the pool (MMLU:
of the document's subject).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

if TYPE_CHECKING:
    from eval_platform.benchmarks.rows import ParsedRow

FEWSHOT_SEED = 1234  # lm-evaluation-harness's default fewshot_random_seed


def no_description(doc: "ParsedRow") -> str:
    return ""


@dataclass(frozen=True)
class AnswerFilter:
    """One entry of a task's `filter_list`: its name (the harness's, e.g. `flexible-extract`), also
    the name of the metric it is scored under, and how it takes the answer out of a generated text."""

    name: str
    extract: Callable[[str], str | None]


@dataclass(frozen=True)
class HarnessTask:
    """One lm-evaluation-harness task config over a parsed row ("doc")."""

    doc_to_text: Callable[["ParsedRow"], str | int]  # an int: the gold choice of a multiple-input task
    doc_to_target: Callable[["ParsedRow"], str | int]  # an int: an index into the choices
    doc_to_choice: Callable[["ParsedRow"], list[str]] | None = None  # None: a generation task
    description: Callable[["ParsedRow"], str] = no_description
    multiple_input: bool = False  # the choices are contexts, all continued by the target
    gold: Callable[["ParsedRow"], tuple[int, ...]] | None = None  # every true choice (TruthfulQA mc2)
    metrics: tuple[str, ...] = ("acc",)  # multiple choice: its `metric_list`
    target_delimiter: str = " "
    fewshot_delimiter: str = "\n\n"
    stop: tuple[str, ...] = ()  # generation: cut the output at the first of these
    max_new_tokens: int = 256  # the harness's max_gen_toks
    filter_list: tuple[AnswerFilter, ...] = ()  # generation: the answers scored, one metric each
    answer_match: Callable[[str | None, str], bool] | None = None  # generation: an answer against the target


@dataclass(frozen=True)
class HarnessItem:
    """The requests of one document: `prefix` (description and few-shot examples) + each context,
    continued by each continuation. One context is shared by every continuation, or one
    continuation by every context (multiple input). A generation item has one context and no
    continuation; `target` is then the reference text."""

    prefix: str
    contexts: tuple[str, ...]
    continuations: tuple[str, ...]
    choice_texts: tuple[str, ...]
    gold: tuple[int, ...]
    target: str | None = None

    def requests(self) -> list[tuple[str, str]]:
        n = max(len(self.contexts), len(self.continuations))
        return [(self.prefix + self.contexts[i if len(self.contexts) > 1 else 0],
                 self.continuations[i if len(self.continuations) > 1 else 0]) for i in range(n)]

    @property
    def prompt(self) -> str:
        """The whole prompt of a generation item."""
        return self.prefix + self.contexts[0]


def example_text(task: HarnessTask, shot: "ParsedRow") -> str:
    """One few-shot example as the harness renders it in plain text."""
    question, answer = task.doc_to_text(shot), task.doc_to_target(shot)
    choices = task.doc_to_choice(shot) if task.doc_to_choice else None
    if task.multiple_input:
        question = choices[question]  # the context with the right option filled in
    elif isinstance(answer, int) and choices:
        answer = choices[answer]
    return f"{question}{task.target_delimiter}{answer}{task.fewshot_delimiter}"


def harness_item(task: HarnessTask, doc: "ParsedRow", shots: Sequence["ParsedRow"] = ()) -> HarnessItem:
    """The document's requests, with `shots` as few-shot examples in order."""
    prefix = task.description(doc) + "".join(example_text(task, shot) for shot in shots)
    question = task.doc_to_text(doc)
    if task.doc_to_choice is None:
        return HarnessItem(prefix, (str(question),), (), (), (), target=str(task.doc_to_target(doc)))
    choices = tuple(task.doc_to_choice(doc))
    if task.multiple_input:
        continuation = task.target_delimiter + str(task.doc_to_target(doc))
        return HarnessItem(prefix, choices, (continuation,), choices, (int(question),))
    gold = task.gold(doc) if task.gold else (int(task.doc_to_target(doc)),)
    return HarnessItem(prefix, (str(question),), tuple(task.target_delimiter + c for c in choices), choices, gold)


# --- few-shot samplers ---------------------------------------------------------------------------

class Sampler(Protocol):
    def select(self, pool: Sequence["ParsedRow"], docs: Sequence[tuple[int, "ParsedRow"]],
               n: int) -> list[list[int]]:
        """For each (position, doc), the indices into `pool` of its n examples, in order."""


@dataclass(frozen=True)
class RandomSampler:
    """The harness's default sampler: the document at position i gets the i-th `sample` of one
    seeded generator. Where a task has neither a few-shot split nor a test split (Winogrande,
    HellaSwag), the harness passes the evaluated document along (its `fewshot_cfg.split ==
    config.test_split` is `None == None`): the sampler then draws n + 1, drops that document if
    drawn, and keeps n (drawing again from the pool without it if fewer are left)."""

    seed: int = FEWSHOT_SEED
    excludes_evaluated_doc: bool = False

    def select(self, pool, docs, n):
        if n > len(pool):
            raise ValueError(f"{n} few-shot examples requested from a pool of {len(pool)}")
        at_position = dict(docs)
        rng, chosen = random.Random(self.seed), {}
        for position in range(max(at_position, default=-1) + 1):
            doc = at_position.get(position)  # None: a row that was rejected (the harness draws for it too)
            if not self.excludes_evaluated_doc:
                drawn = rng.sample(range(len(pool)), n)
            else:
                drawn = [i for i in rng.sample(range(len(pool)), n + 1) if doc is None or pool[i] != doc][:n]
                if len(drawn) < n:
                    drawn = rng.sample([i for i in range(len(pool)) if pool[i] != doc], n)
            chosen[position] = drawn
        return [chosen[position] for position, _ in docs]


@dataclass(frozen=True)
class FirstNSampler:
    """The harness's `first_n`: the first n examples, of the document's group where `group` names
    an extra field (MMLU: one harness task, and one dev split, per subject)."""

    group: str | None = None

    def select(self, pool, docs, n):
        groups: dict[str | None, list[int]] = {}
        for index, row in enumerate(pool):
            groups.setdefault(row.extras.get(self.group) if self.group else None, []).append(index)
        chosen = []
        for _, doc in docs:
            key = doc.extras.get(self.group) if self.group else None
            members = groups.get(key, [])
            if len(members) < n:
                raise ValueError(f"only {len(members)} few-shot examples for {self.group or 'the task'} {key!r}, "
                                 f"{n} requested")
            chosen.append(members[:n])
        return chosen


@dataclass(frozen=True)
class FewShotSource:
    """Where a benchmark's few-shot examples come from (its few-shot split), how they are drawn, and
    how many: the number of shots of the Open LLM Leaderboard (v1)."""

    data_file: str | None  # under data/benchmarks/fewshot/; None: not shipped (hub only)
    hub_path: str
    hub_name: str | None
    hub_split: str
    sampler: Sampler
    shots: int


# --- GSM8K's filters and exact match ----------------------------------------------------------------

GSM8K_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
GSM8K_COT_STRICT = re.compile(r"The answer is (\-?[0-9\.\,]+).")
GSM8K_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
GSM8K_IGNORE = (",", r"\$", r"(?s).*#### ", r"\.$")
INVALID = "[invalid]"


def regex_filter(pattern: re.Pattern, text: str, group_select: int = 0) -> str:
    """The harness's RegexFilter: the selected match (the non-empty group of a multi-group
    pattern), stripped, or "[invalid]"."""
    matches = pattern.findall(text)
    if not matches:
        return INVALID
    match = matches[group_select]
    if isinstance(match, tuple):
        match = next((m for m in match if m), INVALID)
    return match.strip()


GSM8K_FILTERS = (AnswerFilter("strict-match", lambda text: regex_filter(GSM8K_STRICT, text)),
                 AnswerFilter("flexible-extract", lambda text: regex_filter(GSM8K_FLEXIBLE, text, -1)))


GSM8K_COT_FILTERS = (AnswerFilter("strict-match", lambda text: regex_filter(GSM8K_COT_STRICT, text)),
                     AnswerFilter("flexible-extract", lambda text: regex_filter(GSM8K_FLEXIBLE, text, -1)))


def gsm8k_extractions(text: str) -> tuple[str, str]:
    """(strict-match, flexible-extract) answers of the harness's gsm8k task."""
    strict, flexible = (answer_filter.extract(text) for answer_filter in GSM8K_FILTERS)
    return strict, flexible


def gsm8k_exact_match(prediction: str, reference: str) -> bool:
    """The harness's exact_match with gsm8k's regexes_to_ignore and ignore_case."""
    for pattern in GSM8K_IGNORE:
        prediction, reference = re.sub(pattern, "", prediction), re.sub(pattern, "", reference)
    return prediction.lower() == reference.lower()
