"""Extending the platform as a user does, each in at most two files: a harness task on local data
(its declaration and its data), a dataset in the seed's layout asked by a chat solver (its
declaration and its rows), and a new solver (its module, and the declaration that names it).
The whole graph then materialises with the real model: inputs, evaluation, comparison, protocols
and leaderboard, the new benchmarks and the new solver in every table and in `leaderboard_wide`."""

import json
import shutil

import pytest

from eval_platform.evaluation_assets.benchmarks.assets import (
    benchmark_evaluation,
    leaderboard,
    model_comparison,
    protocol_scores,
)
from eval_platform.resources import LanguageModelResource
from tests.conftest import PROJECT_ROOT
from tests.evaluation import materialize_configured, materialize_evaluation, materialize_inputs, roster_with

pytestmark = pytest.mark.slow  # every test here takes seconds: the fast tier leaves them out

QUESTIONS = [
    ("What is the capital of France?", ["Paris", "Lyon", "Nice"], "A"),
    ("What is the capital of Italy?", ["Milan", "Rome", "Turin"], "B"),
    ("What is the capital of Spain?", ["Seville", "Valencia", "Madrid"], "C"),
]
ARC_ROWS = [  # the Hugging Face layout of allenai/ai2_arc, which the harness's arc_easy task reads
    {"id": f"cap-{i}", "question": q, "choices": {"text": c, "label": ["A", "B", "C"]}, "answerKey": a}
    for i, (q, c, a) in enumerate(QUESTIONS)
]
HARNESS_TASK = """# the harness's own arc_easy task on local rows
title: Capitals (harness task)
task: arc_easy
data_files: {arc_easy: {test: capitals_rows.jsonl}}
num_fewshot: 0
headline: {metric: acc}
"""
DATASET = """# rows in the seed's ARC layout, parsed by the arc parser, asked by the letter solver
title: Capitals (dataset)
task: arc_easy
task_folder: arc
parser: arc
dataset: {file: capitals_quiz.jsonl}
num_fewshot: 0
solvers: [letter]
chat: {system_prompt: Answer with the letter of the correct option only.}
headline: {metric: acc, solver: letter}
"""
SOLVER = '''"""A solver of my own: the question and each choice as plain text, scored by log-likelihood."""
from eval_platform.benchmarks.records import request_key
from eval_platform.benchmarks.solvers.chat import ChatSolver, doc_ids
from eval_platform.common.models import LoglikelihoodRequest


class PlainChoices(ChatSolver):
    name = "plain_choices"

    def samples(self, job, answering):
        asked = [[[f"{d.user_prompt.splitlines()[0]}\\nAnswer:", f" {c}"] for c in d.choices] for d in job.documents]

        def compute(batch):
            return job.model.loglikelihoods([LoglikelihoodRequest(c, k) for c, k in batch], job.batch_size)

        flat = answering.answer("plain_loglikelihood", [a for item in asked for a in item], compute)
        samples, start = [], 0
        for document, doc_id, arguments in zip(job.documents, doc_ids(job.documents), asked):
            scores, start = flat[start : start + len(arguments)], start + len(arguments)
            best = document.labels[max(range(len(scores)), key=scores.__getitem__)]
            samples.append(self.sample(
                document, doc_id, arguments=arguments, responses=scores, filtered_responses=[best],
                request_keys=[request_key("plain_loglikelihood", a) for a in arguments],
                metrics={"acc": float(best == document.real_answer)},
            ))
        return samples
'''
NEW_SOLVER = """# the dataset's rows asked by a solver of my own (module:Class)
title: Capitals (my solver)
task: arc_easy
task_folder: arc
parser: arc
dataset: {file: capitals_quiz.jsonl}
num_fewshot: 0
solvers: [my_solvers:PlainChoices]
chat: {system_prompt: ""}
headline: {metric: acc, solver: plain_choices}
"""


def snapshot(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def changed(before: dict[str, bytes], after: dict[str, bytes]) -> set[str]:
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of the project's declarations (benchmarks, protocols) that the code location reads,
    and a folder on the import path for a solver module."""
    benchmarks, code = tmp_path / "benchmarks", tmp_path / "code"
    shutil.copytree(PROJECT_ROOT / "data" / "benchmarks", benchmarks, ignore=shutil.ignore_patterns("*.jsonl"))
    code.mkdir()
    monkeypatch.setenv("EVAL_BENCHMARKS_DIR", str(benchmarks))
    monkeypatch.syspath_prepend(str(code))
    return benchmarks, code


def test_each_flavour_and_a_solver_take_two_files_and_the_whole_graph_materialises(project, warehouse, tmp_path):
    benchmarks, code = project
    steps = {}
    before = {**snapshot(benchmarks), **{f"code/{k}": v for k, v in snapshot(code).items()}}

    def add(files: dict) -> set[str]:
        nonlocal before
        for name, text in files.items():
            (code if name.startswith("code/") else benchmarks).joinpath(name.removeprefix("code/")).write_text(text)
        now = {**snapshot(benchmarks), **{f"code/{k}": v for k, v in snapshot(code).items()}}
        touched, before = changed(before, now), now
        return touched

    quiz_rows = "".join(json.dumps(row) + "\n" for row in ARC_ROWS)
    steps["harness task"] = add({"capitals_harness.yaml": HARNESS_TASK, "capitals_rows.jsonl": quiz_rows})
    steps["dataset, chat solver"] = add({"capitals_quiz.yaml": DATASET, "capitals_quiz.jsonl": quiz_rows})
    steps["solver"] = add({"code/my_solvers.py": SOLVER, "capitals_mine.yaml": NEW_SOLVER})
    assert {step: len(files) for step, files in steps.items()} == dict.fromkeys(steps, 2), steps

    roster = roster_with(tmp_path / "roster", "smollm2")
    roster = roster_with(tmp_path / "roster", "smollm2-again", baseline="smollm2")
    model = LanguageModelResource(max_new_tokens=8)
    new = ["capitals_harness", "capitals_quiz", "capitals_mine"]
    for name in new:
        assert materialize_inputs(warehouse, name).success
        for entry in ("smollm2", "smollm2-again"):
            assert materialize_evaluation(
                warehouse, name, entry, roster, evaluation_model=model, assets=[benchmark_evaluation, model_comparison]
            ).success
    assert materialize_configured([protocol_scores, leaderboard], {"warehouse": warehouse, "roster": roster}).success

    with warehouse.get_connection() as conn:
        results = conn.execute(
            "SELECT benchmark, solver, count(DISTINCT model) FROM results WHERE metric = 'acc' "
            "AND benchmark LIKE 'capitals%' GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        documents = dict(conn.execute("SELECT benchmark, count(*) FROM documents GROUP BY ALL").fetchall())
        samples = conn.execute(
            "SELECT benchmark, solver, count(*) FROM samples WHERE model = 'smollm2' GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        comparisons = conn.execute(
            "SELECT benchmark, solver, model_a, model_b, difference FROM comparisons ORDER BY ALL"
        ).fetchall()
        wide = conn.execute(
            "SELECT model, capitals_harness, capitals_quiz, capitals_mine FROM leaderboard_wide ORDER BY model"
        ).fetchall()
    assert results == [
        ("capitals_harness", "harness", 2),
        ("capitals_mine", "plain_choices", 2),
        ("capitals_quiz", "letter", 2),
    ]
    assert documents == {"capitals_quiz": 3, "capitals_mine": 3}  # a harness task reads its own rows
    assert samples == [("capitals_harness", "harness", 3), ("capitals_mine", "plain_choices", 3),
                       ("capitals_quiz", "letter", 3)]  # fmt: skip
    # the same model under two names: every difference is 0, on each new benchmark and solver
    assert {(b, s) for b, s, *_ in comparisons} == {(b, s) for b, s, _ in results}
    assert all(a == "smollm2-again" and b == "smollm2" and d == 0 for _, _, a, b, d in comparisons)
    assert [m for m, *_ in wide] == ["smollm2", "smollm2-again"]
    assert all(v is not None and 0 <= v <= 1 for row in wide for v in row[1:])
    assert wide[0][1:] == wide[1][1:]
