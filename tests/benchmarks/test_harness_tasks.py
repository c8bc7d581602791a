"""lm-evaluation-harness tasks as benchmarks: a task from a YAML folder declared in a benchmarks
folder materialises the whole graph (evaluation, protocol scores, leaderboard) through the real
jobs with resources set by run config, as the launchpad sets them; any harness task runs by name
on local files from the launchpad; stored answers are reused; bad input is refused naming it; the
Open LLM Leaderboard v2 normalisation; reasoning blocks."""

import json
from pathlib import Path

import pytest
from dagster import AssetCheckSeverity, DagsterInstance

from eval_platform.benchmarks.declarations import (
    DeclarationError,
    EvaluationSettings,
    declared_benchmarks,
    parse_declaration,
    settings_key,
)
from eval_platform.benchmarks.engine_lm import strip_reasoning
from eval_platform.benchmarks.harness import HarnessRun, HarnessTaskError, build_tasks, task_manager
from eval_platform.benchmarks.protocols import declared_protocols, normalize, protocol_rows
from eval_platform.benchmarks.roster import RosterEntry, write_entry
from eval_platform.benchmarks.store import EvaluationStore
from eval_platform.environment import environment
from eval_platform.evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions
from eval_platform.resources import WarehouseResource
from tests.conftest import DATA_BENCHMARKS, PROJECT_ROOT

V2 = declared_protocols(environment().protocols_dir)["open_llm_leaderboard_v2"]


def built(task, **settings):
    """The harness's task objects for a task (or group) run with `settings`."""
    return build_tasks(HarnessRun((task,), EvaluationSettings(**settings)))


TASK_YAML = """task: throwaway_capitals
dataset_path: json
output_type: multiple_choice
test_split: test
doc_to_text: "Q: What is the capital of {{country}}?\\nA:"
doc_to_choice: "{{choices}}"
doc_to_target: "{{answer}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
"""
ROWS = [
    {"country": "France", "choices": ["Paris", "Lyon", "Nice"], "answer": 0},
    {"country": "Italy", "choices": ["Milan", "Rome", "Turin"], "answer": 1},
    {"country": "Spain", "choices": ["Seville", "Valencia", "Madrid"], "answer": 2},
    {"country": "Germany", "choices": ["Berlin", "Munich"], "answer": 0},
]


def launchpad(warehouse_path, roster_dir, ops=None):
    """Run config as the launchpad writes it: resources and op config."""
    return {
        "resources": {
            "warehouse": {"config": {"database": str(warehouse_path)}},
            "roster": {"config": {"directory": str(roster_dir)}},
        },
        "ops": ops or {},
    }


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A benchmarks folder with one throwaway task (its YAML folder and data), a roster of one."""
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "throwaway.yaml").write_text(TASK_YAML)
    benchmarks = tmp_path / "harness"
    benchmarks.mkdir()
    (benchmarks / "capitals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (benchmarks / "capitals.yaml").write_text(
        "task: throwaway_capitals\ninclude_path: ../tasks\nheadline: {metric: acc}\n"
        "data_files:\n  throwaway_capitals: {test: capitals.jsonl}\n"
    )
    monkeypatch.setenv("EVAL_BENCHMARKS_DIR", str(benchmarks))
    write_entry(tmp_path / "roster", RosterEntry(name="smollm2", model="local/smollm2-135m-instruct"))
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(roster_partitions.name, ["smollm2"])
    return tmp_path, instance


@pytest.mark.slow
def test_a_task_from_a_yaml_folder_materialises_the_whole_graph(project):
    from eval_platform.definitions import defs

    root, instance = project
    instance.add_dynamic_partitions(benchmark_partitions.name, ["capitals"])
    config = launchpad(root / "warehouse.duckdb", root / "roster")
    first = (
        defs()
        .resolve_job_def("model_evaluation")
        .execute_in_process(partition_key=evaluation_key("capitals", "smollm2"), instance=instance, run_config=config)
    )
    assert first.success
    metadata = {e.asset_key.path[-1]: e.materialization.metadata for e in first.get_asset_materialization_events()}[
        "benchmark_evaluation"
    ]
    counts = metadata["solvers"].value["harness (default shots)"]
    assert (counts["answers"], counts["computed"]) == (11, 11)
    view = metadata["samples"].value  # each document in the UI: prompt, each choice's log-likelihood, metrics
    assert view.count("· throwaway_capitals document ") == 4 and "Q: What is the capital of Italy?\nA:" in view
    assert all(f"| {choice} | " in view for row in ROWS for choice in row["choices"]) and "acc_norm **" in view
    warehouse = WarehouseResource(database=str(root / "warehouse.duckdb"))
    with warehouse.store(EvaluationStore) as store:
        samples = store.load_samples("capitals", "smollm2")
        results = store.load_results("capitals")
    assert list(samples["doc_id"]) == [0, 1, 2, 3] and set(samples["solver"]) == {"harness"}
    assert samples["prompt"].iloc[1] == "Q: What is the capital of Italy?\nA:"
    with warehouse.get_connection() as conn:  # each request's stored answer, and the run that computed it
        answers = {
            key: (json.loads(arguments), json.loads(response), run_id)
            for key, arguments, response, run_id in conn.execute(
                "SELECT request_key, arguments, response, run_id FROM answers"
            ).fetchall()
        }
        environments = conn.execute("SELECT run_id, dtype, batch_size FROM evaluation_runs").fetchall()
    assert environments == [(first.run_id, "float32", 8)]
    assert metadata["environment"].value["dtype"] == "float32"
    # the engine's path for the model: SmolLM2 attends to the whole past, shares prefixes, packs its passes
    assert metadata["environment"].value["engine"] == {
        "attention_windows": "none",
        "shared_prefixes": "yes",
        "loglikelihood_passes": "packed (torch's CPU flash kernel, node by node)",
        "generation": "packed prefill, each row decoded at its own length (torch's CPU flash kernel, node by node)",
    }
    for sample in samples.itertuples():  # acc is the harness's: the gold choice has the largest log-likelihood
        likelihoods = [response[0] for response in json.loads(sample.filtered_responses)]
        gold = ROWS[sample.doc_id]["answer"]
        assert json.loads(sample.metrics)["acc"] == float(likelihoods.index(max(likelihoods)) == gold)
        assert len(json.loads(sample.arguments)) == len(ROWS[sample.doc_id]["choices"])
        assert [answers[key][0] for key in sample.request_keys] == json.loads(sample.arguments)
        assert [answers[key][1][0] for key in sample.request_keys] == likelihoods
        assert {answers[key][2] for key in sample.request_keys} == {first.run_id}
    with warehouse.get_connection() as conn:  # score -> item -> prompt -> document -> data file, in plain SQL
        lineage = conn.execute(
            "SELECT doc_id, item_value, prompt, doc ->> 'country', data_files FROM item_lineage "
            "WHERE benchmark = 'capitals' AND metric = 'acc' ORDER BY doc_id"
        ).fetchall()
    assert [(row[0], row[3]) for row in lineage] == [(i, r["country"]) for i, r in enumerate(ROWS)]
    assert [float(row[1]) for row in lineage] == [json.loads(m)["acc"] for m in samples["metrics"]]
    assert "capitals.jsonl" in lineage[0][4]
    acc = next(r for r in results if r["metric"] == "acc")
    assert acc["n"] == 4 and acc["value"] == pytest.approx(
        samples["metrics"].map(lambda m: json.loads(m)["acc"]).mean()
    )
    assert acc["random_baseline"] == pytest.approx((3 * (1 / 3) + 1 / 2) / 4)
    scored = (
        defs()
        .resolve_job_def("score_protocols")
        .execute_in_process(instance=instance, run_config={"resources": config["resources"]})
    )
    assert scored.success
    board = {e.asset_key.path[-1]: e.materialization.metadata for e in scored.get_asset_materialization_events()}
    assert board["leaderboard"]["smollm2/capitals"].value == pytest.approx(acc["value"])
    assert "capitals (0-shot acc)" in board["leaderboard"]["leaderboard"].value
    with warehouse.get_connection() as conn:  # one leaderboard table for every benchmark
        row = conn.execute(
            "SELECT model, solver, task, metric, num_fewshot, n, value, ci_high - ci_low FROM leaderboard "
            "WHERE benchmark = 'capitals'"
        ).fetchall()
    z, n, p = 1.959964, 4, acc["value"]  # Wilson's score interval, the textbook's width
    wilson_width = 2 * z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    assert row == [
        ("smollm2", "harness", "throwaway_capitals", "acc", 0, 4, pytest.approx(acc["value"]),
         pytest.approx(wilson_width, abs=1e-6))
    ]  # fmt: skip
    # a second model, compared with the first as its baseline on the same documents
    write_entry(
        root / "roster",
        RosterEntry(name="smollm2-bf16", model="local/smollm2-135m-instruct", dtype="bfloat16", baseline="smollm2"),
    )
    instance.add_dynamic_partitions(roster_partitions.name, ["smollm2-bf16"])
    second = (
        defs()
        .resolve_job_def("model_evaluation")
        .execute_in_process(
            partition_key=evaluation_key("capitals", "smollm2-bf16"), instance=instance, run_config=config
        )
    )
    assert second.success
    with warehouse.store(EvaluationStore) as store:
        comparisons = {(r["metric"], r["relation"]): r for r in store.rows("SELECT * FROM comparisons")}
        bf16 = {r["metric"]: r["value"] for r in store.load_results("capitals") if r["model"] == "smollm2-bf16"}
    assert set(comparisons) == {("acc", "baseline"), ("acc_norm", "baseline")}
    paired = comparisons[("acc", "baseline")]
    assert (paired["model_a"], paired["model_b"], paired["items"], paired["task"], paired["filter"]) == (
        "smollm2-bf16",
        "smollm2",
        4,
        "throwaway_capitals",
        "none",
    )
    assert paired["accuracy_a"] == pytest.approx(bf16["acc"]) and paired["accuracy_b"] == pytest.approx(acc["value"])
    assert paired["difference"] == pytest.approx((paired["only_a"] - paired["only_b"]) / 4)
    assert paired["environment_differences"] == "dtype: bfloat16 vs float32"  # where each side's answers were computed
    compared = {e.asset_key.path[-1]: e.materialization.metadata for e in second.get_asset_materialization_events()}
    assert "## smollm2-bf16 (a) against smollm2 (b)" in compared["model_comparison"]["items"].value
    again = (
        defs()
        .resolve_job_def("model_evaluation")
        .execute_in_process(partition_key=evaluation_key("capitals", "smollm2"), instance=instance, run_config=config)
    )
    metadata = {e.asset_key.path[-1]: e.materialization.metadata for e in again.get_asset_materialization_events()}
    counts = metadata["benchmark_evaluation"]["solvers"].value["harness (default shots)"]
    assert (counts["computed"], counts["answers"]) == (0, 11)
    with warehouse.store(EvaluationStore) as store:
        assert len(store.load_samples("capitals", "smollm2")) == 4
        assert store.rows("SELECT count(*) AS n FROM answers")[0]["n"] == 22  # 11 per fingerprint
        history = store.rows(
            "SELECT run_id, prediction_run_id, count(*) AS n FROM history WHERE "
            "model = 'smollm2' AND metric = 'acc' GROUP BY ALL ORDER BY min(scored_at)"
        )
    # each run's document values, the reused answers still naming the run that computed them
    assert [(h["run_id"], h["prediction_run_id"], h["n"]) for h in history] == [
        (first.run_id, first.run_id, 4),
        (again.run_id, first.run_id, 4),
    ]


MORE_ROWS = ROWS + [
    {"country": "Portugal", "choices": ["Porto", "Lisbon"], "answer": 1},
    {"country": "Austria", "choices": ["Vienna", "Graz"], "answer": 0},
    {"country": "Poland", "choices": ["Krakow", "Warsaw"], "answer": 1},
    {"country": "Greece", "choices": ["Athens", "Patras"], "answer": 0},
]


@pytest.mark.slow
def test_the_regression_watch_names_the_documents_that_flipped_on_a_harness_benchmark(project):
    """Each run of a harness benchmark keeps its documents' values and settings (history); the check
    accuracy_regression on benchmark_evaluation, run by the job as by the UI, compares the latest run
    with the previous one (of the same settings key and solver) on the documents both scored."""
    from eval_platform.definitions import defs

    root, instance = project
    (root / "more.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MORE_ROWS))
    instance.add_dynamic_partitions(benchmark_partitions.name, ["capitals"])
    warehouse = WarehouseResource(database=str(root / "warehouse.duckdb"))
    gold = {f"Q: What is the capital of {r['country']}?\nA:": " " + r["choices"][r["answer"]] for r in MORE_ROWS}

    def regression_check(rows: str = "more.jsonl", **config):
        ops = {
            "benchmark_evaluation": {
                "config": {"data_files": {"throwaway_capitals": {"test": str(root / rows)}}, **config}
            }
        }
        result = (
            defs()
            .resolve_job_def("model_evaluation")
            .execute_in_process(
                partition_key=evaluation_key("capitals", "smollm2"),
                instance=instance,
                run_config=launchpad(root / "warehouse.duckdb", root / "roster", ops),
            )
        )
        assert result.success
        [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == "accuracy_regression"]
        assert check.asset_key.path[-1] == "benchmark_evaluation"
        return check

    def answer_every_document(right: bool):  # the stored answers the next run reuses
        with warehouse.get_connection() as conn:
            for key, arguments in conn.execute("SELECT request_key, arguments FROM answers").fetchall():
                context, continuation = json.loads(arguments)
                value = 0.0 if (continuation == gold[context]) == right else -1000.0
                conn.execute("UPDATE answers SET response = ? WHERE request_key = ?", [json.dumps([value, False]), key])

    assert regression_check().passed  # one run: nothing to compare
    answer_every_document(right=True)
    assert regression_check().passed  # better is no regression
    answer_every_document(right=False)
    # on the 7 documents both runs scored (a file of the first 7 rows: a setting changed, the key not)
    (root / "seven.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MORE_ROWS[:7]))
    check = regression_check("seven.jsonl")
    assert not check.passed and check.severity == AssetCheckSeverity.WARN
    report = check.metadata["examples"].value
    for metric in ("acc", "acc_norm"):
        assert (
            f"('capitals', 'smollm2', 'default shots', 'harness', 'throwaway_capitals', 'none', '{metric}', 1.0, 0.0, "
            "'p=0.0156'"
        ) in report
    assert "flipped to wrong: " + ", ".join(f"throwaway_capitals/{i}" for i in range(7)) in report
    changed = report[report.index("changed: data_files: ") :]
    assert changed.index("more.jsonl") < changed.index("seven.jsonl")  # the previous run's setting, then the latest's
    assert "'acc', \"data_files: " in check.metadata["environment_changes"].value
    with warehouse.get_connection() as conn:
        runs = conn.execute(
            "SELECT run_id, count(*), count(DISTINCT settings ->> 'data_files') FROM history "
            "WHERE metric = 'acc' GROUP BY run_id ORDER BY min(scored_at)"
        ).fetchall()
    assert [row[1:] for row in runs] == [(8, 1), (8, 1), (7, 1)]
    check = regression_check(num_fewshot=0)  # other settings: the first run of its key, compared with none
    report = check.metadata["examples"].value
    assert "0-shot" not in report and "'default shots', 'harness', 'throwaway_capitals', 'none', 'acc', 1.0" in report


def test_any_harness_task_runs_by_name_from_the_launchpad_on_local_files(project):
    """A harness task no declaration names (OpenBookQA, on ARC-Easy's rows in its layout), added by
    name to the benchmark dimension and launched in the one job with its data in the launchpad."""
    from eval_platform.definitions import defs

    root, instance = project
    rows = [json.loads(line) for line in (DATA_BENCHMARKS / "arc_easy.jsonl").read_text().split("\n")[:3]]
    (root / "obqa.jsonl").write_text(
        "".join(
            json.dumps({"question_stem": row["question"], "choices": row["choices"], "answerKey": row["answerKey"]})
            + "\n"
            for row in rows
        )
    )
    instance.add_dynamic_partitions(benchmark_partitions.name, ["openbookqa"])
    result = (
        defs()
        .resolve_job_def("model_evaluation")
        .execute_in_process(
            partition_key=evaluation_key("openbookqa", "smollm2"),
            instance=instance,
            run_config=launchpad(
                root / "warehouse.duckdb",
                root / "roster",
                {
                    "benchmark_evaluation": {
                        "config": {"data_files": {"openbookqa": {"test": str(root / "obqa.jsonl")}}}
                    }
                },
            ),
        )
    )
    assert result.success
    assert {e.asset_key.path[-1] for e in result.get_asset_materialization_events()} == {
        "benchmark_evaluation",
        "inspect_log",
        "model_comparison",
    }
    with WarehouseResource(database=str(root / "warehouse.duckdb")).store(EvaluationStore) as store:
        samples = store.load_samples("openbookqa", "smollm2")
        metrics = {r["metric"] for r in store.load_results("openbookqa")}
    assert len(samples) == 3 and samples["prompt"].iloc[0] == rows[0]["question"]
    assert [a[1] for a in json.loads(samples["arguments"].iloc[0])] == [" " + c for c in rows[0]["choices"]["text"]]
    assert metrics == {"acc", "acc_norm"}


def test_bad_tasks_and_files_are_refused_naming_them(project):
    root, _ = project
    with pytest.raises(HarnessTaskError, match="'no_such_task' is not a task"):
        built("no_such_task")
    with pytest.raises(
        HarnessTaskError,
        match=r"arc_easy: the harness could not build it: .*allenai/ai2_arc.*"
        r"\(offline: point it at local files with data_files",
    ):
        built("arc_easy")  # offline, no data files: its hub dataset cannot be reached
    with pytest.raises(HarnessTaskError, match="data file .*missing.jsonl does not exist"):
        built("arc_easy", data_files={"arc_easy": {"test": str(root / "missing.jsonl")}})
    with pytest.raises(HarnessTaskError, match=r"name \['mmlu_pro'\], which are not among its tasks"):
        built(
            "arc_easy",
            data_files={"arc_easy": {"test": str(DATA_BENCHMARKS / "arc_easy.jsonl")}, "mmlu_pro": {"test": "x"}},
        )
    for lines, problem in (
        (['{"country": "France"}', "{not json"], "line 2: invalid JSON: Expecting property name"),
        (['{"country": "France"}', "", '["Paris"]'], r"line 3: a JSON list where an object \(one row\)"),
    ):
        (root / "bad.jsonl").write_text("\n".join(lines) + "\n")
        with pytest.raises(HarnessTaskError, match=rf"throwaway_capitals: data file .*bad.jsonl, {problem}"):
            built("throwaway_capitals", include_path=(str(root / "tasks"),),
                  data_files={"throwaway_capitals": {"test": str(root / "bad.jsonl")}})  # fmt: skip
    (root / "array.json").write_text(json.dumps(ROWS, indent=2))  # a .json file may hold one array of objects
    [task] = built("throwaway_capitals", include_path=(str(root / "tasks"),),
                   data_files={"throwaway_capitals": {"test": str(root / "array.json")}})  # fmt: skip
    assert [doc["country"] for doc in task.eval_docs] == [r["country"] for r in ROWS]
    bad = root / "harness" / "bad.yaml"
    bad.write_text("task: arc_easy\nshots: 5\n")
    with pytest.raises(DeclarationError, match=r"bad.yaml: shots: Extra inputs are not permitted"):
        parse_declaration(bad)
    bad.write_text("task: arc_easy\ndataset: {file: x.jsonl}\n")
    with pytest.raises(DeclarationError, match=r"bad.yaml: parser: a dataset needs the parser of its rows"):
        parse_declaration(bad)


def result(model, task, metric, value, baseline=None, is_group=False, benchmark=None, shots=None, **settings):
    """A harness result as `load_results` gives it, of a run with the task's own shots (each of its
    tasks' `num_fewshot` what that task was evaluated with)."""
    return {
        "benchmark": benchmark or task,
        "model": model,
        "model_fingerprint": "fp",
        "settings_key": "default shots",
        "solver": "harness",
        "task": task,
        "metric": metric,
        "filter": "none",
        "value": value,
        "n": 10,
        "ci_low": None,
        "ci_high": None,
        "random_baseline": baseline,
        "is_group": is_group,
        "num_fewshot": shots,
        "settings": json.dumps({"overrides": {}, "system_instruction": None, **settings}),
    }


def test_open_llm_leaderboard_v2_normalises_as_the_leaderboard_did():
    assert normalize(0.55, 0.1) == pytest.approx(50.0) and normalize(0.05, 0.1) == 0.0
    rows = protocol_rows(
        V2,
        [
            result("m", "leaderboard_bbh", "acc_norm", 0.55, is_group=True, benchmark="leaderboard_bbh"),
            result("m", "leaderboard_bbh_navigate", "acc_norm", 0.5, 0.5, benchmark="leaderboard_bbh", shots=3),
            result(
                "m", "leaderboard_bbh_date_understanding", "acc_norm", 0.6, 0.2, benchmark="leaderboard_bbh", shots=3
            ),  # (0.6 - 0.2) / 0.8 = 50  # fmt: skip
            result("m", "leaderboard_mmlu_pro", "acc", 0.19, shots=5),  # baseline 0.1: 10
            result("m", "leaderboard_ifeval", "prompt_level_strict_acc", 0.3, shots=0),
            result("m", "leaderboard_ifeval", "inst_level_strict_acc", 0.5, shots=0),  # mean 0.4: 40
        ],
    )
    by_task = {r["task"]: r for r in rows}
    assert by_task["leaderboard_bbh"]["normalized"] == pytest.approx(25.0)  # per subtask, then unweighted
    assert by_task["leaderboard_bbh"]["raw"] == pytest.approx(0.55) and by_task["leaderboard_bbh"]["subtasks"] == 2
    assert by_task["leaderboard_mmlu_pro"]["score"] == pytest.approx(10.0)
    assert by_task["leaderboard_ifeval"]["score"] == pytest.approx(40.0)
    assert by_task["leaderboard_gpqa"]["status"].startswith("missing: GPQA")
    assert by_task["average"]["score"] == pytest.approx(25.0)
    assert by_task["average"]["status"] == (
        "partial: 3 of 6 tasks (missing leaderboard_gpqa, leaderboard_math_hard, leaderboard_musr)"
    )


def test_the_v2_protocol_counts_a_task_only_as_the_leaderboard_evaluated_it():
    def evaluated(task, metric, value, shots, baseline=None, is_group=False, benchmark=None, **settings):
        return result("m", task, metric, value, baseline, is_group, benchmark or task, shots, **settings)

    def statuses(*results):
        return {r["task"]: r["status"] for r in protocol_rows(V2, results)}

    ifeval = [
        evaluated("leaderboard_ifeval", metric, 0.4, 0)
        for metric in ("prompt_level_strict_acc", "inst_level_strict_acc")
    ]
    bbh = [
        evaluated("leaderboard_bbh", "acc_norm", 0.6, None, is_group=True),
        evaluated("leaderboard_bbh_navigate", "acc_norm", 0.6, 3, 0.5, benchmark="leaderboard_bbh"),
    ]
    math = [
        evaluated("leaderboard_math_hard", "exact_match", 0.1, None, is_group=True),
        evaluated("leaderboard_math_algebra_hard", "exact_match", 0.1, 4, benchmark="leaderboard_math_hard"),
    ]
    gpqa, musr = (next(t for t in V2.tasks if t.name == name) for name in ("leaderboard_gpqa", "leaderboard_musr"))
    assert statuses(evaluated("leaderboard_mmlu_pro", "acc", 0.19, 5), *ifeval, *bbh, *math) == {
        "leaderboard_bbh": "scored",
        "leaderboard_ifeval": "scored",
        "leaderboard_math_hard": "scored",
        "leaderboard_mmlu_pro": "scored",
        "leaderboard_gpqa": "missing: " + gpqa.unavailable_offline,
        "leaderboard_musr": "missing: " + musr.unavailable_offline,
        "average": "partial: 4 of 6 tasks (missing leaderboard_gpqa, leaderboard_musr)",
    }
    assert (
        statuses(evaluated("leaderboard_mmlu_pro", "acc", 0.19, 0))["leaderboard_mmlu_pro"]
        == "missing: evaluated 0-shot, not the protocol's 5-shot"
    )
    # a benchmark declared with other shots beside the task's own: the protocol takes the run as it says
    zero = evaluated("leaderboard_mmlu_pro", "acc", 0.55, 0, benchmark="mmlu_pro_0shot")
    five = evaluated("leaderboard_mmlu_pro", "acc", 0.19, 5)
    [chosen] = [r for r in protocol_rows(V2, [zero, five]) if r["task"] == "leaderboard_mmlu_pro"]
    assert (chosen["status"], chosen["raw"]) == ("scored", 0.19)
    # one subtask at other shots takes the whole task out; MATH-hard's subtasks are leaderboard_math_*_hard
    zero_shot = evaluated("leaderboard_bbh_snarks", "acc_norm", 0.5, 0, 0.5, benchmark="leaderboard_bbh")
    assert statuses(*bbh, zero_shot)["leaderboard_bbh"] == "missing: evaluated 0-shot, not the protocol's 3-shot"
    two_shot = evaluated("leaderboard_math_geometry_hard", "exact_match", 0.0, 2, benchmark="leaderboard_math_hard")
    assert statuses(*math, two_shot)["leaderboard_math_hard"] == "missing: evaluated 2-shot, not the protocol's 4-shot"
    # where the data comes from may be overridden; how the task is evaluated may not
    local = {"leaderboard_ifeval": {"dataset_path": "json", "dataset_kwargs": {"data_files": {"train": "i.jsonl"}}}}
    assert statuses(*[evaluated(r["task"], r["metric"], 0.4, 0, overrides=local) for r in ifeval])[
        "leaderboard_ifeval"
    ] == "scored"  # fmt: skip
    short = {"leaderboard_ifeval": {"generation_kwargs": {"max_gen_toks": 24}}}
    assert (
        statuses(*[evaluated(r["task"], r["metric"], 0.4, 0, overrides=short) for r in ifeval])["leaderboard_ifeval"]
        == "missing: evaluated with its task config overridden (generation_kwargs)"
    )
    assert (
        statuses(*[evaluated(r["task"], r["metric"], 0.4, 0, system_instruction="Be brief.") for r in ifeval])[
            "leaderboard_ifeval"
        ]
        == "missing: evaluated with a system instruction"
    )
    chat = [{**r, "solver": "letter"} for r in ifeval]  # asked another way than the protocol's
    assert (
        statuses(*chat)["leaderboard_ifeval"] == "missing: evaluated by the letter solver, not the protocol's harness"
    )


def test_the_v2_protocols_shots_are_the_harness_tasks_own():
    registry = task_manager((), True)
    for spec in V2.tasks:
        shots = {
            name: entry.cfg.get("num_fewshot") or 0
            for name, entry in registry.task_index.items()
            if spec.covers(name) and entry.kind.name == "TASK"
        }
        assert shots and set(shots.values()) == {spec.num_fewshot}, (spec.task, shots)


@pytest.mark.slow
def test_a_v2_task_evaluated_with_other_shots_from_the_launchpad_is_kept_beside_the_protocols_run(project):
    """A 0-shot MMLU-Pro run from the launchpad is stored as it ran, under its settings key; the v2
    protocol names it missing with what differs. The protocol's own run is stored beside it (each
    run's samples, results and history under its key) and scores the task; running it again
    replaces its rows and leaves the 0-shot run's."""
    import duckdb

    from eval_platform.definitions import defs

    root, instance = project
    instance.add_dynamic_partitions(benchmark_partitions.name, ["leaderboard_mmlu_pro"])
    data = DATA_BENCHMARKS / "mmlu_pro"
    (root / "one.jsonl").write_text((data / "test.jsonl").read_text().split("\n")[0] + "\n")  # a run of all its rows
    files = {"leaderboard_mmlu_pro": {"test": str(root / "one.jsonl"), "validation": str(data / "validation.jsonl")}}

    def evaluate_then_score(**settings):
        config = launchpad(
            root / "warehouse.duckdb",
            root / "roster",
            {"benchmark_evaluation": {"config": {"data_files": files, **settings}}},
        )
        for job, partition, run_config in (
            ("model_evaluation", evaluation_key("leaderboard_mmlu_pro", "smollm2"), config),
            ("score_protocols", None, {"resources": config["resources"]}),
        ):
            assert (
                defs()
                .resolve_job_def(job)
                .execute_in_process(partition_key=partition, instance=instance, run_config=run_config)
                .success
            )
        with duckdb.connect(str(root / "warehouse.duckdb"), read_only=True) as conn:
            results = conn.execute("""
                SELECT r.settings_key, r.num_fewshot, r.value IS NOT NULL, n.status FROM results r
                JOIN protocol_scores n ON n.model = r.model AND n.task = r.benchmark
                WHERE r.task = 'leaderboard_mmlu_pro' AND r.metric = 'acc' AND n.protocol = 'open_llm_leaderboard_v2'
                ORDER BY ALL""").fetchall()
            stored = conn.execute("""
                SELECT 'samples', settings_key, count(*) FROM samples GROUP BY ALL
                UNION ALL SELECT 'history', settings_key, count(DISTINCT run_id) FROM history GROUP BY ALL
                UNION ALL SELECT 'lineage', settings_key, count(*) FROM item_lineage WHERE metric = 'acc' GROUP BY ALL
                ORDER BY ALL""").fetchall()
        return results, stored

    missing = "missing: evaluated 0-shot, not the protocol's 5-shot"
    assert evaluate_then_score(num_fewshot=0) == (
        [("0-shot", 0, True, missing)],
        [("history", "0-shot", 1), ("lineage", "0-shot", 1), ("samples", "0-shot", 1)],
    )
    both = (
        [("0-shot", 0, True, "scored"), ("default shots", 5, True, "scored")],
        [
            ("history", "0-shot", 1),
            ("history", "default shots", 1),
            ("lineage", "0-shot", 1),
            ("lineage", "default shots", 1),
            ("samples", "0-shot", 1),
            ("samples", "default shots", 1),
        ],
    )
    assert evaluate_then_score() == both
    results, stored = evaluate_then_score()  # the same settings again: replaced, one more run in the history
    assert results == both[0] and stored == [*both[1][:1], ("history", "default shots", 2), *both[1][2:]]


def test_a_runs_settings_key_names_what_it_measured_beyond_its_task_and_data():
    """Shots, a limit on the documents, a generation budget, a system instruction and task config
    beyond its data's location are what a run's results are kept apart by; where the data comes from
    and the roster entry's chat format are not."""
    import re

    def key(settings):
        return settings_key(settings.describe())

    base = EvaluationSettings(task="leaderboard_mmlu_pro", data_files={"leaderboard_mmlu_pro": {"test": "a.jsonl"}})
    same = base.model_copy(
        update={
            "data_files": {},
            "include_path": ("tasks",),
            "apply_chat_template": True,
            "fewshot_as_multiturn": True,
            "overrides": {"leaderboard_mmlu_pro": {"dataset_path": "json"}},
        }
    )
    assert key(base) == key(same) == "default shots"
    other = base.model_copy(
        update={
            "num_fewshot": 0,
            "system_instruction": "Answer briefly.",
            "overrides": {"leaderboard_mmlu_pro": {"dataset_path": "json", "generation_kwargs": {"until": []}}},
        }
    )
    assert re.fullmatch(r"0-shot, system instruction [0-9a-f]{8}, overrides [0-9a-f]{8}", key(other))
    assert key(other.model_copy(update={"system_instruction": "Answer at length."})) != key(other)
    cut = base.model_copy(update={"limit": 5, "max_gen_toks": 96})
    assert key(cut) == "default shots, first 5 documents, 96 new tokens"


def test_a_benchmarks_headline_comes_from_its_run_with_the_declared_settings():
    """A later 0-shot run from the launchpad is kept beside the declared run, and the headline stays
    the declared run's; a benchmark run only otherwise shows its latest run."""
    from datetime import datetime

    from eval_platform.benchmarks.leaderboard import headline_rows

    def run(model, shots, value, day):
        return {
            **result(model, "leaderboard_mmlu_pro", "acc", value, shots=shots),
            "computed_at": datetime(2026, 11, day),
            "num_fewshot": 5 if shots is None else shots,
        }

    results = [run("a", None, 0.3, 1), run("a", 0, 0.2, 2), run("b", 0, 0.1, 1), run("b", 1, 0.4, 2)]
    assert [
        (row["model"], row["num_fewshot"], row["value"])
        for row in headline_rows(results, declared_benchmarks(environment().benchmarks_dir))
    ] == [
        ("a", 5, 0.3),
        ("b", 1, 0.4),
    ]


def test_a_reasoning_block_is_what_comes_before_the_last_marker_and_a_marker_is_never_empty():
    text = "<think>The capital is Paris, not Lyon.</think>\n Paris"
    assert strip_reasoning(text, "</think>") == "Paris"
    assert strip_reasoning("Paris", "</think>") == "Paris" and strip_reasoning(text, None) == text
    with pytest.raises(ValueError, match="reasoning_end"):
        RosterEntry(name="r", reasoning_end="")


def test_the_nightly_refresh_evaluates_every_roster_model_on_every_declared_benchmark(project):
    """The schedule refreshes each declared benchmark's inputs (a harness task has none to ingest), and
    when they succeed roster_evaluation_sensor requests every roster entry evaluated on it."""
    from datetime import datetime

    from dagster import build_run_status_sensor_context, build_schedule_context, instance_for_test

    from eval_platform.definitions import defs
    from eval_platform.resources import RosterResource
    from eval_platform.schedules.sensors import roster_evaluation_sensor

    root, _ = project
    (root / "harness" / "capitals_copy.yaml").write_text((root / "harness" / "capitals.yaml").read_text())
    write_entry(root / "roster", RosterEntry(name="copy-only", benchmarks=("capitals_copy",)))
    roster = RosterResource(directory=str(root / "roster"))
    with instance_for_test() as instance:
        with build_schedule_context(
            instance=instance, scheduled_execution_time=datetime(2026, 11, 24, 2), resources={"roster": roster}
        ) as context:
            inputs = defs().resolve_schedule_def("nightly_benchmark_refresh")(context)
        assert [(r.job_name, r.partition_key) for r in inputs] == [
            ("benchmark_inputs", "capitals"),
            ("benchmark_inputs", "capitals_copy"),
        ]
        assert instance.get_dynamic_partitions(benchmark_partitions.name) == ["capitals", "capitals_copy"]
        requests = []
        for request in inputs:  # each inputs run, and the evaluations the sensor requests when it succeeds
            run = defs().resolve_job_def("benchmark_inputs").execute_in_process(
                partition_key=request.partition_key, instance=instance,
                run_config={"resources": {"warehouse": {"config": {"database": str(root / "w.duckdb")}}}},
            )  # fmt: skip
            assert run.success and not run.get_asset_materialization_events()  # no dataset of its own
            with build_run_status_sensor_context(
                sensor_name="roster_evaluation_sensor", dagster_instance=instance, dagster_run=run.dagster_run,
                dagster_event=run.get_run_success_event(), resources={"roster": roster},
            ) as sensor:  # fmt: skip
                requests += [str(r.partition_key) for r in roster_evaluation_sensor(sensor)]
        assert requests == ["capitals|smollm2", "capitals_copy|copy-only", "capitals_copy|smollm2"]
        assert set(instance.get_dynamic_partitions(roster_partitions.name)) == {"smollm2", "copy-only"}


GENERATION_YAML = """task: throwaway_echo
dataset_path: json
output_type: generate_until
test_split: test
doc_to_text: "Thinking: {{word}} is a fruit. Final answer: {{word}}"
doc_to_target: "{{word}}"
generation_kwargs: {until: ["\\n\\n"], do_sample: false, max_gen_toks: 16}
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
"""


def test_a_chat_api_answers_a_generation_task_over_http_and_a_reasoning_block_is_stripped(project):
    """An API model (litellm's real HTTP path, a local OpenAI-compatible stub that echoes the user
    turn) answers a harness generation task run with the chat template: the harness's chat is sent
    as a chat, the roster entry's reasoning block is stripped before the harness filters and scores
    the reply, and the unstripped reply stays stored."""
    from eval_platform.definitions import defs
    from tests.openai_stub_server import StubServer

    root, instance = project
    (root / "tasks" / "echo.yaml").write_text(GENERATION_YAML)
    (root / "harness" / "words.jsonl").write_text("".join(json.dumps({"word": w}) + "\n" for w in ("apple", "pear")))
    (root / "harness" / "echo.yaml").write_text(
        "task: throwaway_echo\ninclude_path: ../tasks\ndata_files:\n  throwaway_echo: {test: words.jsonl}\n"
    )
    write_entry(
        root / "roster",
        RosterEntry(name="api-echo", model="openai/echo", apply_chat_template=True, reasoning_end="Final answer:"),
    )
    instance.add_dynamic_partitions(benchmark_partitions.name, ["echo"])
    instance.add_dynamic_partitions(roster_partitions.name, ["api-echo"])
    with StubServer() as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        config = launchpad(root / "warehouse.duckdb", root / "roster")
        config["resources"]["gateway"] = {"config": {"api_base": server.api_base, "max_retries": 0}}
        result = (
            defs()
            .resolve_job_def("model_evaluation")
            .execute_in_process(partition_key=evaluation_key("echo", "api-echo"), instance=instance, run_config=config)
        )
        assert result.success and server.calls
    with WarehouseResource(database=str(root / "warehouse.duckdb")).store(EvaluationStore) as store:
        samples = store.load_samples("echo", "api-echo")
        results = store.load_results("echo")
        stored = sorted(json.loads(r["response"]) for r in store.rows("SELECT response FROM answers"))
        by_document = store.rows(
            "SELECT s.doc_id, a.response FROM samples s JOIN answers a "
            "ON list_contains(s.request_keys, a.request_key) ORDER BY s.doc_id"
        )
    assert [json.loads(r)[0][0] for r in samples["responses"]] == ["apple", "pear"]
    assert [json.loads(r["response"]) for r in by_document] == stored  # a document's unstripped answer, by its key
    assert [r["value"] for r in results if r["metric"] == "exact_match"] == [1.0]
    assert stored == [
        "Thinking: apple is a fruit. Final answer: apple",
        "Thinking: pear is a fruit. Final answer: pear",
    ]


def main_command(tmp_path, *arguments, timeout_s=3600, **variables):
    """`eval-platform` as a user runs it: the installed console script, offline, into a new warehouse
    (and the `EVAL_*` variables given, as a user sets them)."""
    import os
    import sys
    from pathlib import Path

    from tests.processes import run_to_end

    (tmp_path / "home").mkdir(exist_ok=True)
    environment = {
        **os.environ,
        "EVAL_WAREHOUSE": str(tmp_path / "warehouse.duckdb"),
        "DAGSTER_HOME": str(tmp_path / "home"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        **variables,
    }
    command = [str(Path(sys.executable).with_name("eval-platform")), *arguments]
    return run_to_end(command, timeout_s=timeout_s, cwd=PROJECT_ROOT, env=environment)


def printed_table(output: str, first_header: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The Markdown table the output prints under a header row beginning with `first_header`, by
    its first column (a wrapped row's next lines, their first cell empty, are not rows of their own)."""
    lines = [line for line in output.splitlines() if line.startswith("| ")]
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} "))
    table = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[start:]]
    header = table[0]
    rows = {}
    for row in table[1:]:
        if len(row) != len(header):
            break
        if row[0]:
            rows[row[0]] = dict(zip(header, row, strict=True))
    return header, rows


def v2_declarations_of_one_document(folder: Path) -> Path:
    """The shipped v2 declarations, each data file cut to its first document (MMLU-Pro's few-shot
    split whole): a run over all of their rows is the protocol's, and quick."""
    import shutil

    folder.mkdir()
    for name in ("leaderboard_bbh", "leaderboard_ifeval", "leaderboard_mmlu_pro"):
        shutil.copy(DATA_BENCHMARKS / f"{name}.yaml", folder / f"{name}.yaml")
    for source in [*(DATA_BENCHMARKS / "bbh").glob("*.jsonl"), DATA_BENCHMARKS / "mmlu_pro" / "test.jsonl",
                   DATA_BENCHMARKS / "ifeval.jsonl"]:  # fmt: skip
        target = folder / source.relative_to(DATA_BENCHMARKS)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source.read_text().split("\n")[0] + "\n")
    shutil.copy(DATA_BENCHMARKS / "mmlu_pro" / "validation.jsonl", folder / "mmlu_pro" / "validation.jsonl")
    return folder


@pytest.mark.slow
def test_the_main_command_runs_the_v2_protocol_offline_and_prints_raw_and_normalised_scores(tmp_path):
    import shutil

    import duckdb

    declarations = v2_declarations_of_one_document(tmp_path / "benchmarks")
    (tmp_path / "roster").mkdir()  # the entry that lists no benchmarks (the other lists v1's)
    shutil.copy(PROJECT_ROOT / "data" / "roster" / "smollm2-135m-instruct-float32.yaml", tmp_path / "roster")
    returncode, output = main_command(
        tmp_path,
        "run",
        "--protocol",
        "open_llm_leaderboard_v2",
        EVAL_BENCHMARKS_DIR=str(declarations),
        EVAL_ROSTER_DIR=str(tmp_path / "roster"),
    )
    assert returncode == 0, output[-3000:]
    for task in ("leaderboard_gpqa", "leaderboard_math_hard", "leaderboard_musr"):
        assert f"open_llm_leaderboard_v2 [{task}]: skipped:" in output
    assert "partial: 3 of 6 tasks (missing leaderboard_gpqa, leaderboard_math_hard, leaderboard_musr)" in output
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        rows = conn.execute(
            "SELECT model, task, raw, normalized, score, status FROM protocol_scores "
            "WHERE protocol = 'open_llm_leaderboard_v2'"
        ).fetchall()
        documents = dict(
            conn.execute("SELECT benchmark, count(DISTINCT task || doc_id) FROM samples GROUP BY ALL").fetchall()
        )
        wide = conn.execute(
            "SELECT open_llm_leaderboard_v2__leaderboard_bbh, open_llm_leaderboard_v2__leaderboard_gpqa, "
            "open_llm_leaderboard_v2__leaderboard_ifeval, open_llm_leaderboard_v2__leaderboard_mmlu_pro, "
            "open_llm_leaderboard_v2, open_llm_leaderboard_v2_status FROM leaderboard_wide "
            "WHERE model = 'smollm2-135m-instruct-float32'"
        ).fetchone()
    scored = {task: (raw, normalized) for model, task, raw, normalized, score, status in rows if status == "scored"}
    assert set(scored) == {"leaderboard_bbh", "leaderboard_ifeval", "leaderboard_mmlu_pro"}
    # The wide leaderboard has a column per v2 task (normalised) beside the benchmarks', and the v2 average.
    average = next(row for row in rows if row[1] == "average")
    assert wide == (
        scored["leaderboard_bbh"][1],
        None,
        scored["leaderboard_ifeval"][1],
        scored["leaderboard_mmlu_pro"][1],
        average[4],
        average[5],
    )
    assert {model for model, *_ in rows} == {"smollm2-135m-instruct-float32"}  # the entry that lists no benchmarks
    assert documents == {"leaderboard_bbh": 24, "leaderboard_ifeval": 1, "leaderboard_mmlu_pro": 1}
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        keys = conn.execute("""
            SELECT count(*), count(a.request_key), count(DISTINCT s.task || '/' || s.doc_id)
            FROM samples s, unnest(s.request_keys) AS k(request_key)
            LEFT JOIN answers a ON a.model_fingerprint = s.model_fingerprint
                               AND a.request_key = k.request_key""").fetchone()
    assert keys[0] == keys[1] and keys[2] == sum(documents.values())  # every document's requests, answered
    _, printed = printed_table(output, "model")
    for task, (raw, normalized) in scored.items():  # the printed table holds what the warehouse holds
        assert printed["smollm2-135m-instruct-float32"][task] == f"{normalized:.2f} (raw {raw:.4f})"


@pytest.mark.slow
def test_the_main_command_runs_named_benchmarks_and_shows_their_leaderboard(tmp_path):
    import duckdb

    returncode, output = main_command(tmp_path, "run", "--limit", "1", "--benchmarks", "arc_easy", "nope")
    assert returncode == 2 and "unknown benchmark(s) nope: declared in " in output
    assert f"{DATA_BENCHMARKS} are arc_challenge, arc_easy, " in output
    assert not (tmp_path / "warehouse.duckdb").exists()  # refused before anything ran

    returncode, output = main_command(
        tmp_path, "run", "--limit", "1", "--benchmarks", "arc_easy", "leaderboard_mmlu_pro"
    )
    assert returncode == 0, output[-3000:]
    steps = [line.split(": ")[:2] for line in output.splitlines() if ": success in " in line]
    assert [step for step, _ in steps] == [f"{k} of 6" for k in range(1, 7)]  # each step of those planned
    assert [run for _, run in steps] == [
        "benchmark_inputs [arc_easy]",
        "model_evaluation [arc_easy|smollm2-135m-instruct-float32]",
        "model_evaluation [arc_easy|smollm2-135m-instruct-bfloat16]",  # after its baseline
        "benchmark_inputs [leaderboard_mmlu_pro]",
        # the bfloat16 entry lists its benchmarks, and not this one
        "model_evaluation [leaderboard_mmlu_pro|smollm2-135m-instruct-float32]",
        "score_protocols",
    ]
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        headlines = conn.execute("SELECT model, benchmark, solver, value FROM leaderboard").fetchall()
    assert sorted((model, benchmark, solver) for model, benchmark, solver, _ in headlines) == [
        ("smollm2-135m-instruct-bfloat16", "arc_easy", "harness"),
        ("smollm2-135m-instruct-float32", "arc_easy", "harness"),
        ("smollm2-135m-instruct-float32", "leaderboard_mmlu_pro", "harness"),
    ]
    header, rows = printed_table(output, "benchmark (measured as) or average")  # a model a column
    assert header[1:] == ["smollm2-135m-instruct-bfloat16", "smollm2-135m-instruct-float32"]
    assert list(rows) == [
        "fingerprint",
        "arc_easy (0-shot acc_norm, first 1 documents)",  # what its cells hold: the run's settings
        "leaderboard_mmlu_pro (5-shot acc, first 1 documents)",
        "open_llm_leaderboard_v1 (average)",
        "open_llm_leaderboard_v2 (average)",
    ]
    for model, benchmark, _, value in headlines:  # each cell is the warehouse's headline, as text
        label = next(label for label in rows if label.startswith(benchmark + " "))
        assert rows[label][model].startswith(f"{value:.3f}")
        # on one document, its 95% interval inside [0, 1] (a Wald interval would be [value, value])
        low, high = map(float, rows[label][model].split("[")[1].rstrip("]").split(","))
        assert 0.0 <= low < high <= 1.0 and (high - low) > 0.5
    assert rows["leaderboard_mmlu_pro (5-shot acc, first 1 documents)"]["smollm2-135m-instruct-bfloat16"] == ""


def test_an_evaluation_leaves_the_process_global_generators_as_they_were():
    import random

    import numpy as np

    from eval_platform.benchmarks.harness import preserved_global_generators

    random.seed(7)
    np.random.seed(7)
    expected = (random.random(), np.random.random())
    random.seed(7)
    np.random.seed(7)
    with preserved_global_generators():
        random.seed(0)  # as the harness reseeds them
        np.random.seed(1234)
    assert (random.random(), np.random.random()) == expected


@pytest.mark.slow
def test_the_index_of_a_task_folder_is_read_from_a_cache_until_one_of_its_files_changes(tmp_path, monkeypatch):
    """The harness's registry of its own tasks (about 14,000 YAML files) is its own index, read from
    a cache once built; a folder's index is built again when one of its files changes, a template
    its tasks include too; a cache that cannot be written leaves the index built."""
    from pathlib import Path

    import lm_eval
    from lm_eval.tasks._index import TaskIndex

    from eval_platform.benchmarks import harness

    own = TaskIndex.build([Path(lm_eval.__file__).parent / "tasks"])
    registered = harness.task_manager().task_index
    assert len(own) > 14_000 and registered.keys() == own.keys()
    assert all(
        (registered[name].kind, registered[name].cfg, registered[name].tags, registered[name].yaml_path)
        == (entry.kind, entry.cfg, entry.tags, entry.yaml_path)
        for name, entry in own.items()
    )

    builds, build = [], TaskIndex.build
    monkeypatch.setattr(
        TaskIndex, "build", staticmethod(lambda paths, **kw: builds.append(paths) or build(paths, **kw))
    )
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "_template_yaml").write_text("output_type: multiple_choice\ntest_split: test\n")
    (folder / "capitals.yaml").write_text("include: _template_yaml\ntask: capitals\ndataset_path: json\n")
    first = harness.cached_task_index(folder, tmp_path / "cache")
    assert first["capitals"].cfg["output_type"] == "multiple_choice" and len(builds) == 1
    assert (
        harness.cached_task_index(folder, tmp_path / "cache")["capitals"].cfg == first["capitals"].cfg
        and len(builds) == 1
    )
    (folder / "_template_yaml").write_text("output_type: generate_until\ntest_split: test\n")
    assert harness.cached_task_index(folder, tmp_path / "cache")["capitals"].cfg["output_type"] == "generate_until"
    assert len(builds) == 2 and len(list((tmp_path / "cache").glob("*.pickle"))) == 2
    (tmp_path / "a file").write_text("")
    unwritable = tmp_path / "a file" / "cache"
    assert harness.cached_task_index(folder, unwritable)["capitals"].cfg["output_type"] == "generate_until"


def test_an_evaluation_keeps_the_harness_versions_without_torchs_environment_report():
    """simple_evaluate's report of the environment runs torch's collect_env (`pip list` and a dozen
    other commands: half a second to a second per evaluation) unless the platform's registry was built first."""
    import lm_eval.evaluator

    from eval_platform.benchmarks.declarations import HARNESS_VERSION
    from eval_platform.benchmarks.harness import task_manager

    task_manager()
    report = {}
    lm_eval.evaluator.add_env_info(report)
    assert report["lm_eval_version"] == HARNESS_VERSION and report["transformers_version"]
    assert report["pretty_env_info"].startswith("not collected")
