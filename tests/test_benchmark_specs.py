"""Adapters on the benchmark specification's example rows and on real rows of both layouts; GSM8K; rejects."""

import json
import re

import pytest

from eval_platform.benchmarks.harness_format import harness_item_scores, zero_shot_items
from eval_platform.benchmarks.scoring import score_items, wilson_interval
from eval_platform.benchmarks.specs import (
    BENCHMARKS,
    build_prompt,
    extract_numbers,
    gsm8k_final_number,
    preprocess_rows,
)
from tests.conftest import DATA_BENCHMARKS

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
    prompt = build_prompt(BENCHMARKS[name], row, "spec-0")
    assert prompt["labels"] == labels
    assert prompt["real_answer"] == answer
    assert prompt["system_prompt"] == BENCHMARKS[name].system_prompt
    first_text = row.get("question") or row.get("ctx") or row.get("sentence")
    assert first_text in prompt["user_prompt"]
    for label, choice in zip(labels, prompt["choices"], strict=False):
        assert f"{label}. {choice}" in prompt["user_prompt"]


def test_specification_example_prompt_text():
    row, _, _ = SPEC_EXAMPLES["mmlu"]
    prompt = build_prompt(BENCHMARKS["mmlu"], row, "spec-0")
    assert prompt["user_prompt"] == (
        "What is the capital of France?\n\nA. Berlin\nB. Madrid\nC. Paris\nD. Rome\n\nAnswer with A, B, C or D."
    )
    # the harness reads MMLU's Hugging Face layout, one task per subject
    hugging_face = {
        "question": row["question"],
        "choices": row["options"],
        "answer": 2,
        "subject": "high_school_geography",
    }
    [item] = zero_shot_items(BENCHMARKS["mmlu"], [hugging_face])
    contexts, continuations = zip(*item.requests(), strict=False)
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
    rows = _shared_rows(BENCHMARKS[name].data_file)
    prepared = preprocess_rows(BENCHMARKS[name], [(str(i), row) for i, row in enumerate(rows)])
    prompts = prepared.prompts
    assert prepared.rejected == []
    assert len(prompts) == len(rows) == 50
    assert len({p["prompt_id"] for p in prompts}) == len(rows)
    zero_shot = {r["prompt_id"]: r["item"] for r in prepared.requests if r["num_fewshot"] == 0}
    for prompt in prompts:
        if BENCHMARKS[name].multiple_choice:
            assert set(prompt["real_answer"].split(",")) <= set(prompt["labels"])
            assert len(zero_shot[prompt["prompt_id"]].requests()) == len(prompt["choices"]) == len(prompt["labels"])
        else:
            assert re.fullmatch(r"-?\d+(\.\d+)?", prompt["real_answer"]), prompt["real_answer"]


def test_real_arc_rows_with_numeric_labels_and_five_choices():
    rows = [
        r
        for r in _shared_rows("arc_challenge.jsonl") + _shared_rows("arc_easy.jsonl")
        if r["choices"]["label"][0] == "1" or len(r["choices"]["label"]) != 4
    ]
    assert len(rows) >= 2
    for row in rows:
        prompt = build_prompt(BENCHMARKS["arc_challenge"], row, row["id"])
        position = row["choices"]["label"].index(row["answerKey"])
        assert prompt["real_answer"] == "ABCDE"[position]
        assert prompt["choices"][position] == row["choices"]["text"][position]


def test_real_mmlu_row_in_both_layouts_gives_the_same_answer():
    row = _shared_rows("mmlu.jsonl", 1)[0]
    hf = build_prompt(BENCHMARKS["mmlu"], row, "0")
    simple_layout = {"question": row["question"], "options": row["choices"], "answer": "ABCD"[row["answer"]]}
    simple = build_prompt(BENCHMARKS["mmlu"], simple_layout, "0")
    assert hf["real_answer"] == simple["real_answer"] == "ABCD"[row["answer"]]
    assert hf["user_prompt"] == simple["user_prompt"]


def test_real_truthfulqa_rows_are_shuffled_deterministically():
    rows = _shared_rows("truthfulqa.jsonl")
    prompts = [build_prompt(BENCHMARKS["truthfulqa"], row, str(i)) for i, row in enumerate(rows)]
    assert len({p["real_answer"] for p in prompts}) > 2  # the true answer is not always A
    for row, prompt in zip(rows, prompts, strict=False):
        shown = prompt["choices"][prompt["labels"].index(prompt["real_answer"])]
        assert shown == row["mc1_targets"]["choices"][0].strip()
    assert prompts == [build_prompt(BENCHMARKS["truthfulqa"], row, str(i)) for i, row in enumerate(rows)]


def test_real_hellaswag_row_with_empty_ctx_b_uses_harness_preprocessing():
    row = _shared_rows("hellaswag.jsonl", 1)[0]
    assert row["ctx_b"] == ""
    prompt = build_prompt(BENCHMARKS["hellaswag"], row, "0")
    [item] = zero_shot_items(BENCHMARKS["hellaswag"], [row])
    requests = item.requests()
    assert requests[0][0] == "Roof shingle removal: A man is sitting on a roof. he"
    assert requests[3][1] == " starts pulling up roofing on a roof."
    assert prompt["real_answer"] == "D"


def test_winogrande_partial_scoring_requests():
    row = _shared_rows("winogrande.jsonl", 1)[0]
    prompt = build_prompt(BENCHMARKS["winogrande"], row, "0")
    [item] = zero_shot_items(BENCHMARKS["winogrande"], [row])
    assert item.requests() == [
        ("Sarah was a much better surgeon than Maria so Sarah", " always got the easier cases."),
        ("Sarah was a much better surgeon than Maria so Maria", " always got the easier cases."),
    ]
    assert prompt["real_answer"] == "2"


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
    prepared = preprocess_rows(BENCHMARKS[name], [("bad-1", row)])
    assert prepared.prompts == [] and prepared.requests == []
    rejected = prepared.rejected
    assert rejected[0]["source_row_id"] == "bad-1"
    assert reason in rejected[0]["reason"]


def test_score_report_in_the_specification_form():
    score = score_items(["A", "B"], ["A", "C"])
    assert score.report == "0. Output: A, Reference: A :: O\n1. Output: B, Reference: C :: X\nScore: 0.5"
    assert (score.n, score.correct, score.accuracy) == (2, 1, 0.5)
    low, high = wilson_interval(1, 2)
    assert 0 < low < 0.5 < high < 1
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0


def test_gsm8k_cot_prompt_and_filters_are_the_harness_task():
    """gsm8k-cot.yaml: "Q: …\\nA:" after its eight exemplars (question, space, worked answer,
    blank line), stops at "Q:", strict-match on "The answer is N.", flexible on the last number."""
    spec = BENCHMARKS["gsm8k_cot"]
    exemplars = [
        (str(i), json.loads(line))
        for i, line in enumerate((DATA_BENCHMARKS / "fewshot" / spec.fewshot.data_file).read_text().splitlines())
    ]
    row = json.loads((DATA_BENCHMARKS / spec.data_file).read_text().splitlines()[0])
    prepared = preprocess_rows(spec, [("0", row)], exemplars)
    item = next(r["item"] for r in prepared.requests if r["num_fewshot"] == 8)
    assert item.prompt.startswith("Q: There are 15 trees in the grove.")
    assert "The answer is 6.\n\nQ: If there are 3 cars" in item.prompt
    assert item.prompt.endswith(f"The answer is 8.\n\nQ: {row['question']}\nA:")
    assert item.generation_kwargs["until"] == ["Q:", "</s>", "<|im_end|>"]
    text = " She has 16 - 3 - 4 = 9 eggs. 9 * 2 = 18. The answer is 18.\n\n"
    stored = {
        "prompt_id": prepared.prompts[0]["prompt_id"],
        "row_json": json.dumps(row),
        "output_text": text,
        "real_answer": prepared.prompts[0]["real_answer"],
    }
    scores = harness_item_scores(spec, [stored])[stored["prompt_id"]]
    assert (scores["strict-match"].predicted, scores["flexible-extract"].predicted) == ("18", "18.")
    target = row["answer"].split("####")[-1].strip()
    assert scores["flexible-extract"].value == float(target == "18")
    stored["output_text"] = "so 18 dollars"
    assert harness_item_scores(spec, [stored])[stored["prompt_id"]]["strict-match"].predicted == "[invalid]"


def _requests(prepared):
    """Each row's requests at each number of shots, in the rows' order."""
    return [(r["num_fewshot"], r["item"]) for r in prepared.requests]


def test_the_seeds_layouts_get_the_harness_requests_of_their_hugging_face_rows():
    """MMLU's `options` with a letter answer, and TruthfulQA's `choices` with a `label` index (the
    true answer anywhere), are handed to the harness in the layout its task reads."""
    mmlu = BENCHMARKS["mmlu"]
    rows, dev = _shared_rows("mmlu.jsonl", 6), _shared_rows("fewshot/mmlu_dev.jsonl")

    def seed_mmlu(row):
        return {
            "question": row["question"],
            "options": row["choices"],
            "answer": "ABCD"[row["answer"]],
            "subject": row["subject"],
        }

    hugging_face = preprocess_rows(mmlu, list(enumerate(rows)), list(enumerate(dev)))
    seed = preprocess_rows(
        mmlu, [(i, seed_mmlu(r)) for i, r in enumerate(rows)], [(i, seed_mmlu(r)) for i, r in enumerate(dev)]
    )
    assert hugging_face.unavailable_shots == seed.unavailable_shots == {}
    assert len(_requests(seed)) == 12 and _requests(seed) == _requests(hugging_face)

    truthfulqa = BENCHMARKS["truthfulqa"]
    rows = _shared_rows("truthfulqa.jsonl", 6)

    def seed_truthfulqa(row, position):
        true, *others = row["mc1_targets"]["choices"]
        return {
            "question": row["question"],
            "choices": [*others[:position], true, *others[position:]],
            "label": str(position),
        }

    hugging_face = preprocess_rows(truthfulqa, list(enumerate(rows)))
    seed = preprocess_rows(truthfulqa, [(i, seed_truthfulqa(r, i % 3)) for i, r in enumerate(rows)])
    assert seed.unavailable_shots == {} and len(_requests(seed)) == 6
    assert _requests(seed) == _requests(hugging_face)
    # scored on the harness's choices, the true one first: the highest log-likelihood on it is right
    stored = [
        {
            "prompt_id": p["prompt_id"],
            "row_json": json.dumps(seed_truthfulqa(r, 2)),
            "predicted": "",
            "real_answer": "",
            "choice_loglikelihoods": [
                -1.0 if choice == n % 2 else -2.0 for choice in range(len(r["mc1_targets"]["choices"]))
            ],
        }
        for n, (p, r) in enumerate(zip(seed.prompts, rows, strict=False))
    ]
    assert {key: s["acc"].value for key, s in harness_item_scores(truthfulqa, stored).items()} == {
        row["prompt_id"]: float(row["choice_loglikelihoods"][0] == -1.0) for row in stored
    }


def test_a_row_without_the_field_that_names_its_harness_task_says_so():
    row, _, _ = SPEC_EXAMPLES["mmlu"]  # the seed's example has no subject: no mmlu_{subject} task
    prepared = preprocess_rows(BENCHMARKS["mmlu"], [("spec-0", row)])
    assert len(prepared.prompts) == 1 and prepared.requests == []
    assert "row " in prepared.unavailable_shots[0] and "mmlu_{subject}" in prepared.unavailable_shots[0]
