"""The team setup of the README ("A team on many machines"), on this machine: Dagster on PostgreSQL,
the daemon and its run queue, every run's steps on Celery workers standing in for hosts, and the
warehouse on DuckLake. A backfill of benchmark x model partitions there equals the same work on one
machine with the embedded defaults, table by table; a worker lost in the middle of a partition
loses nothing and duplicates nothing."""

import time
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance, RunsFilter

from eval_platform.benchmarks.roster import RosterEntry, write_entry
from eval_platform.definitions import defs
from eval_platform.evaluation_assets.partitions import evaluation_key
from eval_platform.resources import WarehouseResource
from tests.evaluation import launchpad
from tests.tables import assert_same_rows, file_snapshot, snapshot
from tests.team.team_deployment import CELERY_SETTINGS, team_deployment

BENCHMARKS = ["arc_easy", "arc_challenge", "mmlu", "winogrande"]
MODELS = {"smollm2-float32": "float32", "smollm2-bfloat16": "bfloat16"}
# The partition whose worker is killed, on a benchmark of its own.
KILLED_BENCHMARK, KILLED_MODEL = "truthfulqa", "smollm2-float32"
ROWS = 8
# Longer than a step here takes alone (seconds), and the broker looks for overdue tasks every second,
# so that a lost worker's task is soon redelivered. Under load a step may outlast it and run twice at
# once; its rows are replaced, not added (test_lake.py shows it for answers and samples).
VISIBILITY_TIMEOUT_S = 30
# The answers a worker keeps in the lake at a time (EVAL_ANSWER_CHUNK): the killed partition's 38
# answers come in ten chunks, so the worker is killed on its first write with nine still to come.
ANSWER_CHUNK = 4


def inputs_config(benchmark_rows: int = ROWS) -> dict:
    return {"ops": {"benchmark_raw_rows": {"config": {"limit": benchmark_rows}}}}


@pytest.fixture(scope="module")
def roster(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("roster")
    for name, dtype in MODELS.items():
        extra = [KILLED_BENCHMARK] if name == KILLED_MODEL else []
        write_entry(
            folder,
            RosterEntry(
                name=name,
                model="local/smollm2-135m-instruct",
                dtype=dtype,
                solvers=("harness",),
                benchmarks=(*BENCHMARKS, *extra),
            ),
        )
    return folder


class OneMachine:
    """The same work on one machine with the embedded defaults: a DuckDB file, Dagster's default
    instance and executor, the jobs run one after another."""

    def __init__(self, folder: Path, roster: Path):
        self.path = folder / "warehouse.duckdb"
        self.instance = DagsterInstance.ephemeral()
        self.resources = launchpad(
            warehouse=WarehouseResource(database=str(self.path)),
            roster=defs().resources["roster"].model_copy(update={"directory": str(roster)}),
        )

    def evaluate(self, benchmarks: list[str], models: list[str]) -> None:
        self.instance.add_dynamic_partitions(
            "benchmarks", [b for b in benchmarks if b not in self.instance.get_dynamic_partitions("benchmarks")]
        )
        for benchmark in benchmarks:
            self.run("benchmark_inputs", benchmark, inputs_config())
        self.instance.add_dynamic_partitions("roster_models", models)
        for benchmark in benchmarks:
            for model in models:
                self.run("model_evaluation", evaluation_key(benchmark, model), {})

    def run(self, job: str, partition, config: dict) -> None:
        result = (
            defs()
            .resolve_job_def(job)
            .execute_in_process(
                partition_key=partition, instance=self.instance, run_config={"resources": self.resources, **config}
            )
        )
        assert result.success


@pytest.fixture(scope="module")
def one_machine(roster, tmp_path_factory) -> OneMachine:
    machine = OneMachine(tmp_path_factory.mktemp("one_machine"), roster)
    machine.evaluate(BENCHMARKS, list(MODELS))
    return machine


@pytest.fixture(scope="module")
def team(roster, tmp_path_factory):
    folder = tmp_path_factory.mktemp("team")
    settings = yaml.safe_load(CELERY_SETTINGS.read_text())
    settings["execution"]["config"]["config_source"]["broker_transport_options"].update(
        visibility_timeout=VISIBILITY_TIMEOUT_S, unacked_restore_interval=1, unacked_restore_throttle=1
    )
    (folder / "celery.yaml").write_text(yaml.safe_dump(settings))
    with team_deployment(
        folder / "deployment",
        workers=2,
        daemon=False,
        celery_settings=folder / "celery.yaml",
        EVAL_ROSTER_DIR=str(roster),
        EVAL_ANSWER_CHUNK=str(ANSWER_CHUNK),
    ) as deployment:
        yield deployment


def materialize_inputs(team, benchmark: str) -> None:
    """A benchmark's inputs from a host's command line (its steps on the workers), the benchmark a key
    of its dimension first (as the roster sensor makes it)."""
    import json

    with team.instance() as instance:
        if benchmark not in instance.get_dynamic_partitions("benchmarks"):
            instance.add_dynamic_partitions("benchmarks", [benchmark])
    team.dagster(
        "asset",
        "materialize",
        "-m",
        "eval_platform.definitions",
        "--select",
        "group:benchmark_inputs",
        "--partition",
        benchmark,
        "--config-json",
        json.dumps(inputs_config()),
    )


def backfill(team, keys: list) -> None:
    team.dagster(
        "job",
        "backfill",
        "-w",
        "workspace.yaml",
        "-j",
        "model_evaluation",
        "--noprompt",
        "--partitions",
        ",".join(str(key) for key in keys),
    )


def lake(team) -> WarehouseResource:
    return WarehouseResource(database=team.env["EVAL_WAREHOUSE"], data_path=team.env["EVAL_LAKE_DATA_PATH"])


def lake_snapshot(team) -> dict:
    with lake(team).get_connection() as conn:
        return snapshot(conn)


def kept_answers(team, run_id: str) -> int:
    """The answers the run has kept in the lake so far (each chunk committed in a transaction of its own)."""
    import duckdb

    with lake(team).get_connection() as conn:
        try:
            return conn.execute("SELECT count(*) FROM answers WHERE run_id = ?", [run_id]).fetchone()[0]
        except duckdb.CatalogException:  # no evaluation has made the table yet
            return 0


def celery_workers(instance, run_id: str, step: str | None = None) -> list[str]:
    """The workers that started the run's steps (or one step), in order, as its event log says."""
    workers = []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        data = event.engine_event_data if event is not None and event.is_engine_event else None
        if data and "Celery worker" in data.metadata and (step is None or event.step_key == step):
            workers.append(data.metadata["Celery worker"].value.split("@")[0])
    return workers


def test_a_backfill_on_two_workers_with_dagster_on_postgres_and_a_lake_equals_one_machine(team, one_machine):
    for benchmark in BENCHMARKS:
        materialize_inputs(team, benchmark)
    team.start_daemon()
    with team.instance() as instance:
        deadline = time.monotonic() + 120  # the roster sensor's first tick makes the roster the model dimension
        while sorted(instance.get_dynamic_partitions("roster_models")) != sorted(MODELS):
            assert time.monotonic() < deadline, "the roster sensor did not add the roster's models"
            time.sleep(1)
    backfill(team, [evaluation_key(benchmark, model) for benchmark in BENCHMARKS for model in MODELS])
    runs = team.wait_for_runs("model_evaluation", len(BENCHMARKS) * len(MODELS))
    assert [run.status.value for run in runs] == ["SUCCESS"] * len(BENCHMARKS) * len(MODELS)
    with team.instance() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        workers = {worker for run in runs for worker in celery_workers(instance, run.run_id)}
        records = instance.get_run_records(RunsFilter(job_name="model_evaluation"))
        inputs = instance.get_runs(RunsFilter(job_name="__ASSET_JOB"))
    assert len(inputs) == len(BENCHMARKS) and all(run.status.value == "SUCCESS" for run in inputs)
    # The queue's limit (deploy/team/dagster.yaml): one run at a time per roster model, two models at once.
    for model in MODELS:
        spans = sorted(
            (r.start_time, r.end_time) for r in records if r.dagster_run.tags["dagster/partition/model"] == model
        )
        assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False)), (
            model,
            spans,
        )
    spans = sorted((r.start_time, r.end_time) for r in records)
    assert any(next_start < end for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False)), (
        "no two runs overlapped"
    )
    assert workers == {"host-1", "host-2"}
    assert_same_rows(lake_snapshot(team), file_snapshot(one_machine.path))


def test_a_worker_killed_in_the_middle_of_a_partition_loses_nothing_and_duplicates_nothing(team, one_machine):
    materialize_inputs(team, KILLED_BENCHMARK)
    runs_before = len(team.wait_for_runs("model_evaluation", 0))
    backfill(team, [evaluation_key(KILLED_BENCHMARK, KILLED_MODEL)])
    # The worker is killed on a write, not as the step starts: once the lake holds the first chunk of
    # the run's answers (ANSWER_CHUNK at a time, so most of them are still to come).
    with team.instance() as instance:
        deadline = time.monotonic() + 300
        while True:
            runs = instance.get_runs(RunsFilter(job_name="model_evaluation"))
            run_id = runs[0].run_id if len(runs) > runs_before else ""
            started = celery_workers(instance, run_id, "benchmark_evaluation") if run_id else []
            if started and kept_answers(team, run_id):
                break
            assert time.monotonic() < deadline, f"the evaluation never {'kept an answer' if started else 'started'}"
            time.sleep(0.2)
    team.kill_worker(started[0])
    runs = team.wait_for_runs("model_evaluation", runs_before + 1)
    with team.instance() as instance:
        run = runs[0]
        assert run.status.value == "SUCCESS"
        again = celery_workers(instance, run.run_id, "benchmark_evaluation")
    # The lost worker's task went back to the queue and the other worker evaluated the partition again
    # (maybe more than once: a step that outlasts the visibility timeout is handed out again).
    assert again[0] == started[0] and len(again) >= 2 and started[0] not in again[1:]
    one_machine.evaluate([KILLED_BENCHMARK], [KILLED_MODEL])
    assert_same_rows(lake_snapshot(team), file_snapshot(one_machine.path))
