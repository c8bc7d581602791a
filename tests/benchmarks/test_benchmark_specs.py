"""Parsers on the benchmark specification's example rows and on real rows of both layouts; the
harness's requests and scoring of the documents; GSM8K; rejects."""

import json
import re

import pytest

from eval_platform.benchmarks.declarations import declared_benchmarks
from eval_platform.benchmarks.documents import build_documents, document
from eval_platform.benchmarks.parsers import extract_numbers, gsm8k_final_number, parser
from eval_platform.benchmarks.records import request_key
from eval_platform.benchmarks.scoring import score_items
from eval_platform.benchmarks.solvers import EvaluationJob, evaluate
from eval_platform.benchmarks.solvers.harness import built_requests
from eval_platform.environment import environment
from tests.conftest import DATA_BENCHMARKS

BENCHMARKS = {name: b for name, b in declared_benchmarks(environment().benchmarks_dir).items() if b.is_dataset}


def build_prompt(name, row, row_id):
    benchmark = BENCHMARKS[name]
    return document(benchmark, parser(benchmark.parser), row_id, row)


def requests_of(name, rows, pool=(), shots=0):
    """The harness's requests of each row's document, in order (rows: id, row)."""
    benchmark = BENCHMARKS[name]
    built = build_documents(benchmark, rows, pool)
    settings = benchmark.evaluation_settings().model_copy(update={"num_fewshot": shots})
    job = EvaluationJob(benchmark, settings, model=None, documents=built.documents, pool=built.pool)  # type: ignore[arg-type]
    return [requests for requests, _ in built_requests(job).values()]


def answered(name, rows, answer, local_model, pool=(), shots=0):
    """The harness solver's samples of the rows' documents, every request answered by `answer(args)`
    from the stored answers (so the model computes none)."""
    benchmark = BENCHMARKS[name]
    built = build_documents(benchmark, rows, pool)
    settings = benchmark.evaluation_settings().model_copy(update={"num_fewshot": shots})
    job = EvaluationJob(benchmark, settings, local_model, documents=built.documents, pool=built.pool)
    kind = "generate_until" if not parser(benchmark.parser).multiple_choice else "loglikelihood"
    stored = {
        request_key(kind, args): answer(args) for requests, _ in built_requests(job).values() for args in requests
    }
    evaluation = evaluate("harness", EvaluationJob(**{**job.__dict__, "stored": stored}))
    assert evaluation.computed == 0
    return evaluation.samples


SPEC_EXAMPLES = {
    "arc_easy": (
        {
            "question": "What is the boiling point of water at sea level?",
            "choices": {"label": ["A", "B", "C"], "text": ["100°C", "0°C", "50°C"]},
            "answerKey": "A",
        },
        ["A", "B", "C"],
        "A",
    ),
    "gsm8k": (
        {
            "question": "At 30, Anika is 4/3 the age of Maddie. What would be their average age in 15 years?",
            "answer": "How old will Anika be in 15 years?...#### 50",
        },
        [],
        "50",
    ),
    "hellaswag": (
        {
            "ctx_a": "A man is sitting on a roof.",
            "ctx_b": "he",
            "ctx": "A man is sitting on a roof. he",
            "endings": ["is using wrap...", "is ripping tiles...", "is holding...", "starts pulling roofing..."],
            "label": "3",
        },
        ["A", "B", "C", "D"],
        "D",
    ),
    "mmlu": (
        {"question": "What is the capital of France?", "options": ["Berlin", "Madrid", "Paris", "Rome"], "answer": "C"},
        ["A", "B", "C", "D"],
        "C",
    ),
    "truthfulqa": (
        {
            "question": "What is the smallest country in the world that is at least one square mile in area?",
            "choices": ["Monaco", "Vatican City", "United States", "Nauru"],
            "label": "1",
        },
        ["A", "B", "C", "D"],
        "B",
    ),
    "winogrande": (
        {
            "sentence": "John moved the couch from the garage to the backyard. The _ is small.",
            "option1": "garage",
            "option2": "backyard",
            "answer": "1",
        },
        ["1", "2"],
        "1",
    ),
}


@pytest.mark.parametrize("name", sorted(SPEC_EXAMPLES))
def test_specification_examples(name):
    row, labels, answer = SPEC_EXAMPLES[name]
    prompt = build_prompt(name, row, "spec-0")
    assert list(prompt.labels) == labels
    assert prompt.real_answer == answer
    assert prompt.system_prompt == BENCHMARKS[name].chat.system_prompt
    first_text = row.get("question") or row.get("ctx") or row.get("sentence")
    assert first_text in prompt.user_prompt
    for label, choice in zip(labels, prompt.choices, strict=False):
        assert f"{label}. {choice}" in prompt.user_prompt


def test_specification_example_prompt_text():
    row, _, _ = SPEC_EXAMPLES["mmlu"]
    prompt = build_prompt("mmlu", row, "spec-0")
    assert prompt.user_prompt == (
        "What is the capital of France?\n\nA. Berlin\nB. Madrid\nC. Paris\nD. Rome\n\nAnswer with A, B, C or D."
    )
    # the harness reads MMLU's Hugging Face layout, one task per subject
    hugging_face = {
        "question": row["question"],
        "choices": row["options"],
        "answer": 2,
        "subject": "high_school_geography",
    }
    [item] = requests_of("mmlu", [("0", hugging_face)])
    contexts, continuations = zip(*item, strict=True)
    assert contexts[0] == (
        "The following are multiple choice questions (with answers) about high school geography.\n\n"
        "What is the capital of France?\nA. Berlin\nB. Madrid\nC. Paris\nD. Rome\nAnswer:"
    )
    assert continuations == (" A", " B", " C", " D")


def _shared_rows(file_name, count=None):
    """Real rows of the slice shipped in data/benchmarks (the Hugging Face layout)."""
    lines = (DATA_BENCHMARKS / file_name).read_text(encoding="utf-8").rstrip("\n").split("\n")
    return [json.loads(line) for line in lines[:count]] if count else [json.loads(line) for line in lines]


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_real_rows_hugging_face_layout(name):
    rows = _shared_rows(BENCHMARKS[name].dataset.file)
    prepared = build_documents(BENCHMARKS[name], [(str(i), row) for i, row in enumerate(rows)])
    prompts = prepared.documents
    assert prepared.rejected == []
    assert len(prompts) == len(rows) == 50
    assert len({p.document_id for p in prompts}) == len(rows)
    zero_shot = requests_of(name, [(str(i), row) for i, row in enumerate(rows)])
    assert len(zero_shot) == len(prompts)
    for prompt, requests in zip(sorted(prompts, key=lambda p: p.task), zero_shot, strict=True):
        if parser(BENCHMARKS[name].parser).multiple_choice:
            assert set(prompt.real_answer.split(",")) <= set(prompt.labels)
            assert len(requests) == len(prompt.choices) == len(prompt.labels)
        else:
            assert re.fullmatch(r"-?\d+(\.\d+)?", prompt.real_answer), prompt.real_answer


def test_real_arc_rows_with_numeric_labels_and_five_choices():
    rows = [
        r
        for r in _shared_rows("arc_challenge.jsonl") + _shared_rows("arc_easy.jsonl")
        if r["choices"]["label"][0] == "1" or len(r["choices"]["label"]) != 4
    ]
    assert len(rows) >= 2
    for row in rows:
        prompt = build_prompt("arc_challenge", row, row["id"])
        position = row["choices"]["label"].index(row["answerKey"])
        assert prompt.real_answer == "ABCDE"[position]
        assert prompt.choices[position] == row["choices"]["text"][position]


def test_real_mmlu_row_in_both_layouts_gives_the_same_answer():
    row = _shared_rows("mmlu.jsonl", 1)[0]
    hf = build_prompt("mmlu", row, "0")
    simple_layout = {"question": row["question"], "options": row["choices"], "answer": "ABCD"[row["answer"]]}
    simple = build_prompt("mmlu", {**simple_layout, "subject": row["subject"]}, "0")
    assert hf.real_answer == simple.real_answer == "ABCD"[row["answer"]]
    assert hf.user_prompt == simple.user_prompt and hf.doc == simple.doc and hf.task == simple.task


def test_real_truthfulqa_rows_are_shuffled_deterministically():
    rows = _shared_rows("truthfulqa.jsonl")
    prompts = [build_prompt("truthfulqa", row, str(i)) for i, row in enumerate(rows)]
    assert len({p.real_answer for p in prompts}) > 2  # the true answer is not always A
    for row, prompt in zip(rows, prompts, strict=True):
        shown = prompt.choices[prompt.labels.index(prompt.real_answer)]
        assert shown == row["mc1_targets"]["choices"][0].strip()
    assert prompts == [build_prompt("truthfulqa", row, str(i)) for i, row in enumerate(rows)]


def test_real_hellaswag_row_with_empty_ctx_b_uses_harness_preprocessing():
    row = _shared_rows("hellaswag.jsonl", 1)[0]
    assert row["ctx_b"] == ""
    prompt = build_prompt("hellaswag", row, "0")
    [requests] = requests_of("hellaswag", [("0", row)])
    assert requests[0][0] == "Roof shingle removal: A man is sitting on a roof. he"
    assert requests[3][1] == " starts pulling up roofing on a roof."
    assert prompt.real_answer == "D"


def test_winogrande_partial_scoring_requests():
    row = _shared_rows("winogrande.jsonl", 1)[0]
    prompt = build_prompt("winogrande", row, "0")
    [requests] = requests_of("winogrande", [("0", row)])
    assert requests == [
        ("Sarah was a much better surgeon than Maria so Sarah", " always got the easier cases."),
        ("Sarah was a much better surgeon than Maria so Maria", " always got the easier cases."),
    ]
    assert prompt.real_answer == "2"


@pytest.mark.parametrize(
    "text, strict, flexible",
    [
        ("She makes 9 * 2 = $18 every day.\n#### 18", "18", "18"),
        ("The total is 1,234 apples.\n#### 1,234", "1234", "1234"),
        ("So the answer is $1,000.50.", None, "1000.50"),
        ("#### -7", "-7", "-7"),
        ("First 3 then 5, finally 12.", None, "12"),
        ("no numbers here", None, None),
        ("#### 42.0", "42", "42"),
    ],
)
def test_gsm8k_extraction(text, strict, flexible):
    assert extract_numbers(text) == (strict, flexible)


def test_gsm8k_reference_parsing_removes_commas():
    assert gsm8k_final_number("Steps...\n#### 1,080") == "1080"
    assert gsm8k_final_number("no final marker") is None


@pytest.mark.parametrize(
    "name, row, reason",
    [
        (
            "arc_easy",
            {"choices": {"label": ["A", "B"], "text": ["x", "y"]}, "answerKey": "A"},
            "missing field 'question'",
        ),
        (
            "arc_easy",
            {"question": "q", "choices": {"label": ["A", "B"], "text": ["x", "y"]}, "answerKey": "E"},
            "unknown answer key 'E'",
        ),
        ("mmlu", {"question": "q", "choices": ["a", "b", "c", "d"], "answer": 7}, "out of range"),
        ("mmlu", {"question": "q", "choices": ["a", "b", "c"], "answer": 1}, "wrong number of choices: 3"),
        ("hellaswag", {"ctx": "c", "endings": ["a", "b", "c", "d"], "label": "x"}, "unknown answer key 'x'"),
        ("truthfulqa", {"question": "q", "mc1_targets": {"choices": ["a", "b"], "labels": [1, 1]}}, "exactly one"),
        ("winogrande", {"sentence": "no blank", "option1": "a", "option2": "b", "answer": "1"}, "blank"),
        ("winogrande", {"sentence": "The _ is", "option1": "a", "option2": "b", "answer": ""}, "unknown answer key ''"),
        ("gsm8k", {"question": "q", "answer": "no marker"}, "no final"),
    ],
)
def test_rejects_keep_the_row_and_reason(name, row, reason):
    prepared = build_documents(BENCHMARKS[name], [("bad-1", row)])
    assert prepared.documents == []
    rejected = prepared.rejected
    assert rejected[0].source_row_id == "bad-1"
    assert reason in rejected[0].reason


def test_score_report_in_the_specification_form():
    score = score_items(["A", "B"], ["A", "C"])
    assert score.report == "0. Output: A, Reference: A :: O\n1. Output: B, Reference: C :: X\nScore: 0.5"
    assert (score.n, score.correct, score.accuracy) == (2, 1, 0.5)
    assert 0 < score.ci_low < 0.5 < score.ci_high < 1  # Wilson's interval of 1 of 2


def test_gsm8k_cot_prompt_and_filters_are_the_harness_task(local_model):
    """gsm8k-cot.yaml: "Q: …\\nA:" after its eight exemplars (question, space, worked answer,
    blank line), stops at "Q:", strict-match on "The answer is N.", flexible on the last number."""
    exemplars = [
        (str(i), json.loads(line))
        for i, line in enumerate((DATA_BENCHMARKS / "fewshot" / "gsm8k_cot_exemplars.jsonl").read_text().splitlines())
    ]
    row = json.loads((DATA_BENCHMARKS / "gsm8k.jsonl").read_text().splitlines()[0])
    [[(prompt, generation_kwargs)]] = requests_of("gsm8k_cot", [("0", row)], exemplars, shots=8)
    assert prompt.startswith("Q: There are 15 trees in the grove.")
    assert "The answer is 6.\n\nQ: If there are 3 cars" in prompt
    assert prompt.endswith(f"The answer is 8.\n\nQ: {row['question']}\nA:")
    assert generation_kwargs["until"] == ["Q:", "</s>", "<|im_end|>"]

    def scored(text):
        samples = answered("gsm8k_cot", [("0", row)], lambda args: text, local_model, exemplars, shots=8)
        return {s.filter: (s.filtered_responses[0], s.metrics["exact_match"]) for s in samples}

    scores = scored(" She has 16 - 3 - 4 = 9 eggs. 9 * 2 = 18. The answer is 18.\n\n")
    target = row["answer"].split("####")[-1].strip()
    assert scores == {"strict-match": ("18", float(target == "18")), "flexible-extract": ("18.", float(target == "18"))}
    assert scored("so 18 dollars")["strict-match"][0] == "[invalid]"


def test_the_seeds_layouts_get_the_harness_requests_of_their_hugging_face_rows(local_model):
    """MMLU's `options` with a letter answer, and TruthfulQA's `choices` with a `label` index (the
    true answer anywhere), are handed to the harness in the layout its task reads."""
    rows, dev = _shared_rows("mmlu.jsonl", 6), _shared_rows("fewshot/mmlu_dev.jsonl")

    def seed_mmlu(row):
        return {
            "question": row["question"],
            "options": row["choices"],
            "answer": "ABCD"[row["answer"]],
            "subject": row["subject"],
        }

    for shots in (0, 5):
        hugging_face = requests_of("mmlu", list(enumerate(rows)), list(enumerate(dev)), shots)
        seed = requests_of(
            "mmlu",
            [(i, seed_mmlu(r)) for i, r in enumerate(rows)],
            [(i, seed_mmlu(r)) for i, r in enumerate(dev)],
            shots,
        )
        assert len(seed) == 6 and seed == hugging_face

    rows = _shared_rows("truthfulqa.jsonl", 6)

    def seed_truthfulqa(row, position):
        true, *others = row["mc1_targets"]["choices"]
        return {
            "question": row["question"],
            "choices": [*others[:position], true, *others[position:]],
            "label": str(position),
        }

    seed_rows = [(str(i), seed_truthfulqa(r, i % 3)) for i, r in enumerate(rows)]
    assert requests_of("truthfulqa", seed_rows) == requests_of("truthfulqa", [(str(i), r) for i, r in enumerate(rows)])
    # scored on the harness's choices, the true one first: the highest log-likelihood on it is right
    first_choice = {r["mc1_targets"]["choices"][0] for r in rows}
    samples = answered(
        "truthfulqa", seed_rows, lambda args: [-1.0 if args[1].strip() in first_choice else -2.0, False], local_model
    )
    assert len(samples) == 6 and all(sample.metrics["acc"] == 1.0 for sample in samples)


def test_a_row_without_the_field_that_names_its_harness_task_is_asked_by_the_chat_solvers_only(local_model):
    """The seed's MMLU example has no subject, so no `mmlu_{subject}` task: the letter solver asks
    it, the harness solver says why it cannot."""
    row, _, _ = SPEC_EXAMPLES["mmlu"]
    prepared = build_documents(BENCHMARKS["mmlu"], [("spec-0", row)])
    assert [d.task for d in prepared.documents] == [None] and prepared.rejected == []
    job = EvaluationJob(BENCHMARKS["mmlu"], BENCHMARKS["mmlu"].evaluation_settings(), local_model,
                        documents=prepared.documents)  # fmt: skip
    [sample] = evaluate("letter", job).samples
    assert (sample.task, sample.doc_id, sample.target) == ("mmlu", 0, "C")
    with pytest.raises(ValueError, match=r"no document names its harness task mmlu_\{subject\}"):
        evaluate("harness", job)
