"""The leaderboard protocol: few-shot prompts laid out and drawn as lm-evaluation-harness does,
its metrics (acc_norm, mc2, GSM8K's filters), the shared-prefix cache against the naive loop on
every benchmark, and the open_llm_leaderboard_v1 job end to end into DuckDB."""

import json
import math
import random

import pytest
from dagster import DagsterInstance, Definitions

from eval_platform.benchmarks.harness import (
    FirstNSampler, RandomSampler, gsm8k_exact_match, gsm8k_extractions, harness_item,
)
from eval_platform.benchmarks.prediction import ProgressLog
from eval_platform.benchmarks.protocols import PROTOCOLS
from eval_platform.benchmarks.scoring import loglikelihood_item_scores
from eval_platform.benchmarks.specs import BENCHMARKS, ParsedRow, preprocess_rows
from eval_platform.common.models import LoglikelihoodRequest
from eval_platform.common.reproducibility import LOGLIKELIHOOD_TOLERANCE
from tests.conftest import DATA_BENCHMARKS
from tests.reference_scoring import naive_loglikelihoods


def rows_of(path, count=None):
    lines = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    return [json.loads(line) for line in lines[:count]]


# --- few-shot sampling and layout ------------------------------------------------------------------

def test_random_sampler_gives_row_i_the_ith_draw_of_one_generator():
    pool = [ParsedRow(f"q{i}") for i in range(10)]
    docs = [(0, ParsedRow("a")), (1, ParsedRow("b")), (5, ParsedRow("c"))]
    rng = random.Random(1234)
    draws = [rng.sample(range(10), 3) for _ in range(6)]
    assert RandomSampler().select(pool, docs, 3) == [draws[0], draws[1], draws[5]]


def test_without_few_shot_and_test_splits_the_harness_draws_one_more_and_drops_the_evaluated_doc():
    pool = [ParsedRow(f"q{i}") for i in range(10)]
    rng = random.Random(1234)
    draws = [rng.sample(range(10), 4) for _ in range(2)]
    sampler = RandomSampler(excludes_evaluated_doc=True)
    assert sampler.select(pool, [(0, ParsedRow("a")), (1, ParsedRow("b"))], 3) == [draws[0][:3], draws[1][:3]]
    evaluated = pool[draws[0][0]]  # the evaluated row is in the pool: it is dropped, the fourth draw kept
    assert sampler.select(pool, [(0, evaluated)], 3) == [draws[0][1:4]]


def test_first_n_takes_the_first_examples_of_the_same_subject():
    pool = [ParsedRow(f"q{i}", extras={"subject": "algebra" if i % 2 else "anatomy"}) for i in range(8)]
    doc = ParsedRow("q", extras={"subject": "algebra"})
    assert FirstNSampler("subject").select(pool, [(0, doc)], 3) == [[1, 3, 5]]
    with pytest.raises(ValueError, match="only 4 few-shot examples for subject 'algebra', 5 requested"):
        FirstNSampler("subject").select(pool, [(0, doc)], 5)


def test_few_shot_contexts_are_laid_out_as_the_harness_lays_them_out():
    arc = [{"question": f"Q{i}?", "choices": {"label": ["A", "B"], "text": [f"yes{i}", f"no{i}"]}, "answerKey": "B"}
           for i in range(3)]
    docs = [BENCHMARKS["arc_challenge"].parse(row) for row in arc]
    item = harness_item(BENCHMARKS["arc_challenge"].harness, docs[2], docs[:2])
    assert item.requests() == [
        ("Question: Q0?\nAnswer: no0\n\nQuestion: Q1?\nAnswer: no1\n\nQuestion: Q2?\nAnswer:", " yes2"),
        ("Question: Q0?\nAnswer: no0\n\nQuestion: Q1?\nAnswer: no1\n\nQuestion: Q2?\nAnswer:", " no2")]
    mmlu = {"question": " What? ", "subject": "high_school_physics", "choices": ["a ", "b", "c", "d"], "answer": 1}
    doc = BENCHMARKS["mmlu"].parse(mmlu)
    (context, continuation), *_ = harness_item(BENCHMARKS["mmlu"].harness, doc, [doc]).requests()
    example = "What?\nA. a \nB. b\nC. c\nD. d\nAnswer:"
    assert context == ("The following are multiple choice questions (with answers) about high school physics.\n\n"
                       f"{example} B\n\n{example}") and continuation == " A"  # choices verbatim, trailing space kept
    wino = {"sentence": "Tom gave Bob a book because _ was kind.", "option1": "Tom", "option2": "Bob", "answer": "1"}
    doc = BENCHMARKS["winogrande"].parse(wino)
    requests = harness_item(BENCHMARKS["winogrande"].harness, doc, [doc]).requests()
    shot = "Tom gave Bob a book because Tom was kind.\n\n"
    assert requests == [(shot + "Tom gave Bob a book because Tom", " was kind."),
                        (shot + "Tom gave Bob a book because Bob", " was kind.")]
    gsm = {"question": "1+1?", "answer": "One and one.\n#### 2"}
    doc = BENCHMARKS["gsm8k"].parse(gsm)
    item = harness_item(BENCHMARKS["gsm8k"].harness, doc, [doc])
    assert item.prompt == "Question: 1+1?\nAnswer: One and one.\n#### 2\n\nQuestion: 1+1?\nAnswer:"
    assert item.target == "One and one.\n#### 2"


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
            assert request["fewshot_ids"] == [pool[i][0] for i in draws[position]]
            assert request["item"].prefix.count("Question: ") == 25
    hellaswag = preprocess_rows(BENCHMARKS["hellaswag"], [("0", rows_of(DATA_BENCHMARKS / "hellaswag.jsonl", 1)[0])])
    assert "Rowan/hellaswag train" in hellaswag.unavailable_shots[10]


# --- metrics --------------------------------------------------------------------------------------

def test_acc_norm_divides_by_the_length_of_the_choice_without_the_delimiter():
    # per character: -2.1/2 = -1.05 < -4.0/4 = -1.0; counting the leading space it would be -0.7 > -0.8
    scores = loglikelihood_item_scores([-2.1, -4.0], (1,), ("ab", "abcd"), ["A", "B"], ("acc", "acc_norm"))
    assert (scores["acc"].value, scores["acc_norm"].value) == (0.0, 1.0)
    assert scores["acc_norm"].predicted == "B" and scores["acc_norm"].reference == "B"


def test_mc2_is_the_normalised_probability_mass_on_the_true_answers():
    scores = loglikelihood_item_scores([math.log(0.25), math.log(0.15), math.log(0.1)], (0, 2), ("x", "y", "z"),
                                       ["A", "B", "C"], ("mc2",))
    assert scores["mc2"].value == pytest.approx(0.35 / 0.5)


@pytest.mark.parametrize("text, strict, flexible, hit_strict, hit_flexible", [
    ("She pays $1,234.\n#### 1,234.", "1,234.", "1,234.", True, True),
    ("The answer is 1234", "[invalid]", "1234", False, True),
    ("#### 12\nQuestion: more 7", "12", "7", False, False),
])
def test_gsm8k_filters_and_exact_match_follow_the_harness(text, strict, flexible, hit_strict, hit_flexible):
    assert gsm8k_extractions(text) == (strict, flexible)
    reference = "Some steps.\n#### 1234"
    assert (gsm8k_exact_match(strict, reference), gsm8k_exact_match(flexible, reference)) == (hit_strict, hit_flexible)


# --- the shared-prefix cache ----------------------------------------------------------------------

@pytest.mark.parametrize("name", [n for n, spec in BENCHMARKS.items() if "loglikelihood" in spec.modes])
def test_shared_prefix_cache_equals_the_naive_loop(name, local_model):
    spec = BENCHMARKS[name]
    rows = [(str(i), r) for i, r in enumerate(rows_of(DATA_BENCHMARKS / spec.data_file, 3))]
    pool = ([(str(i), r) for i, r in enumerate(rows_of(DATA_BENCHMARKS / "fewshot" / spec.fewshot.data_file))]
            if spec.fewshot and spec.fewshot.data_file else [])
    prepared = preprocess_rows(spec, rows, pool)
    shots = max(r["num_fewshot"] for r in prepared.requests)
    requests = [LoglikelihoodRequest(c, k) for r in prepared.requests if r["num_fewshot"] == shots
                for c, k in r["item"].requests()]
    assert local_model.loglikelihoods(requests, batch_size=4) == pytest.approx(
        naive_loglikelihoods(local_model, requests), abs=LOGLIKELIHOOD_TOLERANCE)


def test_progress_reports_items_rate_and_time_left():
    lines = []
    progress = ProgressLog(lines.append, "arc_challenge loglikelihood (harness, 25-shot)", every_s=0)
    progress(10, 40)
    progress(40, 40)
    assert len(lines) == 2 and "10/40 items" in lines[0] and "items/s" in lines[0] and "left" in lines[0]


# --- the protocol, end to end ---------------------------------------------------------------------

def test_open_llm_leaderboard_v1_materialises_with_its_shots(warehouse, tmp_path):
    from eval_platform.benchmarks.partitions import evaluation_key, roster_partitions
    from eval_platform.benchmarks.store import BenchmarkStore
    from eval_platform.common.resources import LanguageModelResource, ModelGatewayResource
    from eval_platform.definitions import defs
    from tests.evaluation import roster_with

    protocol = PROTOCOLS["open_llm_leaderboard_v1"]
    test_defs = Definitions(assets=list(defs.assets), jobs=list(defs.jobs), resources={
        "warehouse": warehouse, "evaluation_model": LanguageModelResource(max_new_tokens=8),
        "gateway": ModelGatewayResource(), "roster": roster_with(tmp_path, "smollm2")})
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(roster_partitions.name, ["smollm2"])
    job = test_defs.resolve_job_def(protocol.name)
    key = evaluation_key("mmlu", "smollm2")
    assert job.get_run_config_for_partition_key(key)["ops"]["benchmark_predictions"]["config"]["protocol"] == protocol.name
    for task in protocol.tasks:
        assert test_defs.resolve_job_def("benchmark_inputs").execute_in_process(
            partition_key=task.benchmark, instance=instance,
            run_config={"ops": {"benchmark_raw_rows": {"config": {"limit": 3}}}}).success
    zero_shot = test_defs.resolve_job_def("model_evaluation").execute_in_process(
        partition_key=evaluation_key("arc_challenge", "smollm2"), instance=instance)
    assert zero_shot.success
    outcomes, logs = {}, []
    for task in protocol.tasks:
        result = job.execute_in_process(partition_key=evaluation_key(task.benchmark, "smollm2"), raise_on_error=False,
                                        instance=instance, run_config={"ops": {"benchmark_predictions": {"config": {
                                            "protocol": protocol.name, "harness_max_new_tokens": 16}}}})
        outcomes[task.benchmark] = result.success
        logs += [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert outcomes == {task.benchmark: task.benchmark != "hellaswag" for task in protocol.tasks}
    assert any("items/s" in line and "left" in line for line in logs)
    scored_protocols = test_defs.resolve_job_def("score_protocols").execute_in_process(instance=instance)
    assert scored_protocols.success
    metadata = {event.asset_key.path[-1]: event.materialization.metadata
                for event in scored_protocols.get_asset_materialization_events()}
    with warehouse.store(BenchmarkStore) as store:
        results = store.load_protocol_results(protocol.name)
    scored = results[results["status"] == "scored"]
    assert dict(zip(scored["benchmark"], scored["num_fewshot"])) == {
        "arc_challenge": 25, "mmlu": 5, "truthfulqa_mc2": 0, "winogrande": 5, "gsm8k": 5}
    average = results[results["benchmark"] == "average"].iloc[0]
    assert average["status"] == "partial: 5 of 6 tasks (missing hellaswag)"
    assert average["accuracy"] == pytest.approx(scored["accuracy"].mean())
    # The UI's metadata labels the average as partial, per model; the leaderboard shows it so.
    assert metadata["protocol_scores"][f"{protocol.name}/smollm2/partial average (5 of 6 tasks)"].value == \
        pytest.approx(average["accuracy"])
    assert f"{protocol.name}/smollm2/average" not in metadata["protocol_scores"]
    assert "partial: 5 of 6 tasks (missing hellaswag)" in metadata["leaderboard"]["leaderboard"].value
    with warehouse.get_connection() as conn:
        wide = conn.execute("SELECT model, arc_challenge, open_llm_leaderboard_v1, open_llm_leaderboard_v1_status "
                            "FROM leaderboard_wide").fetchall()
    arc_25 = scored[scored["benchmark"] == "arc_challenge"]["accuracy"].iloc[0]
    assert wide == [("smollm2", pytest.approx(arc_25), pytest.approx(average["accuracy"]), average["status"])]
    with warehouse.get_connection() as conn:  # zero-shot and 25-shot scores of the same model side by side
        shots = conn.execute("SELECT DISTINCT num_fewshot FROM scores WHERE benchmark = 'arc_challenge' "
                             "AND mode = 'loglikelihood' ORDER BY 1").fetchall()
        assert shots == [(0,), (25,)]
        prefix = conn.execute("SELECT harness_prefix, fewshot_ids FROM score_lineage WHERE benchmark = 'arc_challenge' "
                              "AND num_fewshot = 25 LIMIT 1").fetchone()
    assert prefix[0].count("Question: ") == 25 and len(prefix[1]) == 25
