"""MT-Bench's question and answer files, bad in each way a hand-edited JSON Lines file is (a line
that is not JSON or not an object, a field missing or of the wrong kind, a question repeated, a
math question without its reference answer, an answer without turns, a folder without answers),
are refused naming the file, the line and the field; the shipped ones are accepted."""

import json

import pytest

from eval_platform.judging.datasets import (
    JudgingInputError,
    load_model_answers,
    load_mt_bench_questions,
    shipped_mt_bench,
)

QUESTION = {"question_id": 81, "category": "writing", "turns": ["Write a poem.", "Shorter."]}
MATH = {"question_id": 111, "category": "math", "turns": ["What is 2 + 2?", "And 3 + 3?"]}


def lines(*rows) -> str:
    return "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows)


@pytest.mark.parametrize(
    ("rows", "said"),
    [
        ((QUESTION, '{"question_id": 82, "category": "writing"'), "line 2: not JSON (Expecting ',' delimiter)"),
        ((QUESTION, '["a list"]'), "line 2: expected an object, got list"),
        (({"category": "writing", "turns": ["x"]},), "line 1: missing field 'question_id'"),
        (({**QUESTION, "question_id": "81"},), "line 1: field 'question_id' must be int, got '81'"),
        ((QUESTION, QUESTION), "line 2: question_id 81 repeated"),
        (({**QUESTION, "turns": ["Write a poem.", "  "]},), "line 1: 'turns' must be non-empty strings"),
        (({**QUESTION, "category": ""},), "line 1: field 'category' is empty"),
        ((QUESTION, MATH), "line 2: question 111 (math) has no reference answer"),
    ],
)
def test_a_question_file_that_is_not_mt_benchs_is_refused_naming_the_line(tmp_path, rows, said):
    path = tmp_path / "question.jsonl"
    path.write_text(lines(*rows))
    with pytest.raises(JudgingInputError) as refused:
        load_mt_bench_questions(path, references={})
    assert str(refused.value).startswith(f"{path}: {said}")


@pytest.mark.parametrize(
    ("rows", "said"),
    [
        (({"question_id": 81, "choices": []},), "line 1: 'choices' holds no answer"),
        (({"question_id": 81, "choices": [{"turns": "one text"}]},), "line 1: field 'turns' must be list"),
        (({"question_id": 81, "choices": [{"turns": [1, 2]}]},), "line 1: 'turns' must be a list of strings"),
        (({"question_id": 81, "choices": [{"turns": ["a"]}]},) * 2, "line 2: question_id 81 repeated"),
    ],
)
def test_an_answer_file_that_is_not_a_models_answers_is_refused_naming_the_line(tmp_path, rows, said):
    path = tmp_path / "some-model.jsonl"
    path.write_text(lines(*rows))
    with pytest.raises(JudgingInputError) as refused:
        load_model_answers(tmp_path)
    assert str(refused.value).startswith(f"{path}: {said}")


def test_a_folder_without_answers_or_a_missing_model_is_refused_naming_it(tmp_path):
    with pytest.raises(JudgingInputError, match=rf"^{tmp_path}: no <model>.jsonl answer files$"):
        load_model_answers(tmp_path)
    with pytest.raises(JudgingInputError, match=rf"^{tmp_path / 'gpt-9.jsonl'}: file not found$"):
        load_model_answers(tmp_path, ["gpt-9"])


def test_the_shipped_mt_bench_files_are_accepted():
    questions, answers = shipped_mt_bench()
    assert len(questions) == 80 and len({q.question_id for q in questions}) == 80
    assert all(q.reference for q in questions if q.category in ("math", "reasoning", "coding"))
    assert len(answers) >= 6 and all(len(by_question) == 80 for by_question in answers.values())
