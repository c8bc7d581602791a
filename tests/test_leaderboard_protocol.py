"""The leaderboard protocol: few-shot prompts laid out and drawn by lm-evaluation-harness's own
tasks, its metrics (acc_norm, mc2, GSM8K's filters) from its own process_results, and the
open_llm_leaderboard_v1 job end to end into DuckDB. The shared-prefix cache's log-likelihoods at the
leaderboard's shots are compared with the harness's own model in test_lm_eval_parity.py."""

import json
import math
import random

import pytest
from dagster import DagsterInstance, Definitions

from eval_platform.benchmarks.harness_format import harness_documents, harness_item_scores, harness_items
from eval_platform.benchmarks.prediction import ProgressLog
from eval_platform.benchmarks.protocols import PROTOCOLS
from eval_platform.benchmarks.specs import BENCHMARKS, preprocess_rows
from tests.conftest import DATA_BENCHMARKS


def rows_of(path, count=None):
    lines = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    return [json.loads(line) for line in lines[:count]]


# --- few-shot sampling and layout: the harness's own task code -----------------------------------


def requests_of(name, rows, pool=(), shots=0):
    """The harness's requests for raw rows (and a few-shot pool), by row, at `shots` shots."""
    documents = harness_documents(
        BENCHMARKS[name], [(str(i), r) for i, r in enumerate(rows)], [(f"f{i}", r) for i, r in enumerate(pool)], shots
    )
    items = harness_items(documents)
    return [items[str(i)] for i in range(len(rows))]


def test_few_shot_contexts_are_laid_out_as_the_harness_lays_them_out():
    arc = [
        {
            "id": f"q{i}",
            "question": f"Q{i}?",
            "choices": {"label": ["A", "B"], "text": [f"yes{i}", f"no{i}"]},
            "answerKey": "B",
        }
        for i in range(3)
    ]
    [item] = requests_of("arc_challenge", arc[2:], arc[:2], shots=2)
    assert sorted(item.fewshot_ids) == ["f0", "f1"]
    shots = "".join(f"Question: Q{i}?\nAnswer: no{i}\n\n" for i in (int(f[1]) for f in item.fewshot_ids))
    assert item.requests() == [(shots + "Question: Q2?\nAnswer:", " yes2"), (shots + "Question: Q2?\nAnswer:", " no2")]
    mmlu = {"question": " What? ", "subject": "high_school_physics", "choices": ["a ", "b", "c", "d"], "answer": 1}
    [item] = requests_of("mmlu", [mmlu], [mmlu], shots=1)
    example = "What?\nA. a \nB. b\nC. c\nD. d\nAnswer:"
    assert item.requests()[0] == (
        "The following are multiple choice questions (with answers) about high school "
        f"physics.\n\n{example} B\n\n{example}",
        " A",
    )  # choices verbatim, trailing space kept
    wino = {"sentence": "Tom gave Bob a book because _ was kind.", "option1": "Tom", "option2": "Bob", "answer": "1"}
    examples = [
        {"sentence": f"Ann met Eve since _ called{mark}", "option1": "Ann", "option2": "Eve", "answer": "2"}
        for mark in ".!"
    ]  # the harness draws one more than asked where the pool could hold the row
    [item] = requests_of("winogrande", [wino], examples, shots=1)
    shot = f"Ann met Eve since Eve called{'.!'[int(item.fewshot_ids[0][1])]}\n\n"
    assert item.requests() == [
        (shot + "Tom gave Bob a book because Tom", " was kind."),
        (shot + "Tom gave Bob a book because Bob", " was kind."),
    ]
    gsm = {"question": "1+1?", "answer": "One and one.\n#### 2"}
    [item] = requests_of("gsm8k", [gsm], [gsm], shots=1)
    assert item.prompt == "Question: 1+1?\nAnswer: One and one.\n#### 2\n\nQuestion: 1+1?\nAnswer:"
    assert item.generation_kwargs["until"] == ["Question:", "</s>", "<|im_end|>"] and not item.continuations


def test_prompts_are_built_for_zero_and_the_leaderboard_shots_of_each_row():
    spec = BENCHMARKS["arc_challenge"]
    rows = [(r.get("id"), r) for r in rows_of(DATA_BENCHMARKS / spec.data_file, 3)]
    pool = [(r.get("id"), r) for r in rows_of(DATA_BENCHMARKS / "fewshot" / spec.fewshot.data_file)]
    prepared = preprocess_rows(spec, rows, pool)
    assert sorted({r["num_fewshot"] for r in prepared.requests}) == [0, 25]
    rng = random.Random(1234)  # the harness's few-shot seed: row i gets the generator's i-th sample
    draws = [rng.sample(range(len(pool)), 25) for _ in range(3)]
    for request in prepared.requests:
        if request["num_fewshot"] == 25:
            position = [p["prompt_id"] for p in prepared.prompts].index(request["prompt_id"])
            assert list(request["item"].fewshot_ids) == [pool[i][0] for i in draws[position]]
            assert request["item"].contexts[0].count("Question: ") == 26
    hellaswag = preprocess_rows(BENCHMARKS["hellaswag"], [("0", rows_of(DATA_BENCHMARKS / "hellaswag.jsonl", 1)[0])])
    assert "Rowan/hellaswag train" in hellaswag.unavailable_shots[10]


def test_without_a_few_shot_split_the_harness_never_shows_a_row_its_own_answer():
    """Winogrande's few-shot examples come from the evaluated split itself: the harness draws one
    more and drops the evaluated row."""
    rows = rows_of(DATA_BENCHMARKS / "winogrande.jsonl", 6)
    for row, item in zip(rows, requests_of("winogrande", rows, rows, shots=5), strict=False):
        assert len(item.fewshot_ids) == 5 and f"f{rows.index(row)}" not in item.fewshot_ids


# --- metrics: the harness's own process_results over stored answers ------------------------------


def harness_scores(name, rows, answers):
    """The harness's per-item metrics of answers (log-likelihoods or texts) to raw rows."""
    spec = BENCHMARKS[name]
    prepared = preprocess_rows(spec, [(str(i), r) for i, r in enumerate(rows)])
    stored = [
        {
            **prompt,
            "row_json": json.dumps(row),
            "predicted": "?",
            "predicted_norm": "?",
            "choice_loglikelihoods": answer if isinstance(answer, list) else None,
            "output_text": answer if isinstance(answer, str) else None,
        }
        for prompt, row, answer in zip(prepared.prompts, rows, answers, strict=False)
    ]
    scored = harness_item_scores(spec, stored)
    return [scored[prompt["prompt_id"]] for prompt in prepared.prompts]


def test_acc_norm_divides_by_the_length_of_the_choice_without_the_delimiter():
    # per character: -2.1/2 = -1.05 < -4.0/4 = -1.0; counting the leading space it would be -0.7 > -0.8
    row = {"id": "x", "question": "Q?", "choices": {"label": ["A", "B"], "text": ["ab", "abcd"]}, "answerKey": "B"}
    [scores] = harness_scores("arc_easy", [row], [[-2.1, -4.0]])
    assert (scores["acc"].value, scores["acc_norm"].value) == (0.0, 1.0)


def test_mc2_is_the_normalised_probability_mass_on_the_true_answers():
    row = {
        "question": "Q?",
        "mc1_targets": {"choices": ["x", "y", "z"], "labels": [1, 0, 0]},
        "mc2_targets": {"choices": ["x", "y", "z"], "labels": [1, 0, 1]},
    }
    [scores] = harness_scores("truthfulqa_mc2", [row], [[math.log(0.25), math.log(0.15), math.log(0.1)]])
    assert scores["mc2"].value == pytest.approx(0.35 / 0.5)


@pytest.mark.parametrize(
    "text, strict, flexible, hit_strict, hit_flexible",
    [
        ("She pays $1,234.\n#### 1,234.", "1,234.", "1,234.", True, True),
        ("The answer is 1234", "[invalid]", "1234", False, True),
        ("#### 12\nQuestion: more 7", "12", "7", False, False),
    ],
)
def test_gsm8k_filters_and_exact_match_follow_the_harness(text, strict, flexible, hit_strict, hit_flexible):
    [scores] = harness_scores("gsm8k", [{"question": "Q?", "answer": "Some steps.\n#### 1234"}], [text])
    assert (scores["strict-match"].predicted, scores["flexible-extract"].predicted) == (strict, flexible)
    assert (scores["strict-match"].value, scores["flexible-extract"].value) == (float(hit_strict), float(hit_flexible))


def test_progress_reports_items_rate_and_time_left():
    lines = []
    progress = ProgressLog(lines.append, "arc_challenge loglikelihood (harness, 25-shot)", every_s=0)
    progress(10, 40)
    progress(40, 40)
    assert len(lines) == 2 and "10/40 items" in lines[0] and "items/s" in lines[0] and "left" in lines[0]


# --- the protocol, end to end ---------------------------------------------------------------------


def test_open_llm_leaderboard_v1_materialises_with_its_shots(warehouse, tmp_path):
    from eval_platform.benchmarks.partitions import benchmark_partitions, evaluation_key, roster_partitions
    from eval_platform.benchmarks.store import BenchmarkStore
    from eval_platform.common.resources import LanguageModelResource, ModelGatewayResource
    from eval_platform.definitions import defs
    from tests.evaluation import roster_with

    protocol = PROTOCOLS["open_llm_leaderboard_v1"]
    test_defs = Definitions(
        assets=list(defs.assets),
        jobs=list(defs.jobs),
        resources={
            "warehouse": warehouse,
            "evaluation_model": LanguageModelResource(max_new_tokens=8),
            "gateway": ModelGatewayResource(),
            "roster": roster_with(tmp_path, "smollm2"),
        },
    )
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(roster_partitions.name, ["smollm2"])
    instance.add_dynamic_partitions(benchmark_partitions.name, [task.benchmark for task in protocol.tasks])
    job = test_defs.resolve_job_def(protocol.name)
    key = evaluation_key("mmlu", "smollm2")
    assert (
        job.get_run_config_for_partition_key(key)["ops"]["benchmark_predictions"]["config"]["protocol"] == protocol.name
    )
    for task in protocol.tasks:
        assert (
            test_defs.resolve_job_def("benchmark_inputs")
            .execute_in_process(
                partition_key=task.benchmark,
                instance=instance,
                run_config={"ops": {"benchmark_raw_rows": {"config": {"limit": 3}}}},
            )
            .success
        )
    zero_shot = test_defs.resolve_job_def("model_evaluation").execute_in_process(
        partition_key=evaluation_key("arc_challenge", "smollm2"), instance=instance
    )
    assert zero_shot.success  # a spec's benchmark: the one job's harness assets are skipped
    assert {e.asset_key.path[-1] for e in zero_shot.get_asset_materialization_events()} == {
        "benchmark_predictions",
        "benchmark_scores",
        "model_comparison",
    }
    assert "harness_model_comparison" in {
        e.step_key for e in zero_shot.all_events if e.event_type_value == "STEP_SKIPPED"
    }
    outcomes, logs = {}, []
    for task in protocol.tasks:
        result = job.execute_in_process(
            partition_key=evaluation_key(task.benchmark, "smollm2"),
            raise_on_error=False,
            instance=instance,
            run_config={
                "ops": {"benchmark_predictions": {"config": {"protocol": protocol.name, "harness_max_new_tokens": 16}}}
            },
        )
        outcomes[task.benchmark] = result.success
        logs += [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert outcomes == {task.benchmark: task.benchmark != "hellaswag" for task in protocol.tasks}
    assert any("items/s" in line and "left" in line for line in logs)
    scored_protocols = test_defs.resolve_job_def("score_protocols").execute_in_process(instance=instance)
    assert scored_protocols.success
    metadata = {
        event.asset_key.path[-1]: event.materialization.metadata
        for event in scored_protocols.get_asset_materialization_events()
    }
    with warehouse.store(BenchmarkStore) as store:
        results = store.load_protocol_results(protocol.name)
    scored = results[results["status"] == "scored"]
    assert dict(zip(scored["benchmark"], scored["num_fewshot"], strict=False)) == {
        "arc_challenge": 25,
        "mmlu": 5,
        "truthfulqa_mc2": 0,
        "winogrande": 5,
        "gsm8k": 5,
    }
    average = results[results["benchmark"] == "average"].iloc[0]
    assert average["status"] == "partial: 5 of 6 tasks (missing hellaswag)"
    assert average["accuracy"] == pytest.approx(scored["accuracy"].mean())
    # The UI's metadata labels the average as partial, per model; the leaderboard shows it so.
    assert metadata["protocol_scores"][
        f"{protocol.name}/smollm2/partial average (5 of 6 tasks)"
    ].value == pytest.approx(average["accuracy"])
    assert f"{protocol.name}/smollm2/average" not in metadata["protocol_scores"]
    assert "partial: 5 of 6 tasks (missing hellaswag)" in metadata["leaderboard"]["leaderboard"].value
    with warehouse.get_connection() as conn:
        wide = conn.execute(
            "SELECT model, arc_challenge, open_llm_leaderboard_v1, open_llm_leaderboard_v1_status FROM leaderboard_wide"
        ).fetchall()
    arc_25 = scored[scored["benchmark"] == "arc_challenge"]["accuracy"].iloc[0]
    assert wide == [("smollm2", pytest.approx(arc_25), pytest.approx(average["accuracy"]), average["status"])]
    with warehouse.get_connection() as conn:  # zero-shot and 25-shot scores of the same model side by side
        shots = conn.execute(
            "SELECT DISTINCT num_fewshot FROM scores WHERE benchmark = 'arc_challenge' "
            "AND mode = 'loglikelihood' ORDER BY 1"
        ).fetchall()
        assert shots == [(0,), (25,)]
        contexts, ids = conn.execute(
            "SELECT harness_contexts, fewshot_ids FROM score_lineage "
            "WHERE benchmark = 'arc_challenge' AND num_fewshot = 25 LIMIT 1"
        ).fetchone()
    assert contexts[0].count("Question: ") == 26 and len(ids) == 25
