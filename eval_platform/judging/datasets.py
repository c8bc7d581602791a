"""The shipped judging data (`data/judging/`, provenance in its SOURCES.md) parsed into typed records:
the human-labelled sets (LLMBar's five, PandaLM's test set, LLMBar's MT-Bench human set, a blind
evaluation sheet's ratings), the verdicts recorded elsewhere (GPT-4's on LLMBar, GPT-3.5-turbo's and
PandaLM-7B's on PandaLM's test set), and MT-Bench's questions, reference answers, model answers and
judge prompts.

Every loader checks what it reads: a file that is missing or not JSON, a row without a field or with
a value out of its domain, a verdict for an item the set does not have, raises `JudgingInputError`
naming the file and the row (the line, for JSONL; the 0-based position, for a JSON list).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from dataclasses import fields as dataclass_fields
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from eval_platform.judging.records import (
    GeneratedAnswer,
    HumanSet,
    JudgePrompt,
    JudgeVerdict,
    JudgingInputError,
    Label,
    ModelAnswer,
    MTBenchQuestion,
    PairwiseItem,
    VerdictLabel,
)

T = TypeVar("T")  # what a field is checked to be

DATA_JUDGING = Path(__file__).resolve().parents[2] / "data" / "judging"

# Our set name -> LLMBar's folder.
LLMBAR_SETS = {
    "llmbar_natural": "Natural",
    "llmbar_neighbor": "Adversarial_Neighbor",
    "llmbar_gptinst": "Adversarial_GPTInst",
    "llmbar_gptout": "Adversarial_GPTOut",
    "llmbar_manual": "Adversarial_Manual",
}
PANDALM_SET = "pandalm_test"
MT_BENCH_HUMAN_SET = "mt_bench_human"
# The recorded judges, named apart from any model string ("recorded/...").
GPT4_LLMBAR_JUDGE = "recorded/llmbar/gpt-4-vanilla-rules"
GPT35_PANDALM_JUDGE = "recorded/pandalm/gpt-3.5-turbo"
PANDALM7B_JUDGE = "recorded/pandalm/pandalm-7b"
# The MT-Bench human experts' majority labels (LLMBar's 200 pairs) as a judge of the models they name.
HUMAN_EXPERTS_JUDGE = "recorded/mt_bench/human-experts-majority"
NEED_REFERENCE_CATEGORIES = ("math", "reasoning", "coding")  # FastChat's NEED_REF_CATS


# --- reading files ------------------------------------------------------------------------------


def read_json(path: Path) -> object:
    path = Path(path)
    if not path.is_file():
        raise JudgingInputError(f"{path}: file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise JudgingInputError(f"{path}: not JSON (line {error.lineno}, column {error.colno}: {error.msg})") from error
    except UnicodeDecodeError as error:
        raise JudgingInputError(f"{path}: not UTF-8 text ({error})") from error


def read_json_rows(path: Path) -> list[tuple[str, dict[str, object]]]:
    """A JSON list of objects, each with where it is ("row N", 0-based)."""
    data = read_json(path)
    if not isinstance(data, list):
        raise JudgingInputError(f"{path}: expected a JSON list of objects, got {type(data).__name__}")
    rows = []
    for position, row in enumerate(data):
        if not isinstance(row, dict):
            raise JudgingInputError(f"{path}: row {position}: expected an object, got {type(row).__name__}")
        rows.append((f"row {position}", row))
    return rows


def read_jsonl_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """A JSONL file's objects, each with where it is ("line N", 1-based); blank lines skipped."""
    path = Path(path)
    if not path.is_file():
        raise JudgingInputError(f"{path}: file not found")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise JudgingInputError(f"{path}: line {number}: not JSON ({error.msg})") from error
        if not isinstance(row, dict):
            raise JudgingInputError(f"{path}: line {number}: expected an object, got {type(row).__name__}")
        rows.append((f"line {number}", row))
    return rows


def field(path: Path, where: str, row: Mapping[str, object], name: str, kind: type[T] | tuple[type[T], ...]) -> T:
    """row[name], which must be of `kind` (bool is never an int here)."""
    if name not in row:
        raise JudgingInputError(f"{path}: {where}: missing field {name!r}")
    value = row[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        expected = " or ".join(k.__name__ for k in kinds)
        raise JudgingInputError(f"{path}: {where}: field {name!r} must be {expected}, got {value!r:.80}")
    return cast(T, value)  # one of `kinds`, checked above (a check pyright does not narrow by)


def text_field(path: Path, where: str, row: Mapping[str, object], name: str, allow_empty: bool = False) -> str:
    value = field(path, where, row, name, str)
    if not allow_empty and not value.strip():
        raise JudgingInputError(f"{path}: {where}: field {name!r} is empty")
    return value


def answer_field(path: Path, where: str, row: Mapping[str, object], name: str) -> str:
    """An answer's text; an answer stored as a JSON boolean or number (six of PandaLM's responses
    are the JSON value true: the model answered "True") is read as the text Python writes for it."""
    value = field(path, where, row, name, (str, bool, int, float))
    return value if isinstance(value, str) else str(value)


def majority(labels: Sequence[Label]) -> Label | None:
    """The label more than half the humans gave, or None."""
    if not labels:
        return None
    label, count = Counter(labels).most_common(1)[0]
    return label if count * 2 > len(labels) else None


# --- LLMBar -------------------------------------------------------------------------------------

LLMBAR_LABELS: dict[int, Label] = {1: "a", 2: "b"}


def load_llmbar_set(folder: Path, set_name: str) -> HumanSet:
    """An LLMBar set (`dataset.json`): input, output_1, output_2 and the gold label (1 or 2)."""
    path = Path(folder) / "dataset.json"
    items = []
    for position, (where, row) in enumerate(read_json_rows(path)):
        label = field(path, where, row, "label", int)
        if label not in LLMBAR_LABELS:
            raise JudgingInputError(f"{path}: {where}: label must be 1 or 2, got {label!r}")
        items.append(
            PairwiseItem(
                set_name=set_name,
                item_id=str(position),
                instruction=text_field(path, where, row, "input"),
                answer_a=text_field(path, where, row, "output_1", allow_empty=True),
                answer_b=text_field(path, where, row, "output_2", allow_empty=True),
                gold=LLMBAR_LABELS[label],
            )
        )
    return HumanSet(
        name=set_name,
        description=f"LLMBar {Path(folder).name}: instruction following, gold label by the authors",
        items=tuple(items),
        tie_policy="tie_is_wrong",
        source=f"princeton-nlp/LLMBar @900616bf : Dataset/LLMBar/{Path(folder).name}/dataset.json",
    )


LLMBAR_WINNERS: dict[str | None, VerdictLabel] = {"1": "a", "2": "b", None: "unparsed"}
LLMBAR_ORDERS = {"swap = False": "as_is", "swap = True": "swapped"}


def load_llmbar_verdicts(path: Path, human_set: HumanSet, judge: str = GPT4_LLMBAR_JUDGE) -> list[JudgeVerdict]:
    """LLMBar's recorded verdicts (`result.json`): each row the dataset's row with `results[-1]`
    holding the call in the dataset's order (`swap = False`) and the exchanged one (`swap = True`),
    each with its completion and its winner already mapped back to the dataset's order. The rows
    must be the dataset's, in its order (their input, outputs and label are checked)."""
    path = Path(path)
    rows = read_json_rows(path)
    if len(rows) != len(human_set.items):
        raise JudgingInputError(f"{path}: {len(rows)} rows, but {human_set.name} has {len(human_set.items)} items")
    verdicts = []
    for (where, row), item in zip(rows, human_set.items, strict=True):
        same = (
            row.get("input") == item.instruction
            and row.get("output_1") == item.answer_a
            and row.get("output_2") == item.answer_b
            and LLMBAR_LABELS.get(row.get("label")) == item.gold  # type: ignore[arg-type]
        )
        if not same:
            raise JudgingInputError(f"{path}: {where}: not the row {item.item_id} of {human_set.name}'s dataset")
        results = field(path, where, row, "results", list)
        if not results or not isinstance(results[-1], dict):
            raise JudgingInputError(f"{path}: {where}: 'results' holds no call")
        for key, order in LLMBAR_ORDERS.items():
            call = field(path, where, results[-1], key, dict)
            completion = field(path, where, call, "completion", list)
            winner = call.get("winner")
            if winner not in LLMBAR_WINNERS or not completion or not isinstance(completion[0], str):
                raise JudgingInputError(f"{path}: {where}: {key}: winner must be '1', '2' or null with a completion")
            verdicts.append(
                JudgeVerdict(
                    judge=judge,
                    set_name=human_set.name,
                    item_id=item.item_id,
                    order=order,  # type: ignore[arg-type]
                    verdict=LLMBAR_WINNERS[winner],
                    raw=completion[0],
                    source="recorded",
                )
            )
    return verdicts


# --- PandaLM ------------------------------------------------------------------------------------

PANDALM_LABELS: dict[int, Label] = {0: "tie", 1: "a", 2: "b"}


def load_pandalm_set(path: Path, set_name: str = PANDALM_SET) -> HumanSet:
    """PandaLM's test set: instruction and input, response1 and response2 (`cmp_key` names their
    models), and three annotators' labels (0 tie, 1, 2); the gold label is their majority."""
    path = Path(path)
    items, seen = [], set()
    for where, row in read_json_rows(path):
        idx = field(path, where, row, "idx", int)
        if idx in seen:
            raise JudgingInputError(f"{path}: {where}: idx {idx} repeated")
        seen.add(idx)
        labels = []
        for name in ("annotator1", "annotator2", "annotator3"):
            value = field(path, where, row, name, int)
            if value not in PANDALM_LABELS:
                raise JudgingInputError(f"{path}: {where}: {name} must be 0, 1 or 2, got {value!r}")
            labels.append(PANDALM_LABELS[value])
        cmp_key = text_field(path, where, row, "cmp_key")
        models = cmp_key.split("_")
        if len(models) != 2:
            raise JudgingInputError(f"{path}: {where}: cmp_key {cmp_key!r} is not '<model1>_<model2>'")
        instruction = text_field(path, where, row, "instruction", allow_empty=True)
        extra = text_field(path, where, row, "input", allow_empty=True)
        if not (instruction.strip() or extra.strip()):  # row 466 has only an input ("Truthfulness")
            raise JudgingInputError(f"{path}: {where}: neither an instruction nor an input")
        items.append(
            PairwiseItem(
                set_name=set_name,
                item_id=str(idx),
                instruction="\n\n".join(part for part in (instruction, extra) if part.strip()),
                answer_a=answer_field(path, where, row, "response1"),
                answer_b=answer_field(path, where, row, "response2"),
                labels=tuple(labels),
                gold=majority(labels),
                model_a=models[0],
                model_b=models[1],
                category=str(row.get("motivation_app") or "") or None,
            )
        )
    return HumanSet(
        name=set_name,
        description="PandaLM's test set: three annotators per item, ties allowed; gold is their majority",
        items=tuple(items),
        tie_policy="tie_is_label",
        source="WeOpenML/PandaLM @3871806e : data/testset-v1.json",
    )


GPT35_RESULTS: dict[str, VerdictLabel] = {"1": "a", "2": "b", "Tie": "tie", "garbage": "unparsed"}


def load_pandalm_verdicts(
    path: Path, human_set: HumanSet, judge: str, result_field: str, reason_field: str
) -> list[JudgeVerdict]:
    """A judge's verdicts recorded by PandaLM (`gpt_result`: "1", "2", "Tie" or "garbage";
    `pandalm_result`: 0, 1 or 2), one per test item by `idx`, shown in the set's order only."""
    path = Path(path)
    verdicts: dict[str, JudgeVerdict] = {}
    for where, row in read_json_rows(path):
        idx = str(field(path, where, row, "idx", int))
        if idx not in human_set.by_id:
            raise JudgingInputError(f"{path}: {where}: idx {idx} is not an item of {human_set.name}")
        if idx in verdicts:
            raise JudgingInputError(f"{path}: {where}: idx {idx} repeated")
        result = field(path, where, row, result_field, (str, int))
        verdict = GPT35_RESULTS.get(result) if isinstance(result, str) else PANDALM_LABELS.get(result)
        if verdict is None and isinstance(result, str) and result.strip().isdigit():
            verdict = PANDALM_LABELS.get(int(result))
        if verdict is None:
            raise JudgingInputError(f"{path}: {where}: {result_field} {result!r} is not a verdict")
        reason = row.get(reason_field) or ""
        verdicts[idx] = JudgeVerdict(
            judge=judge,
            set_name=human_set.name,
            item_id=idx,
            order="as_is",
            verdict=verdict,
            raw=f"{result}\n{reason}".strip(),
            model_a=human_set.by_id[idx].model_a,
            model_b=human_set.by_id[idx].model_b,
            source="recorded",
        )
    missing = [item.item_id for item in human_set.items if item.item_id not in verdicts]
    if missing:
        raise JudgingInputError(f"{path}: no verdict for idx {', '.join(missing[:10])}")
    return [verdicts[item.item_id] for item in human_set.items]


# --- MT-Bench -----------------------------------------------------------------------------------


def load_judge_prompts(path: Path) -> dict[str, JudgePrompt]:
    """MT-Bench's judge prompts by name."""
    path = Path(path)
    prompts = {}
    for where, row in read_jsonl_rows(path):
        kind = text_field(path, where, row, "type")
        if kind not in ("pairwise", "single"):
            raise JudgingInputError(f"{path}: {where}: type must be pairwise or single, got {kind!r}")
        output_format = text_field(path, where, row, "output_format")
        if output_format not in ("[[A]]", "[[rating]]", "[[rating_a,rating_b]]"):
            raise JudgingInputError(f"{path}: {where}: unknown output_format {output_format!r}")
        prompt = JudgePrompt(
            name=text_field(path, where, row, "name"),
            type=kind,  # type: ignore[arg-type]
            system_prompt=text_field(path, where, row, "system_prompt", allow_empty=True),
            prompt_template=text_field(path, where, row, "prompt_template"),
            output_format=output_format,
            category=str(row.get("category", "")),
            description=str(row.get("description", "")),
        )
        if prompt.name in prompts:
            raise JudgingInputError(f"{path}: {where}: prompt {prompt.name!r} repeated")
        prompts[prompt.name] = prompt
    return prompts


def _turns(path: Path, where: str, row: Mapping[str, object]) -> tuple[str, ...]:
    choices = field(path, where, row, "choices", list)
    if not choices or not isinstance(choices[0], dict):
        raise JudgingInputError(f"{path}: {where}: 'choices' holds no answer")
    turns = field(path, where, choices[0], "turns", list)
    if not turns or not all(isinstance(t, str) for t in turns):
        raise JudgingInputError(f"{path}: {where}: 'turns' must be a list of strings")
    return tuple(turns)


def load_mt_bench_references(path: Path) -> dict[int, tuple[str, ...]]:
    """GPT-4's reference answers by question id."""
    path = Path(path)
    return {
        field(path, where, row, "question_id", int): _turns(path, where, row) for where, row in read_jsonl_rows(path)
    }


def load_mt_bench_questions(
    path: Path, references: Mapping[int, tuple[str, ...]] | None = None
) -> list[MTBenchQuestion]:
    """MT-Bench's questions, each with its reference answers where `references` has them; a
    question of a category that needs one (math, reasoning, coding) must have one when references
    are given."""
    path = Path(path)
    questions, seen = [], set()
    for where, row in read_jsonl_rows(path):
        question_id = field(path, where, row, "question_id", int)
        if question_id in seen:
            raise JudgingInputError(f"{path}: {where}: question_id {question_id} repeated")
        seen.add(question_id)
        turns = field(path, where, row, "turns", list)
        if not turns or not all(isinstance(t, str) and t.strip() for t in turns):
            raise JudgingInputError(f"{path}: {where}: 'turns' must be non-empty strings")
        category = text_field(path, where, row, "category")
        reference = references.get(question_id) if references is not None else None
        if references is not None and category in NEED_REFERENCE_CATEGORIES and reference is None:
            raise JudgingInputError(f"{path}: {where}: question {question_id} ({category}) has no reference answer")
        questions.append(MTBenchQuestion(question_id, category, tuple(turns), reference))
    return questions


def load_model_answers(folder: Path, models: Iterable[str] | None = None) -> dict[str, dict[int, ModelAnswer]]:
    """`<model>.jsonl` answers in a folder: model -> question id -> its answer to every turn."""
    folder = Path(folder)
    paths = sorted(folder.glob("*.jsonl")) if models is None else [folder / f"{model}.jsonl" for model in models]
    if not paths:
        raise JudgingInputError(f"{folder}: no <model>.jsonl answer files")
    answers: dict[str, dict[int, ModelAnswer]] = {}
    for path in paths:
        model = path.stem
        by_question: dict[int, ModelAnswer] = {}
        for where, row in read_jsonl_rows(path):
            question_id = field(path, where, row, "question_id", int)
            if question_id in by_question:
                raise JudgingInputError(f"{path}: {where}: question_id {question_id} repeated")
            by_question[question_id] = ModelAnswer(model, question_id, _turns(path, where, row))
        answers[model] = by_question
    return answers


def load_mt_bench_human(
    path: Path,
    questions: Sequence[MTBenchQuestion] = (),
    answers: Mapping[str, Mapping[int, ModelAnswer]] | None = None,
    set_name: str = MT_BENCH_HUMAN_SET,
) -> HumanSet:
    """LLMBar's MT-Bench set: first-turn pairs labelled by the human experts' majority (ties
    removed). Where an answer is word for word a shipped model's first-turn answer to the question,
    the item names that model and the question."""
    path = Path(path)
    question_ids = {q.turns[0].strip(): q for q in questions}
    writers: dict[tuple[int, str], list[str]] = {}
    for model, by_question in (answers or {}).items():
        for answer in by_question.values():
            writers.setdefault((answer.question_id, answer.turns[0].strip()), []).append(model)
    items = []
    for position, (where, row) in enumerate(read_json_rows(path)):
        label = field(path, where, row, "label", int)
        if label not in LLMBAR_LABELS:
            raise JudgingInputError(f"{path}: {where}: label must be 1 or 2, got {label!r}")
        instruction = text_field(path, where, row, "input")
        answer_a = text_field(path, where, row, "output_1", allow_empty=True)
        answer_b = text_field(path, where, row, "output_2", allow_empty=True)
        question = question_ids.get(instruction.strip())

        def writer(text: str, question: MTBenchQuestion | None = question) -> str | None:
            found = writers.get((question.question_id, text.strip()), []) if question else []
            return found[0] if len(found) == 1 else None

        items.append(
            PairwiseItem(
                set_name=set_name,
                item_id=str(position),
                instruction=instruction,
                answer_a=answer_a,
                answer_b=answer_b,
                gold=LLMBAR_LABELS[label],
                model_a=writer(answer_a),
                model_b=writer(answer_b),
                question_id=str(question.question_id) if question else None,
                category=question.category if question else None,
            )
        )
    return HumanSet(
        name=set_name,
        description="MT-Bench first-turn pairs, the human experts' majority (ties removed), as LLMBar processed them",
        items=tuple(items),
        tie_policy="tie_excluded",
        source="princeton-nlp/LLMBar @900616bf : Dataset/Processed/MT-Bench/dataset.json",
    )


# --- blind evaluation sheets --------------------------------------------------------------------


@dataclass(frozen=True)
class BlindRating:
    """One rater's verdict on one question of a blind-evaluation sheet, unblinded (the asset reads
    it from the blind-evaluation store: the sheet's answers, its key and the rater's winner)."""

    sheet_id: str
    question_id: str
    question: str
    rater: str
    system_a: str
    system_b: str
    answer_a: str
    answer_b: str
    winner: Literal["A", "B", "Tie"]


BLIND_WINNERS: dict[str, Label] = {"A": "a", "B": "b", "Tie": "tie"}


def blind_human_set(ratings: Sequence[BlindRating], set_name: str) -> HumanSet:
    """A blind-evaluation sheet as a human-labelled set: each question's raters' winners are its
    labels (ties are labels), their majority its gold label."""
    by_question: dict[str, list[BlindRating]] = {}
    for rating in ratings:
        if rating.winner not in BLIND_WINNERS:
            raise JudgingInputError(
                f"{rating.sheet_id}: {rating.question_id}: {rating.rater}: winner {rating.winner!r}"
            )
        by_question.setdefault(rating.question_id, []).append(rating)
    items = []
    for question_id, group in sorted(by_question.items()):
        first = group[0]
        for other in group[1:]:
            if (other.answer_a, other.answer_b, other.system_a, other.system_b) != (
                first.answer_a,
                first.answer_b,
                first.system_a,
                first.system_b,
            ):
                raise JudgingInputError(f"{first.sheet_id}: {question_id}: raters saw different answers")
        labels: tuple[Label, ...] = tuple(BLIND_WINNERS[r.winner] for r in sorted(group, key=lambda r: r.rater))
        items.append(
            PairwiseItem(
                set_name=set_name,
                item_id=question_id,
                instruction=first.question,
                answer_a=first.answer_a,
                answer_b=first.answer_b,
                labels=labels,
                gold=majority(labels),
                model_a=first.system_a,
                model_b=first.system_b,
            )
        )
    sheets = sorted({r.sheet_id for r in ratings})
    return HumanSet(
        name=set_name,
        description="The platform's blind-evaluation sheet: each rater's winner is a label, ties allowed",
        items=tuple(items),
        tie_policy="tie_is_label",
        source=f"blind evaluation sheet(s) {', '.join(sheets)}",
        kind="blind",
    )


def blind_set_name(sheet_id: str) -> str:
    return f"blind|{sheet_id}"


# --- two roster models' generations -------------------------------------------------------------


def generated_text(responses: object) -> str | None:
    """The generated text of a sample's responses (the chat solver's `[text]`, the harness's
    `[[text]]`), or None where they hold none (answers by log-likelihood or letter)."""
    while isinstance(responses, list) and responses:
        responses = responses[0]
    return responses if isinstance(responses, str) else None


def generation_set_name(benchmark: str, model_a: str, model_b: str) -> str:
    return f"{benchmark}|{model_a}|{model_b}"


def parse_generation_pair(text: str) -> tuple[str, str, str]:
    """ "benchmark|model_a|model_b" (two roster entries' generations on a benchmark)."""
    parts = text.split("|")
    if len(parts) != 3 or not all(part.strip() for part in parts) or parts[1] == parts[2]:
        raise JudgingInputError(f"{text!r}: expected 'benchmark|model_a|model_b', two different roster models")
    return parts[0], parts[1], parts[2]


def generation_set(benchmark: str, model_a: str, model_b: str, answers: Sequence[GeneratedAnswer]) -> HumanSet:
    """Two roster models' generated answers to the same documents of a benchmark (the same solver
    and settings key) as a set to judge: no human labels, each item named by the two models."""
    by_model: dict[str, dict[tuple[str, str, str, int], GeneratedAnswer]] = {model_a: {}, model_b: {}}
    for answer in answers:
        if answer.model in by_model:
            by_model[answer.model][(answer.solver, answer.settings_key, answer.task, answer.doc_id)] = answer
    for model, found in by_model.items():
        if not found:
            raise JudgingInputError(f"{benchmark}: no generated answers of the roster model {model!r} (evaluate it)")
    common = sorted(set(by_model[model_a]) & set(by_model[model_b]))
    if not common:
        raise JudgingInputError(
            f"{benchmark}: {model_a!r} and {model_b!r} answered no document under the same solver and settings key"
        )
    name = generation_set_name(benchmark, model_a, model_b)
    items = []
    for key in common:
        first, second = by_model[model_a][key], by_model[model_b][key]
        if first.prompt != second.prompt:
            raise JudgingInputError(
                f"{benchmark}: {'/'.join(map(str, key))}: the two models were given different prompts"
            )
        items.append(
            PairwiseItem(
                set_name=name,
                item_id="/".join(map(str, key)),
                instruction=first.prompt,
                answer_a=first.text,
                answer_b=second.text,
                model_a=model_a,
                model_b=model_b,
            )
        )
    return HumanSet(
        name=name,
        description=f"{model_a} against {model_b}: their generated answers on {benchmark}, unlabelled",
        items=tuple(items),
        tie_policy="tie_is_label",
        source=f"the warehouse's samples of {benchmark}",
        kind="generations",
    )


def matching_sets(sets: Mapping[str, HumanSet], patterns: Sequence[str]) -> list[HumanSet]:
    """The sets whose names match any of the patterns (a name, or a pattern such as 'blind|*'), in
    the patterns' order; a name that is no stored set is an error naming the sets there are (a
    pattern may match none: no blind sheet tallied yet)."""
    chosen: dict[str, HumanSet] = {}
    for pattern in patterns:
        found = [name for name in sets if fnmatchcase(name, pattern)]
        if not found and not any(char in pattern for char in "*?["):
            raise JudgingInputError(f"no stored judging set {pattern!r} (stored: {', '.join(sorted(sets))})")
        chosen.update({name: sets[name] for name in found})
    return list(chosen.values())


# --- stored verdicts ---------------------------------------------------------------------------

VERDICT_FIELDS = {f.name for f in dataclass_fields(JudgeVerdict)}


def read_verdicts_jsonl(path: Path) -> list[JudgeVerdict]:
    """Verdicts written one JSON object per line with `JudgeVerdict`'s fields (`write_verdicts_jsonl`)."""
    path = Path(path)
    verdicts = []
    for where, row in read_jsonl_rows(path):
        unknown = set(row) - VERDICT_FIELDS
        if unknown:
            raise JudgingInputError(f"{path}: {where}: unknown field(s) {', '.join(sorted(unknown))}")
        for name in ("judge", "set_name", "item_id", "raw"):
            field(path, where, row, name, str)
        if row.get("order") not in ("as_is", "swapped"):
            raise JudgingInputError(f"{path}: {where}: order must be as_is or swapped, got {row.get('order')!r}")
        if row.get("verdict") not in ("a", "b", "tie", "unparsed"):
            raise JudgingInputError(
                f"{path}: {where}: verdict must be a, b, tie or unparsed, got {row.get('verdict')!r}"
            )
        samples = row.get("sample_verdicts")
        if samples is not None:
            if not isinstance(samples, list) or any(v not in ("a", "b", "tie", "unparsed") for v in samples):
                raise JudgingInputError(
                    f"{path}: {where}: sample_verdicts must be a list of a, b, tie or unparsed, got {samples!r}"
                )
            row = {**row, "sample_verdicts": tuple(samples)}
        try:
            verdicts.append(JudgeVerdict(**row))
        except TypeError as error:
            raise JudgingInputError(f"{path}: {where}: {error}") from error
    return verdicts


def write_verdicts_jsonl(verdicts: Iterable[JudgeVerdict], path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for verdict in verdicts:
            out.write(json.dumps(asdict(verdict), ensure_ascii=False) + "\n")
    return path


# --- the shipped data ---------------------------------------------------------------------------


def shipped_human_sets(root: Path = DATA_JUDGING) -> dict[str, HumanSet]:
    """Every human-labelled set shipped in `data/judging/`, by name."""
    root = Path(root)
    sets = {name: load_llmbar_set(root / "llmbar" / folder, name) for name, folder in LLMBAR_SETS.items()}
    sets[PANDALM_SET] = load_pandalm_set(root / "pandalm" / "testset-v1.json")
    sets[MT_BENCH_HUMAN_SET] = load_mt_bench_human(
        root / "llmbar" / "mt_bench_human" / "dataset.json",
        load_mt_bench_questions(root / "mt_bench" / "question.jsonl"),
        load_model_answers(root / "mt_bench" / "model_answer"),
    )
    return sets


def shipped_recorded_verdicts(sets: Mapping[str, HumanSet], root: Path = DATA_JUDGING) -> list[JudgeVerdict]:
    """Every verdict recorded elsewhere and shipped: GPT-4 (LLMBar's Vanilla*, both orders) on the
    five LLMBar sets, GPT-3.5-turbo and PandaLM-7B on PandaLM's test set (one order)."""
    root = Path(root)
    verdicts = []
    for name, folder in LLMBAR_SETS.items():
        verdicts += load_llmbar_verdicts(root / "llmbar" / folder / "gpt-4_vanilla_verdicts.json", sets[name])
    pandalm = sets[PANDALM_SET]
    verdicts += load_pandalm_verdicts(
        root / "pandalm" / "gpt-3.5-turbo-testset-v1.json", pandalm, GPT35_PANDALM_JUDGE, "gpt_result", "gpt_reason"
    )
    verdicts += load_pandalm_verdicts(
        root / "pandalm" / "pandalm-7b-testset-v1.json", pandalm, PANDALM7B_JUDGE, "pandalm_result", "pandalm_reason"
    )
    return verdicts


def shipped_mt_bench(root: Path = DATA_JUDGING) -> tuple[list[MTBenchQuestion], dict[str, dict[int, ModelAnswer]]]:
    """MT-Bench's 80 questions (with GPT-4's reference answers) and the eight models' answers."""
    root = Path(root) / "mt_bench"
    questions = load_mt_bench_questions(
        root / "question.jsonl", load_mt_bench_references(root / "reference_answer_gpt-4.jsonl")
    )
    return questions, load_model_answers(root / "model_answer")


def shipped_judge_prompts(root: Path = DATA_JUDGING) -> dict[str, JudgePrompt]:
    return load_judge_prompts(Path(root) / "mt_bench" / "judge_prompts.jsonl")
