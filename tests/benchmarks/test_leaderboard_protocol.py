"""The leaderboard protocol: few-shot prompts laid out and drawn by lm-evaluation-harness's own
tasks, its metrics (acc_norm, mc2, GSM8K's filters) from its own process_results, and the
open_llm_leaderboard_v1 job end to end into DuckDB. The shared-prefix cache's log-likelihoods at the
leaderboard's shots are compared with the harness's own model in test_lm_eval_parity.py."""

import json
import math
import random

import pytest
from dagster import DagsterInstance, Definitions

from eval_platform.benchmarks.answering import AnswerProgress
from eval_platform.benchmarks.declarations import declared_benchmarks
from eval_platform.benchmarks.documents import build_documents
from eval_platform.benchmarks.evaluation import ProgressLog
from eval_platform.benchmarks.leaderboard import measured_label
from eval_platform.benchmarks.parsers import parser
from eval_platform.benchmarks.protocols import declared_protocols
from eval_platform.benchmarks.records import request_key
from eval_platform.benchmarks.solvers import EvaluationJob, evaluate
from eval_platform.benchmarks.solvers.harness import built_requests
from eval_platform.environment import environment
from tests.conftest import DATA_BENCHMARKS

BENCHMARKS = declared_benchmarks(environment().benchmarks_dir)


def rows_of(path, count=None):
    lines = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    return [json.loads(line) for line in lines[:count]]


# --- few-shot sampling and layout: the harness's own task code -----------------------------------


def job_of(name, rows, pool=(), shots=0, model=None):
    """The harness solver's job on raw rows (ids 0, 1, ...) and a few-shot pool (ids f0, f1, ...)."""
    benchmark = BENCHMARKS[name]
    built = build_documents(
        benchmark, [(str(i), r) for i, r in enumerate(rows)], [(f"f{i}", r) for i, r in enumerate(pool)]
    )
    settings = benchmark.evaluation_settings().model_copy(update={"num_fewshot": shots})
    return EvaluationJob(benchmark, settings, model, documents=built.documents, pool=built.pool)


def requests_of(name, rows, pool=(), shots=0):
    """The harness's requests for raw rows (and a few-shot pool), by row, at `shots` shots, with the
    few-shot rows drawn for each."""
    return list(built_requests(job_of(name, rows, pool, shots)).values())


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
    [(requests, fewshot_ids)] = requests_of("arc_challenge", arc[2:], arc[:2], shots=2)
    assert sorted(fewshot_ids) == ["f0", "f1"]
    shots = "".join(f"Question: Q{i}?\nAnswer: no{i}\n\n" for i in (int(f[1]) for f in fewshot_ids))
    assert requests == [(shots + "Question: Q2?\nAnswer:", " yes2"), (shots + "Question: Q2?\nAnswer:", " no2")]
    mmlu = {"question": " What? ", "subject": "high_school_physics", "choices": ["a ", "b", "c", "d"], "answer": 1}
    [(requests, _)] = requests_of("mmlu", [mmlu], [mmlu], shots=1)
    example = "What?\nA. a \nB. b\nC. c\nD. d\nAnswer:"
    assert requests[0] == (
        "The following are multiple choice questions (with answers) about high school "
        f"physics.\n\n{example} B\n\n{example}",
        " A",
    )  # choices verbatim, trailing space kept
    wino = {"sentence": "Tom gave Bob a book because _ was kind.", "option1": "Tom", "option2": "Bob", "answer": "1"}
    examples = [
        {"sentence": f"Ann met Eve since _ called{mark}", "option1": "Ann", "option2": "Eve", "answer": "2"}
        for mark in ".!"
    ]  # the harness draws one more than asked where the pool could hold the row
    [(requests, fewshot_ids)] = requests_of("winogrande", [wino], examples, shots=1)
    shot = f"Ann met Eve since Eve called{'.!'[int(fewshot_ids[0][1])]}\n\n"
    assert requests == [
        (shot + "Tom gave Bob a book because Tom", " was kind."),
        (shot + "Tom gave Bob a book because Bob", " was kind."),
    ]
    gsm = {"question": "1+1?", "answer": "One and one.\n#### 2"}
    [([(prompt, generation_kwargs)], _)] = requests_of("gsm8k", [gsm], [gsm], shots=1)
    assert prompt == "Question: 1+1?\nAnswer: One and one.\n#### 2\n\nQuestion: 1+1?\nAnswer:"
    assert generation_kwargs["until"] == ["Question:", "</s>", "<|im_end|>"]


@pytest.mark.slow
def test_the_leaderboard_shots_draw_the_harness_seeds_examples_for_each_row(local_model):
    arc = BENCHMARKS["arc_challenge"]
    rows = rows_of(DATA_BENCHMARKS / "arc_challenge.jsonl", 3)
    pool = rows_of(DATA_BENCHMARKS / "fewshot" / "arc_challenge_train.jsonl")
    rng = random.Random(1234)  # the harness's few-shot seed: row i gets the generator's i-th sample
    draws = [rng.sample(range(len(pool)), 25) for _ in range(3)]
    for (requests, fewshot_ids), drawn in zip(requests_of("arc_challenge", rows, pool, shots=25), draws, strict=True):
        assert fewshot_ids == [f"f{i}" for i in drawn]
        assert requests[0][0].count("Question: ") == 26
    hellaswag = job_of("hellaswag", rows_of(DATA_BENCHMARKS / "hellaswag.jsonl", 1), shots=10, model=local_model)
    with pytest.raises(
        ValueError, match=r"no few-shot examples for 10-shot: load its few-shot split \(Rowan/hellaswag"
    ):
        evaluate("harness", hellaswag)
    assert arc.fewshot is not None and arc.fewshot.file is not None


def test_without_a_few_shot_split_the_harness_never_shows_a_row_its_own_answer():
    """Winogrande's few-shot examples come from the evaluated split itself: the harness draws one
    more and drops the evaluated row."""
    rows = rows_of(DATA_BENCHMARKS / "winogrande.jsonl", 6)
    for position, (_, fewshot_ids) in enumerate(requests_of("winogrande", rows, rows, shots=5)):
        assert len(fewshot_ids) == 5 and f"f{position}" not in fewshot_ids


# --- metrics: the harness's own filters and process_results over stored answers -------------------


def harness_scores(name, rows, answers, model):
    """The harness's per-document samples of answers (each choice's log-likelihood, or a text) to raw
    rows, every answer stored (so the model computes none)."""
    job = job_of(name, rows, model=model)
    kind = "loglikelihood" if parser(BENCHMARKS[name].parser).multiple_choice else "generate_until"
    stored = {}
    for (requests, _), answer in zip(built_requests(job).values(), answers, strict=True):
        for position, args in enumerate(requests):
            stored[request_key(kind, args)] = [answer[position], False] if kind == "loglikelihood" else answer
    evaluation = evaluate("harness", EvaluationJob(**{**job.__dict__, "stored": stored}))
    assert evaluation.computed == 0
    return evaluation.samples


def test_acc_norm_divides_by_the_length_of_the_choice_without_the_delimiter(local_model):
    # per character: -2.1/2 = -1.05 < -4.0/4 = -1.0; counting the leading space it would be -0.7 > -0.8
    row = {"id": "x", "question": "Q?", "choices": {"label": ["A", "B"], "text": ["ab", "abcd"]}, "answerKey": "B"}
    [sample] = harness_scores("arc_easy", [row], [[-2.1, -4.0]], local_model)
    assert (sample.metrics["acc"], sample.metrics["acc_norm"]) == (0.0, 1.0)


def test_mc2_is_the_normalised_probability_mass_on_the_true_answers(local_model):
    row = {
        "question": "Q?",
        "mc1_targets": {"choices": ["x", "y", "z"], "labels": [1, 0, 0]},
        "mc2_targets": {"choices": ["x", "y", "z"], "labels": [1, 0, 1]},
    }
    [sample] = harness_scores("truthfulqa_mc2", [row], [[math.log(0.25), math.log(0.15), math.log(0.1)]], local_model)
    assert sample.metrics["acc"] == pytest.approx(0.35 / 0.5)


@pytest.mark.parametrize(
    "text, strict, flexible, hit_strict, hit_flexible",
    [
        ("She pays $1,234.\n#### 1,234.", "1,234.", "1,234.", True, True),
        ("The answer is 1234", "[invalid]", "1234", False, True),
        ("#### 12\nQuestion: more 7", "12", "7", False, False),
    ],
)
def test_gsm8k_filters_and_exact_match_follow_the_harness(
    text, strict, flexible, hit_strict, hit_flexible, local_model
):
    samples = harness_scores("gsm8k", [{"question": "Q?", "answer": "Some steps.\n#### 1234"}], [text], local_model)
    scores = {s.filter: (s.filtered_responses[0], s.metrics["exact_match"]) for s in samples}
    assert scores == {"strict-match": (strict, float(hit_strict)), "flexible-extract": (flexible, float(hit_flexible))}


def test_progress_reports_answers_stored_rate_and_time_left():
    lines = []
    progress = ProgressLog(lines.append, "arc_challenge letter")
    progress(AnswerProgress(stored=25, needed=40, computed=10, chunks=1, seconds=5.0))  # 15 of them reused
    assert lines == [
        "arc_challenge letter: chunk 1 kept, 25 of 40 answers stored (10 computed by this run), 2.00 answers/s, "
        "about 8s left"
    ]


# --- the protocol, end to end ---------------------------------------------------------------------


@pytest.mark.slow
def test_open_llm_leaderboard_v1_materialises_with_its_shots(warehouse, tmp_path):
    from eval_platform.benchmarks.store import EvaluationStore, LeaderboardStore
    from eval_platform.definitions import defs
    from eval_platform.evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions
    from eval_platform.resources import LanguageModelResource, ModelGatewayResource
    from tests.evaluation import roster_with

    protocol = declared_protocols(environment().protocols_dir)["open_llm_leaderboard_v1"]
    test_defs = Definitions(
        assets=list(defs().assets),
        jobs=list(defs().jobs),
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
        job.get_run_config_for_partition_key(key)["ops"]["benchmark_evaluation"]["config"]["protocol"] == protocol.name
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
    assert zero_shot.success
    assert {e.asset_key.path[-1] for e in zero_shot.get_asset_materialization_events()} == {
        "benchmark_evaluation",
        "inspect_log",
        "model_comparison",
    }
    outcomes, failures = {}, []
    for task in protocol.tasks:
        result = job.execute_in_process(
            partition_key=evaluation_key(task.benchmark, "smollm2"),
            raise_on_error=False,
            instance=instance,
            run_config={"ops": {"benchmark_evaluation": {"config": {"protocol": protocol.name, "max_gen_toks": 16}}}},
        )
        outcomes[task.benchmark] = result.success
        failures += [str(e.step_failure_data.error) for e in result.all_events if e.is_step_failure]
    assert outcomes == {task.benchmark: task.benchmark != "hellaswag" for task in protocol.tasks}
    assert len(failures) == 1 and "hellaswag: no few-shot examples for 10-shot" in failures[0]
    scored_protocols = test_defs.resolve_job_def("score_protocols").execute_in_process(instance=instance)
    assert scored_protocols.success
    metadata = {
        event.asset_key.path[-1]: event.materialization.metadata
        for event in scored_protocols.get_asset_materialization_events()
    }
    with warehouse.store(LeaderboardStore) as store:
        results = store.load_protocol_scores(protocol.name)
    scored = [r for r in results if r["status"] == "scored"]
    assert {r["task"]: (r["num_fewshot"], r["settings_key"]) for r in scored} == {
        "arc_challenge": (25, "25-shot"),
        "mmlu": (5, "5-shot"),
        "truthfulqa_mc2": (0, "0-shot"),
        "winogrande": (5, "5-shot"),
    }
    # GSM8K generated within 16 new tokens, not its task's budget: not the protocol's, and said so
    [gsm8k] = [r for r in results if r["task"] == "gsm8k"]
    assert gsm8k["status"] != "scored" and "generated within 16 new tokens" in gsm8k["status"]
    [average] = [r for r in results if r["task"] == "average"]
    assert average["status"] == "partial: 4 of 6 tasks (missing hellaswag, gsm8k)"
    assert average["score"] == pytest.approx(sum(r["score"] for r in scored) / 4)
    # The UI's metadata labels the average as partial, per model; the leaderboard shows it so.
    assert metadata["protocol_scores"][f"{protocol.name}/smollm2/partial average (4 tasks)"].value == pytest.approx(
        average["score"]
    )
    assert f"{protocol.name}/smollm2/average" not in metadata["protocol_scores"]
    assert "partial: 4 of 6 tasks (missing hellaswag, gsm8k)" in metadata["leaderboard"]["leaderboard"].value
    with warehouse.get_connection() as conn:
        wide = conn.execute(
            'SELECT model, arc_challenge, "arc_challenge measured", open_llm_leaderboard_v1, '
            "open_llm_leaderboard_v1_status FROM leaderboard_wide"
        ).fetchall()
    arc_25 = next(r["score"] for r in scored if r["task"] == "arc_challenge")
    # the headline with what it holds, as the printed leaderboard's header says it
    with warehouse.store(LeaderboardStore) as store:
        [arc_headline] = [h for h in store.load_headlines() if h["benchmark"] == "arc_challenge"]
    assert measured_label(arc_headline) == "25-shot acc_norm"
    assert wide == [
        ("smollm2", pytest.approx(arc_25), "25-shot acc_norm", pytest.approx(average["score"]), average["status"])
    ]
    with warehouse.store(EvaluationStore) as store:  # zero-shot and 25-shot results of the same model side by side
        keys = store.rows("SELECT DISTINCT settings_key FROM results WHERE benchmark = 'arc_challenge' "
                          "AND solver = 'harness' ORDER BY 1")  # fmt: skip
        assert [k["settings_key"] for k in keys] == ["0-shot", "25-shot"]
        prompt, ids = store.sql(
            "SELECT prompt, fewshot_ids FROM samples "
            "WHERE benchmark = 'arc_challenge' AND settings_key = '25-shot' LIMIT 1"
        ).fetchone()
    assert prompt.count("Question: ") == 26 and len(ids) == 25
