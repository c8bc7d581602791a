"""Two materialisations of the same partition at once on one DuckDB file: both end, each having
waited its turn at the warehouse, and the file holds one copy of the partition's rows, as one run
leaves it.

Two processes evaluate MMLU-Pro's shipped slice with the served instant model
(tests/completions_server.py --instant) as one partition of benchmark_evaluation, on one warehouse
file that a third process (a run's connection) holds while they start: both say, naming that
holder, that they wait for the warehouse, and once it lets go they run side by side. Each takes
the file in turns by short locked connections (eval_platform/common/connections.py): each keeps its
answers in chunks by request key (a key kept twice is replaced, not doubled), then replaces the
partition's samples, results and evaluation. The server holds every answer until both have asked
for their first (POST /hold: it answers once a request comes twice), so neither finds the other's
answers when it starts, and both ask the model for all of them, however loaded the machine; the
answers, samples, results and evaluations end as one uninterrupted run leaves them. Each run keeps
its own per-document history, as every run of a partition does (the regression watch reads the
latest runs), and its row saying where it computed answers."""

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest

from tests.conftest import PROJECT_ROOT
from tests.faults.scenarios import instant_roster, instant_server, prompts_answered, served_evaluation
from tests.processes import STARTED, default_signals, stop_group
from tests.tables import assert_same_rows, file_snapshot

CHUNK = 40  # answers per chunk: about 17 chunks a run, so the two runs' writes interleave
CHECK_PROMPTS = 1  # every run checks the server's log-probabilities first, on one prompt
WAITING = "Waiting for the warehouse"
PER_RUN = ("history", "evaluation_runs")  # rows of each run, by design
DEADLINE_S = 600


@pytest.fixture(scope="module")
def server():
    """The instant completions server, 0.02 s per HTTP request."""
    with instant_server(0.02) as address:
        yield address


@pytest.fixture(autouse=True)
def chunks(monkeypatch):
    monkeypatch.setenv("EVAL_ANSWER_CHUNK", str(CHUNK))


def query(path, sql: str) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def start(command: list[str], **popen) -> subprocess.Popen:
    process = subprocess.Popen(
        command, cwd=PROJECT_ROOT, env=os.environ.copy(), start_new_session=True, preexec_fn=default_signals, **popen
    )
    STARTED.append(process.pid)
    return process


def wait_until(condition, what: str, processes: list[subprocess.Popen], logs: list[Path]) -> None:
    """Until `condition()`, within DEADLINE_S (checked however quiet the processes are); a process
    that ends meanwhile fails the test with its log."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        for process, log in zip(processes, logs, strict=True):
            assert process.poll() is None, (
                f"a run ended ({process.returncode}) before {what}:\n{log.read_text()[-3000:]}"
            )
        assert time.monotonic() < deadline, f"not {what} within {DEADLINE_S} s"
        time.sleep(0.2)


def history_by_run(path) -> list[list[tuple]]:
    """Each run's history, without the columns naming its run and time."""
    rows = query(path, "SELECT run_id, * EXCLUDE (run_id, scored_at, prediction_run_id) FROM history ORDER BY ALL")
    runs: dict[str, list[tuple]] = {}
    for run_id, *row in rows:
        runs.setdefault(run_id, []).append(tuple(row))
    return list(runs.values())


def test_two_runs_of_one_partition_at_once_take_turns_and_leave_one_copy(tmp_path, server):
    reference = tmp_path / "reference" / "warehouse.duckdb"
    reference.parent.mkdir()
    before = prompts_answered(server)
    served_evaluation(str(reference), f"{server}/v1")
    needed = query(reference, "SELECT count(*) FROM answers")[0][0]
    assert prompts_answered(server) - before == needed + CHECK_PROMPTS

    path, roster = tmp_path / "shared" / "warehouse.duckdb", tmp_path / "roster"
    path.parent.mkdir()
    instant_roster(roster)  # written once, read by both runs
    holder = start(
        [sys.executable, "-m", "tests.faults.hold_warehouse", str(path), "run"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    logs = [tmp_path / f"run-{n}.log" for n in (1, 2)]
    runs: list[subprocess.Popen] = []
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        urllib.request.urlopen(urllib.request.Request(f"{server}/hold", data=b"{}", method="POST")).read()
        before = prompts_answered(server)
        for log in logs:
            with log.open("w") as stderr:
                runs.append(
                    start(
                        [sys.executable, "-m", "tests.faults.scenarios", "served_partition"]
                        + [str(path), f"{server}/v1", str(roster)],
                        stdout=subprocess.DEVNULL,
                        stderr=stderr,
                    )
                )
        # both runs are under way at once: each waits for the warehouse the holder keeps
        wait_until(lambda: all(WAITING in log.read_text() for log in logs), "both runs waited", runs, logs)
        assert holder.stdin is not None
        holder.stdin.write("release\n")
        holder.stdin.flush()
        assert holder.wait(timeout=60) == 0
        for run, log in zip(runs, logs, strict=True):
            try:
                code = run.wait(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                code = None
            assert code == 0, f"exit {code}:\n{log.read_text()[-3000:]}"
    finally:
        for process in [holder, *runs]:
            stop_group(process, grace_s=1)
    asked = prompts_answered(server) - before

    for log in logs:  # a clear message: what it waits for, and who holds it
        waited = next(line for line in log.read_text().splitlines() if WAITING in line)
        assert str(path) in waited and f"held by run process {holder.pid}" in waited
    # neither found the other's answers when it started: both asked the model for every answer, once
    assert asked == 2 * (needed + CHECK_PROMPTS)

    # one copy of the partition's rows: no key twice, nothing lost, as an uninterrupted run leaves them
    duplicates = {
        "answers": "SELECT model_fingerprint, request_key FROM answers",
        "samples": "SELECT benchmark, model, settings_key, solver, task, doc_id, filter FROM samples",
        "results": "SELECT benchmark, model, settings_key, solver, task, metric, filter FROM results",
        "evaluations": "SELECT benchmark, model, settings_key, solver FROM evaluations",
    }
    for table, keys in duplicates.items():
        assert query(path, f"SELECT *, count(*) FROM ({keys}) GROUP BY ALL HAVING count(*) > 1") == [], table
    after, expected = file_snapshot(path), file_snapshot(reference)
    for table in PER_RUN:
        del after[table], expected[table]
    assert_same_rows(after, expected)
    # each run's history whole, as the uninterrupted run's; each run's row of where it computed answers
    (reference_history,) = history_by_run(reference)
    histories = history_by_run(path)
    assert len(histories) == 2
    for history in histories:
        assert_same_rows({"history": history}, {"history": reference_history})
    environment = "SELECT DISTINCT * EXCLUDE (run_id, recorded_at) FROM evaluation_runs"
    assert query(path, environment) == query(reference, environment)
    assert query(path, "SELECT count(*) FROM evaluation_runs") == [(2,)]
    assert query(path, "SELECT count(*) FROM answers WHERE run_id NOT IN (SELECT run_id FROM evaluation_runs)") == [
        (0,)
    ]
