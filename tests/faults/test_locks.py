"""Locks: a run that finds the warehouse held (a read-only DuckDB session, another run) says in its
log what it waits for, gives up after the configured time with a clear error, and leaves the file
intact; once the holder lets go it proceeds; runs of different partitions in parallel all land."""

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import duckdb
import pytest
from dagster import DagsterInstance

from eval_platform.evaluation_assets.benchmarks.assets import benchmark_raw_rows
from eval_platform.resources import WarehouseResource
from tests.conftest import DATA_BENCHMARKS, PROJECT_ROOT
from tests.evaluation import materialize_configured, with_partitions
from tests.processes import STARTED, stop_group

ARC_EASY_ROWS = len((DATA_BENCHMARKS / "arc_easy.jsonl").read_text(encoding="utf-8").strip().split("\n"))


@contextmanager
def holder(path, kind):
    """A process holding the warehouse until a line is written to its stdin (or it is stopped)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.faults.hold_warehouse", str(path), kind],
        cwd=PROJECT_ROOT,
        start_new_session=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    STARTED.append(process.pid)
    try:
        assert process.stdout.readline().strip() == "held"
        yield process
    finally:
        stop_group(process, grace_s=2)


def ingest(path, lock_timeout_s, instance=None):
    """ARC-Easy's raw rows, with a short wait for the warehouse; (result, the run's log messages)."""
    instance = with_partitions(instance, "arc_easy")
    warehouse = WarehouseResource(database=str(path), lock_timeout_s=lock_timeout_s, wait_log_interval_s=1)
    result = materialize_configured(
        [benchmark_raw_rows],
        {"warehouse": warehouse},
        partition_key="arc_easy",
        instance=instance,
        raise_on_error=False,
    )
    messages = [e.user_message for e in instance.all_logs(result.run_id)]
    return result, messages


def failure(result) -> str:
    """The step failures' errors, with their causes."""
    lines = []
    for event in result.all_events:
        error = event.event_specific_data.error if event.is_step_failure else None
        while error is not None:
            lines.append(f"{error.cls_name}: {error.message}")
            error = error.cause
    return "\n".join(lines)


def rows(path) -> int:
    with duckdb.connect(str(path), read_only=True) as conn:
        return conn.execute("SELECT count(*) FROM raw_rows").fetchone()[0]


@pytest.fixture
def warehouse_file(tmp_path):
    path = tmp_path / "warehouse.duckdb"
    result, _ = ingest(path, 5)
    assert result.success
    return path


@pytest.mark.parametrize("kind, named", [("session", "a DuckDB session"), ("run", "run process")])
def test_a_held_warehouse_is_waited_for_then_given_up_clearly(warehouse_file, kind, named):
    assert rows(warehouse_file) == ARC_EASY_ROWS
    with holder(warehouse_file, kind) as process:
        start = time.monotonic()
        result, messages = ingest(warehouse_file, lock_timeout_s=3)
        waited = time.monotonic() - start
    assert not result.success and waited >= 3
    error = failure(result)
    assert "WarehouseBusyError" in error and f"stayed locked for 3 s by {named}" in error
    if kind == "run":
        assert f"run process {process.pid}" in error
    waits = [m for m in messages if m.startswith("Waiting for the warehouse")]
    assert waits and named in waits[0] and "giving up after 3 s" in waits[0]
    # it gave up at its deadline, by its own clock, however slowly the machine ran the rest
    assert all(int(m.split("(")[1].split(" s so far")[0]) <= 3 for m in waits)
    assert rows(warehouse_file) == ARC_EASY_ROWS  # the file is intact and unchanged


def waiting(instance) -> bool:
    """Whether a run of the instance has logged that it waits for the warehouse."""
    return any(
        record.user_message.startswith("Waiting for the warehouse")
        for run in instance.get_runs()
        for record in instance.all_logs(run.run_id)
    )


def test_a_run_proceeds_once_the_session_is_closed(warehouse_file):
    instance = DagsterInstance.ephemeral()
    with holder(warehouse_file, "session") as process, ThreadPoolExecutor(1) as pool:
        run = pool.submit(ingest, warehouse_file, 600, instance)
        deadline = time.monotonic() + 300
        while not waiting(instance) and time.monotonic() < deadline and not run.done():
            time.sleep(0.2)
        assert waiting(instance), "the run never said it waits for the held warehouse"
        process.stdin.write("release\n")  # the session closes only once the run is seen waiting
        process.stdin.flush()
        result, _ = run.result(timeout=600)
    assert result.success
    assert rows(warehouse_file) == ARC_EASY_ROWS  # replaced, not duplicated


def test_parallel_runs_of_different_partitions_all_land(tmp_path):
    path = tmp_path / "warehouse.duckdb"
    benchmarks = ["arc_easy", "mmlu", "winogrande", "gsm8k"]
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.faults.land_partition", str(path), name],
            cwd=PROJECT_ROOT,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for name in benchmarks
    ]
    STARTED.extend(p.pid for p in processes)
    for process in processes:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr.decode()[-3000:]
    with duckdb.connect(str(path), read_only=True) as conn:
        landed = dict(conn.execute("SELECT benchmark, count(*) FROM documents GROUP BY ALL").fetchall())
        duplicates = conn.execute(
            "SELECT count(*) - count(DISTINCT (benchmark, source_row_id)) FROM raw_rows"
        ).fetchone()
    expected = {
        name: len((DATA_BENCHMARKS / f"{name}.jsonl").read_text(encoding="utf-8").strip().split("\n"))
        for name in benchmarks
    }
    assert landed == expected and duplicates == (0,)  # every partition landed, in full, once
