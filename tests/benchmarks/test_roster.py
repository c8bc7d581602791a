"""The roster: models declared as files, each a key of the model dimension; the nightly refresh of
every roster model (an unchanged night computes nothing); a changed entry re-evaluated; a new
checkpoint evaluated and compared with its predecessor and baseline; the leaderboard."""

import shutil
from datetime import datetime

import pytest
import yaml
from dagster import DagsterInstance, Definitions, SkipReason, build_sensor_context, partition_loading_context

from eval_platform.benchmarks.declarations import declared_benchmarks
from eval_platform.benchmarks.leaderboard import headline_rows, leaderboard_plot, leaderboard_table
from eval_platform.benchmarks.protocols import declared_protocols
from eval_platform.benchmarks.roster import RosterError, evaluation_order, load_roster
from eval_platform.environment import environment
from eval_platform.evaluation_assets.benchmarks import checks
from eval_platform.evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions
from eval_platform.resources import DeclarationsResource, LanguageModelResource, ModelGatewayResource, RosterResource
from eval_platform.schedules.sensors import checkpoint_sensor, roster_sensor
from speed.nightly_refresh import evaluation_counts, run_night, run_request
from tests.conftest import PROJECT_ROOT

ROWS = 8


BENCHMARKS, PROTOCOLS = (
    declared_benchmarks(environment().benchmarks_dir),
    declared_protocols(environment().protocols_dir),
)


def roster_of(folder):
    return load_roster(folder, BENCHMARKS, PROTOCOLS)


def write(folder, stem, **fields):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.yaml").write_text(yaml.safe_dump(fields))


# --- the roster as data ---------------------------------------------------------------------------


def test_the_demo_roster_is_smollm2_in_two_precisions():
    roster = roster_of(environment().roster_dir)
    assert sorted(roster) == ["smollm2-135m-instruct-bfloat16", "smollm2-135m-instruct-float32"]
    float32, bfloat16 = roster["smollm2-135m-instruct-float32"], roster["smollm2-135m-instruct-bfloat16"]
    assert (float32.model, float32.dtype, bfloat16.model, bfloat16.dtype) == (
        "local/smollm2-135m-instruct",
        "float32",
        "local/smollm2-135m-instruct",
        "bfloat16",
    )
    assert bfloat16.references() == {"baseline": float32.name}
    assert "gsm8k" in float32.evaluated_on(BENCHMARKS, PROTOCOLS)
    assert "gsm8k" not in bfloat16.evaluated_on(BENCHMARKS, PROTOCOLS)
    assert bfloat16.evaluation_settings() == {"solvers": ("harness",)}
    assert evaluation_order(roster) == [float32.name, bfloat16.name]  # a baseline first


@pytest.mark.parametrize(
    "content, problem",
    [
        ("model: [unclosed", "not readable as YAML"),
        ("- a list", "a roster entry is a mapping"),
        ("model: local/x\ndtpye: bfloat16", "dtpye: Extra inputs are not permitted"),
        ("benchmarks: [arc_easy, arc_hard]", "benchmarks: unknown ['arc_hard']"),
        ("baseline: nobody", "baseline: 'nobody' is not in the roster"),
        ("batch_size: 0", "batch_size: Input should be greater than 0"),
        ("name: two words", "name 'two words' must be letters"),
    ],
)
def test_a_bad_roster_file_is_refused_naming_the_file_and_field(tmp_path, content, problem):
    (tmp_path / "bad.yaml").write_text(content)
    with pytest.raises(RosterError, match=str(tmp_path / "bad.yaml")) as refused:
        roster_of(tmp_path)
    assert problem in str(refused.value)


def test_an_entrys_run_tags_are_on_every_run_requested_for_it(tmp_path):
    from dagster import DagsterInstance

    from eval_platform.schedules.planner import evaluation_run_requests

    write(tmp_path, "gpu", model="local/x", run_tags={"eval/gpu": "a100"}, benchmarks=["arc_easy", "mmlu"])
    write(tmp_path, "cpu", model="local/y", benchmarks=["arc_easy"])
    with DagsterInstance.ephemeral() as instance:
        requests = evaluation_run_requests(instance, roster_of(tmp_path), ["arc_easy", "mmlu"], PROTOCOLS, "night")
    assert sorted(
        (r.partition_key.keys_by_dimension["model"], r.partition_key.keys_by_dimension["benchmark"], dict(r.tags))
        for r in requests
    ) == [("cpu", "arc_easy", {}), ("gpu", "arc_easy", {"eval/gpu": "a100"}), ("gpu", "mmlu", {"eval/gpu": "a100"})]
    (tmp_path / "cpu.yaml").write_text("run_tags: {eval/gpu: [a100]}")
    with pytest.raises(RosterError, match="run_tags"):
        roster_of(tmp_path)


def test_a_name_used_twice_or_a_cycle_is_refused(tmp_path):
    write(tmp_path, "a", name="same")
    write(tmp_path, "b", name="same")
    with pytest.raises(RosterError, match="'same' is already used by .*a.yaml"):
        load_roster(tmp_path)
    (tmp_path / "b.yaml").unlink()
    write(tmp_path, "a", baseline="b")
    write(tmp_path, "b", baseline="a")
    with pytest.raises(RosterError, match="cycle: a -> b -> a"):
        evaluation_order(load_roster(tmp_path))


def test_a_roster_resource_reads_the_declarations_in_its_declarations_folders(tmp_path, monkeypatch):
    """Its configured folders, whatever the environment's; unset, the environment's as it is now."""
    (tmp_path / "benchmarks").mkdir()
    shutil.copy(PROJECT_ROOT / "data" / "benchmarks" / "arc_easy.yaml", tmp_path / "benchmarks")
    monkeypatch.setenv("EVAL_BENCHMARKS_DIR", str(PROJECT_ROOT / "data" / "benchmarks"))
    monkeypatch.setenv("EVAL_PROTOCOLS_DIR", str(tmp_path / "no protocols"))
    roster = RosterResource(
        declarations=DeclarationsResource(
            benchmarks_dir=str(tmp_path / "benchmarks"), protocols_dir=str(PROJECT_ROOT / "data" / "protocols")
        )
    )
    assert list(roster.benchmarks()) == ["arc_easy"] and roster.benchmarks()["arc_easy"].title == "ARC-Easy"
    assert roster.protocols().keys() == PROTOCOLS.keys()
    assert RosterResource().benchmarks().keys() == BENCHMARKS.keys() and RosterResource().protocols() == {}


# --- the leaderboard --------------------------------------------------------------------------------


def result(
    model, benchmark, metric, shots, value, solver="harness", task=None, flt="none", fingerprint=None, ci=0.1, key=""
):
    return {
        "model": model,
        "model_fingerprint": fingerprint or f"local/{model}@1",
        "benchmark": benchmark,
        "solver": solver,
        "settings_key": (f"{shots}-shot" if shots is not None else "default shots") + key,
        "task": task or benchmark,
        "metric": metric,
        "filter": flt,
        "num_fewshot": shots,
        "n": 10,
        "value": value,
        "ci_low": value - ci if ci is not None else None,
        "ci_high": value + ci if ci is not None else None,
    }


def test_the_leaderboard_shows_each_models_headline_under_a_header_that_says_what_it_holds():
    results = [
        result("f32", "arc_challenge", "acc", 25, 0.3),
        result("f32", "arc_challenge", "acc_norm", 0, 0.4),
        result("f32", "arc_challenge", "acc_norm", 25, 0.5),
        result("f32", "arc_challenge", "acc", 0, 0.7, solver="letter"),
        result("bf16", "arc_challenge", "acc_norm", 0, 0.45, fingerprint="local/f32@1+bfloat16"),
        result("f32", "gsm8k", "exact_match", 0, 0.1, solver="generate", flt="strict-match", key=", 96 new tokens"),
        result("f32", "gsm8k", "exact_match", 0, 0.0, solver="generate", flt="flexible-extract", key=", 96 new tokens"),
        result("f32", "mmlu", "acc", 5, 0.2, task="mmlu_anatomy"),
        result("f32", "mmlu", "acc", 5, 0.25),  # the benchmark's own number, over every subject
    ]
    headlines = headline_rows(results, BENCHMARKS)
    assert [
        (h["model"], h["benchmark"], h["solver"], h["metric"], h["num_fewshot"], h["value"]) for h in headlines
    ] == [
        ("bf16", "arc_challenge", "harness", "acc_norm", 0, 0.45),
        ("f32", "arc_challenge", "harness", "acc_norm", 25, 0.5),
        ("f32", "gsm8k", "generate", "exact_match", 0, 0.1),
        ("f32", "mmlu", "harness", "acc", 5, 0.25),
    ]
    sampled = ", 4 samples at temperature 0.7"
    beside = [  # a sampled run launched beside the nightly greedy one: the greedy one stays the headline
        result("f32", "gsm8k", "exact_match", 0, 0.3, solver="generate", flt="strict-match", key=sampled),
        *results,
    ]
    assert [h["value"] for h in headline_rows(beside, BENCHMARKS)] == [h["value"] for h in headlines]
    declared_sampled = {**BENCHMARKS, "gsm8k": BENCHMARKS["gsm8k"].model_copy(update={"temperature": 0.7})}
    assert [h["value"] for h in headline_rows(beside, declared_sampled) if h["benchmark"] == "gsm8k"] == [0.3]
    averages = [
        {"protocol": "open_llm_leaderboard_v1", "model": "f32", "score": 0.3,
         "status": "partial: 2 of 6 tasks (missing hellaswag, mmlu, truthfulqa_mc2, winogrande)"},
        {"protocol": "open_llm_leaderboard_v1", "model": "bf16", "score": 0.35, "status": "complete"},
    ]  # fmt: skip
    table = leaderboard_table(headlines, averages, BENCHMARKS).set_index("model")
    assert list(table.index) == ["bf16", "f32"]  # a complete average first
    # each header names what its cells hold: a model measured otherwise has a column of its own
    assert list(table.columns) == [
        "fingerprint",
        "arc_challenge (0-shot acc_norm)",
        "arc_challenge (25-shot acc_norm)",
        "gsm8k (0-shot exact_match,strict-match by generate, 96 new tokens)",
        "mmlu (5-shot acc)",
        "open_llm_leaderboard_v1 (average)",
    ]
    assert table.loc["f32", "arc_challenge (25-shot acc_norm)"] == "0.500 [0.400, 0.600]"
    assert table.loc["bf16", "arc_challenge (0-shot acc_norm)"] == "0.450 [0.350, 0.550]"
    assert (
        table.loc["bf16", "arc_challenge (25-shot acc_norm)"]
        == table.loc["f32", "arc_challenge (0-shot acc_norm)"]
        == ""
    )
    assert (
        table.loc["f32", "gsm8k (0-shot exact_match,strict-match by generate, 96 new tokens)"] == "0.100 [0.000, 0.200]"
    )
    assert table.loc["f32", "mmlu (5-shot acc)"] == "0.250 [0.150, 0.350]"
    assert table.loc["f32", "open_llm_leaderboard_v1 (average)"].startswith("0.3000 (partial: 2 of 6 tasks")
    assert table.loc["bf16", "open_llm_leaderboard_v1 (average)"] == "0.3500 (complete)"
    assert (table.loc["f32", "fingerprint"], table.loc["bf16", "fingerprint"]) == ("f32@1", "f32@1+bfloat16")


def test_a_harness_task_of_no_declaration_and_a_group_are_columns_too():
    """A harness task launched by name, declared nowhere, is a column headed by its first metric; a
    group's headline has no standard error, so no interval is shown for it."""
    results = [
        result("f32", "leaderboard_bbh", "acc_norm", None, 0.3, ci=None),
        result("f32", "leaderboard_bbh", "acc_norm", 3, 0.2, task="leaderboard_bbh_navigate"),
        result("f32", "gsm8k_local", "exact_match", 5, 0.1, task="gsm8k", flt="strict-match", ci=0.1959964),
    ]
    headlines = headline_rows(results, BENCHMARKS)
    table = leaderboard_table(headlines, [], BENCHMARKS).set_index("model")
    assert table.loc["f32", "leaderboard_bbh (acc_norm)"] == "0.300"
    assert table.loc["f32", "gsm8k_local (5-shot exact_match,strict-match)"] == "0.100 [-0.096, 0.296]"
    assert "png" in leaderboard_plot(headlines)


# --- nightly, sensors -------------------------------------------------------------------------------


@pytest.fixture
def platform(tmp_path, warehouse):
    """The code location's jobs over a test warehouse and a roster of two models (the demo's two
    precisions of SmolLM2) on ARC-Easy and MMLU, each benchmark cut to its first ROWS rows."""
    from eval_platform.definitions import defs

    roster = RosterResource(directory=str(tmp_path / "roster"))
    write(
        tmp_path / "roster",
        "f32",
        model="local/smollm2-135m-instruct",
        dtype="float32",
        benchmarks=["arc_easy", "mmlu"],
    )
    write(
        tmp_path / "roster",
        "bf16",
        model="local/smollm2-135m-instruct",
        dtype="bfloat16",
        solvers=["harness"],
        benchmarks=["arc_easy", "mmlu"],
        baseline="f32",
    )
    test_defs = Definitions(
        assets=list(defs().assets),
        jobs=list(defs().jobs),
        resources={
            "warehouse": warehouse,
            "roster": roster,
            "evaluation_model": LanguageModelResource(),
            "gateway": ModelGatewayResource(),
        },
    )
    # a persistent instance, as the daemon's: the nightly schedule adds the specs to the benchmark dimension
    (tmp_path / "dagster").mkdir()
    return test_defs, roster, warehouse, DagsterInstance.local_temp(str(tmp_path / "dagster")), tmp_path


def run_requests(test_defs, instance, job, requests) -> dict[str, dict]:
    """Execute each run request as the daemon would (inputs cut to ROWS rows); the evaluations'
    predictions counts by partition."""
    counts = {}
    for request in requests:
        counts |= evaluation_counts(run_request(test_defs, instance, job, request.partition_key, ROWS))
    return counts


def night(platform, day: int) -> tuple[dict[str, dict], float]:
    """A nightly refresh of the roster's benchmarks, as the daemon runs it (speed/nightly_refresh.py)."""
    test_defs, _, _, instance, _ = platform
    return run_night(test_defs, instance, datetime(2026, 11, day, 2, 0), ["arc_easy", "mmlu"], ROWS)


def computed(counts: dict[str, dict]) -> dict[str, int]:
    return {key: sum(solver["computed"] for solver in solvers.values()) for key, solvers in counts.items()}


@pytest.mark.slow
def test_an_unchanged_nightly_refresh_computes_no_answer(platform):
    first, _ = night(platform, 23)
    assert sorted(first) == sorted(str(evaluation_key(b, m)) for b in ("arc_easy", "mmlu") for m in ("f32", "bf16"))
    assert all(count > 0 for count in computed(first).values())
    second, seconds = night(platform, 24)
    print(f"\nunchanged night: {seconds:.1f} s for {len(second)} evaluations")
    assert computed(second) == {key: 0 for key in first}
    assert all(solver["forward_passes"] == 0 for solvers in second.values() for solver in solvers.values())
    _, _, warehouse, _, tmp_path = platform
    write(
        tmp_path / "roster",
        "bf16",
        model="local/smollm2-135m-instruct",
        dtype="float16",  # a changed entry
        solvers=["harness"],
        benchmarks=["arc_easy", "mmlu"],
        baseline="f32",
    )
    third, _ = night(platform, 25)
    assert {key: count > 0 for key, count in computed(third).items()} == {
        key: key.endswith("|bf16") for key in first
    }  # only the changed entry is evaluated again
    with warehouse.get_connection() as conn:
        fingerprints = conn.execute("SELECT DISTINCT model, model_fingerprint FROM results ORDER BY 1").fetchall()
    assert [(m, f.rsplit("@")[-1].split("+")[-1] if "+" in f else "float32") for m, f in fingerprints] == [
        ("bf16", "float16"),
        ("f32", "float32"),
    ]


def test_the_roster_sensor_adds_partitions_and_evaluates_a_changed_entry(platform):
    test_defs, roster, _, instance, tmp_path = platform

    def tick(cursor=None):
        with build_sensor_context(instance=instance, resources={"roster": roster}, cursor=cursor) as context:
            return roster_sensor(context)

    first = tick()
    assert first.run_requests == [] and first.dynamic_partitions_requests[0].partition_keys == ["bf16", "f32"]
    again = tick(first.cursor)
    assert again.run_requests == []
    write(
        tmp_path / "roster",
        "f32",
        model="local/smollm2-135m-instruct",
        dtype="float32",
        benchmarks=["arc_easy"],
        batch_size=4,
    )
    changed = tick(again.cursor)
    assert [r.partition_key for r in changed.run_requests] == [evaluation_key("arc_easy", "f32")]
    # an entry that now lists a harness task's benchmark too: both by the one job, checked as the daemon
    # checks a sensor's requests
    write(
        tmp_path / "roster",
        "f32",
        model="local/smollm2-135m-instruct",
        dtype="float32",
        benchmarks=["arc_easy", "leaderboard_ifeval"],
        batch_size=4,
    )
    with (
        partition_loading_context(dynamic_partitions_store=instance),
        build_sensor_context(
            instance=instance, resources={"roster": roster}, cursor=changed.cursor, definitions=test_defs
        ) as context,
    ):
        both = roster_sensor.evaluate_tick(context)
    assert [(r.job_name, r.partition_key) for r in both.run_requests] == [
        ("model_evaluation", evaluation_key("arc_easy", "f32")),
        ("model_evaluation", evaluation_key("leaderboard_ifeval", "f32")),
    ]


@pytest.mark.slow
def test_a_new_checkpoint_is_evaluated_and_compared_with_its_predecessor_and_baseline(platform):
    from eval_engine import DEFAULT_LOCAL_MODEL, materialize_weights

    test_defs, roster, warehouse, instance, tmp_path = platform
    checkpoints = tmp_path / "checkpoints"
    write(checkpoints, "checkpoints", benchmarks=["arc_easy"], solvers=["harness"], baseline="f32")
    sensor = checkpoint_sensor(checkpoints, "test_checkpoint_sensor")

    def tick():
        with build_sensor_context(instance=instance, resources={"roster": roster}) as context:
            return sensor(context)

    assert isinstance(tick(), SkipReason)
    instance.add_dynamic_partitions(roster_partitions.name, ["f32"])
    instance.add_dynamic_partitions(benchmark_partitions.name, ["arc_easy"])
    run_request(test_defs, instance, "benchmark_inputs", "arc_easy", ROWS)
    run_request(test_defs, instance, "model_evaluation", evaluation_key("arc_easy", "f32"))  # the baseline
    weights, _ = materialize_weights(DEFAULT_LOCAL_MODEL, environment().model_cache)
    for step in ("step-100", "step-200"):  # a training run writes its checkpoints one after the other
        shutil.copytree(weights, checkpoints / step)
        result = tick()
        assert [r.partition_key for r in result.run_requests] == [evaluation_key("arc_easy", step)]
        assert step in instance.get_dynamic_partitions(roster_partitions.name)
        counts = run_requests(test_defs, instance, "model_evaluation", result.run_requests)
        assert computed(counts) == {str(evaluation_key("arc_easy", step)): 4 * ROWS}  # a new model: every choice
    assert isinstance(tick(), SkipReason)
    entry = roster_of(tmp_path / "roster")["step-200"]
    assert (entry.model, entry.previous, entry.baseline) == (f"local/{checkpoints / 'step-200'}", "step-100", "f32")
    with warehouse.get_connection() as conn:
        compared = conn.execute(
            "SELECT model_b, relation, metric, items, difference, flipped_to_wrong "
            "FROM comparisons WHERE model_a = 'step-200' ORDER BY 1, 3"
        ).fetchall()
    assert [row[:4] for row in compared] == [
        ("f32", "baseline", "acc", ROWS),
        ("f32", "baseline", "acc_norm", ROWS),
        ("step-100", "previous", "acc", ROWS),
        ("step-100", "previous", "acc_norm", ROWS),
    ]
    assert all(row[4] == 0 and row[5] == [] for row in compared)  # the same weights: no difference, nothing flipped
    assert checks.no_drop_against_baseline(warehouse=warehouse).passed  # the same weights: no drop


def test_a_benchmark_declares_its_own_headline():
    from eval_platform.benchmarks.leaderboard import headline_of, headline_task

    arc_easy = headline_of(BENCHMARKS["arc_easy"])  # ARC-Easy is in no protocol: its declared zero-shot acc_norm
    assert (arc_easy.solver, arc_easy.metric, arc_easy.num_fewshot) == ("harness", "acc_norm", 0)
    cot = headline_of(BENCHMARKS["gsm8k_cot"])
    assert (cot.metric, cot.filter, cot.num_fewshot) == ("exact_match", "strict-match", 8)
    assert (
        headline_task(BENCHMARKS["mmlu"]) == "mmlu"
        and headline_task(BENCHMARKS["leaderboard_bbh"]) == "leaderboard_bbh"
    )
    bbh = headline_of(BENCHMARKS["leaderboard_bbh"])  # a harness task's own shots: none declared
    assert (bbh.metric, bbh.num_fewshot) == ("acc_norm", None)


@pytest.mark.slow
def test_a_benchmarks_folder_set_in_the_launchpad_alone_reaches_the_jobs_the_views_and_the_leaderboard(
    tmp_path, monkeypatch
):
    """A benchmark declared only in a folder the launchpad names (the environment names the project's):
    the code location's jobs ingest and evaluate it, the leaderboard ranks it, and the warehouse's
    wide leaderboard has its column."""
    from eval_platform.definitions import defs

    folder = tmp_path / "benchmarks"
    (folder / "fewshot").mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / "data" / "benchmarks" / "arc_easy.yaml", folder / "science_easy.yaml")
    shutil.copy(PROJECT_ROOT / "data" / "benchmarks" / "arc_easy.jsonl", folder)
    shutil.copy(PROJECT_ROOT / "data" / "benchmarks" / "fewshot" / "arc_easy_train.jsonl", folder / "fewshot")
    write(tmp_path / "roster", "smol", model="local/smollm2-135m-instruct", benchmarks=["science_easy"])
    monkeypatch.delenv("EVAL_BENCHMARKS_DIR", raising=False)
    assert "science_easy" not in declared_benchmarks(environment().benchmarks_dir)
    database = tmp_path / "warehouse.duckdb"
    launchpad = {
        "resources": {
            "declarations": {"config": {"benchmarks_dir": str(folder)}},
            "roster": {"config": {"directory": str(tmp_path / "roster")}},
            "warehouse": {"config": {"database": str(database)}},
        }
    }
    limit = {"limit": 2}
    code_location = defs()
    with DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(benchmark_partitions.name, ["science_easy"])
        instance.add_dynamic_partitions(roster_partitions.name, ["smol"])
        for job, partition, ops in (
            ("benchmark_inputs", "science_easy", {"benchmark_raw_rows": {"config": limit}}),
            (
                "model_evaluation",
                str(evaluation_key("science_easy", "smol")),
                {"benchmark_evaluation": {"config": limit}},
            ),
            ("score_protocols", None, {}),
        ):
            result = code_location.resolve_job_def(job).execute_in_process(
                run_config={**launchpad, "ops": ops}, partition_key=partition, instance=instance
            )
            assert result.success, job
    import duckdb

    with duckdb.connect(str(database), read_only=True) as conn:
        (documents,) = conn.execute("SELECT count(*) FROM documents WHERE benchmark = 'science_easy'").fetchone()
        ranked = conn.execute("SELECT model, metric FROM leaderboard WHERE benchmark = 'science_easy'").fetchall()
        wide = conn.execute('SELECT model, "science_easy", "science_easy measured" FROM leaderboard_wide').fetchall()
    assert documents == 2
    assert ranked == [("smol", "acc_norm")]
    assert [(model, measured) for model, _, measured in wide] == [("smol", "0-shot acc_norm, first 2 documents")]
