"""Re-scored without the model: a benchmark's declaration changes how answers are extracted (a
filter of gsm8k_cot's takes the first number instead of the last), and its evaluation, materialised
again, computes its results from the answers the warehouse keeps: no model call (the local model's
request methods are counted), every answer row as it was, and each document's extracted answer and
score what lm-evaluation-harness itself makes of the same answers (speed/harness_alone.py replaying
them to its own filters and metrics, in a process of its own)."""

import json
import shutil

import pytest
import yaml

from eval_engine import DEFAULT_LOCAL_MODEL, LocalCausalLM
from speed.harness_alone import run_alone
from tests.conftest import DATA_BENCHMARKS
from tests.evaluation import materialize_evaluation, materialize_inputs, roster_with

DOCUMENTS = 5
SETTINGS = {"limit": DOCUMENTS, "max_gen_toks": 96}  # the demo's budget
# gsm8k_cot's filters with its flexible extraction taking the first number of the answer, not the last
FILTERS = [
    {"name": "strict-match", "filter": [{"function": "regex", "regex_pattern": r"The answer is (\-?[0-9\.\,]+)."},
                                        {"function": "take_first"}]},
    {"name": "first-number", "filter": [{"function": "regex", "group_select": 0,
                                         "regex_pattern": r"(-?[$0-9.,]{2,})|(-?[0-9]+)"}, {"function": "take_first"}]},
]  # fmt: skip


@pytest.fixture
def model_calls(monkeypatch):
    """The local model's request calls, by method, as the engine makes them."""
    calls = {"generate": 0, "loglikelihoods": 0}
    for method in calls:
        original = getattr(LocalCausalLM, method)

        def counted(self, *args, _original=original, _method=method, **kwargs):
            calls[_method] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(LocalCausalLM, method, counted)
    return calls


def rows(warehouse, sql: str) -> list[tuple]:
    with warehouse.get_connection() as conn:
        return conn.execute(sql).fetchall()


def test_a_changed_answer_extraction_is_rescored_from_kept_answers_as_the_harness_scores_them(
    tmp_path, warehouse, model_calls, monkeypatch
):
    benchmarks = tmp_path / "benchmarks"
    shutil.copytree(DATA_BENCHMARKS, benchmarks)
    monkeypatch.setenv("EVAL_BENCHMARKS_DIR", str(benchmarks))
    roster = roster_with(tmp_path / "roster", "smollm2", model=DEFAULT_LOCAL_MODEL)
    assert materialize_inputs(warehouse, "gsm8k_cot", DOCUMENTS).success
    assert materialize_evaluation(warehouse, "gsm8k_cot", "smollm2", roster, SETTINGS).success
    assert model_calls["generate"] > 0  # the first evaluation asks the model
    answers = rows(warehouse, "SELECT * FROM answers ORDER BY ALL")

    declaration = benchmarks / "gsm8k_cot.yaml"
    declared = yaml.safe_load(declaration.read_text())
    declaration.write_text(yaml.safe_dump({**declared, "overrides": {"gsm8k_cot": {"filter_list": FILTERS}}}))
    model_calls.update(generate=0, loglikelihoods=0)
    assert materialize_evaluation(warehouse, "gsm8k_cot", "smollm2", roster, SETTINGS).success

    assert model_calls == {"generate": 0, "loglikelihoods": 0}
    assert rows(warehouse, "SELECT * FROM answers ORDER BY ALL") == answers
    ours = {
        (doc_id, filter_name): (json.loads(arguments), json.loads(responses), json.loads(filtered), json.loads(metrics))
        for doc_id, filter_name, arguments, responses, filtered, metrics in rows(
            warehouse,
            """SELECT doc_id, filter, arguments::VARCHAR, responses::VARCHAR, filtered_responses::VARCHAR,
                      metrics::VARCHAR
               FROM samples WHERE task = 'gsm8k_cot' AND settings_key LIKE '%overrides%'""",
        )
    }
    ours_filters = {name for _, name in ours}
    assert ours_filters == {"strict-match", "first-number"} and len(ours) == 2 * DOCUMENTS

    # the harness's own scoring of the same answers: its filters and metric, replaying our answers
    given = tmp_path / "answers.jsonl"
    given.write_text(
        "".join(
            json.dumps({"request_type": "generate_until", "arguments": request, "response": answer}) + "\n"
            for (_, name), (arguments, responses, _, _) in ours.items()
            if name == "strict-match"
            for request, (answer,) in zip(arguments, responses, strict=True)  # greedy: one answer a request
        )
    )
    run = {
        "name": "replayed",
        "model": {"replay": str(given)},
        "tasks": ["gsm8k_cot"],
        "num_fewshot": 0,
        "limit": DOCUMENTS,
        "data_files": {"gsm8k_cot": {"test": str(benchmarks / "gsm8k.jsonl")}},
        "overrides": {"gsm8k_cot": {"filter_list": FILTERS}},
    }
    harness = run_alone([run], tmp_path / "harness")["replayed"]
    assert not harness.platform_imported
    for (doc_id, name), (_, _, filtered, metrics) in ours.items():
        theirs = harness.samples[("gsm8k_cot", doc_id, name)]
        assert filtered == theirs["filtered_resps"], (doc_id, name)
        assert metrics["exact_match"] == theirs["exact_match"], (doc_id, name)
    results = rows(
        warehouse,
        """SELECT filter, value FROM results
           WHERE task = 'gsm8k_cot' AND metric = 'exact_match' AND settings_key LIKE '%overrides%'""",
    )
    assert dict(results) == {name: harness.results["gsm8k_cot"][f"exact_match,{name}"] for name in ours_filters}
