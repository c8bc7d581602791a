"""The blind evaluation's inputs, bad in each way a hand-made file is: the questions (a column
missing, a question id repeated or empty, a file that is not a table, a kind of file it does not
read), an answers file, and the rubric (not JSON, a level without its score, scores other than 1 to
5 once each) are refused naming the file and the row or column; the shipped ones are accepted."""

import json

import pytest

from eval_platform.blind.sheets import BlindEvaluationInputError, Rubric, read_table
from tests.conftest import PROJECT_ROOT

BLIND = PROJECT_ROOT / "data" / "blind_eval"
QUESTION_COLUMNS = ["Question_ID", "Question", "Ground_Truth"]


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("questions.csv", "Question_ID,Question\nQ1,What?\n", "missing column(s) Ground_Truth"),
        ("questions.csv", "Question_ID,Question,Ground_Truth\nQ1,a,b\nQ2,c,d\nQ1,e,f\n", "Question_ID repeated: Q1"),
        ("questions.csv", "Question_ID,Question,Ground_Truth\nQ1,a,b\n ,c,d\n", "row 3 has no Question_ID"),
        ("questions.jsonl", '{"Question_ID": "Q1", "Question": "a"\n', "cannot be read ("),
        ("questions.txt", "Q1 a b\n", "expected a .csv, .jsonl or .xlsx file"),
        ("questions.xlsx", "not a workbook", "cannot be read ("),
    ],
)
def test_questions_that_are_not_a_question_table_are_refused_naming_the_file_and_row(tmp_path, name, text, said):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(BlindEvaluationInputError) as refused:
        read_table(path, QUESTION_COLUMNS)
    assert str(refused.value).startswith(f"{path}: {said}")


def test_an_answers_file_without_its_answer_column_is_refused_naming_it(tmp_path):
    path = tmp_path / "answers" / "system-x.csv"
    path.parent.mkdir()
    path.write_text("Question_ID,Reply\nQ1,yes\n")
    with pytest.raises(BlindEvaluationInputError, match=rf"^{path}: missing column\(s\) Answer$"):
        read_table(path, ["Question_ID", "Answer"])


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda rubric: "{not json", "not a usable rubric (JSONDecodeError: "),
        (lambda rubric: json.dumps({**rubric, "levels": [{"level": "x", "criteria": "y"}]}), "not a usable rubric"),
        (lambda rubric: json.dumps({k: v for k, v in rubric.items() if k != "subject"}), "not a usable rubric"),
        (
            lambda rubric: json.dumps({**rubric, "levels": rubric["levels"][:4]}),
            "the rubric must define each score from 1 to 5 once",
        ),
        (
            lambda rubric: json.dumps({**rubric, "levels": rubric["levels"] + rubric["levels"][:1]}),
            "the rubric must define each",
        ),
    ],
)
def test_a_rubric_that_is_not_five_levels_is_refused_naming_the_file(tmp_path, change, said):
    rubric = json.loads((BLIND / "rubric.json").read_text())
    path = tmp_path / "rubric.json"
    path.write_text(change(rubric))
    with pytest.raises(BlindEvaluationInputError) as refused:
        Rubric.from_file(path)
    assert str(refused.value).startswith(f"{path}: {said}")


def test_the_shipped_blind_inputs_are_accepted():
    questions = read_table(BLIND / "questions.csv", QUESTION_COLUMNS)
    assert questions["Question_ID"].tolist() == [f"Q{i}" for i in range(1, 6)]
    for answers in sorted((BLIND / "answers").glob("*.csv")):
        assert len(read_table(answers, ["Question_ID", "Answer"])) == 5
    assert sorted(score for score, _, _ in Rubric.from_file(BLIND / "rubric.json").levels) == [1, 2, 3, 4, 5]
