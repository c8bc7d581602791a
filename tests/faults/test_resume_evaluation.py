"""A run killed mid-evaluation resumes from the answers it kept: the evaluation keeps its answers in
chunks as they come (EVAL_ANSWER_CHUNK), so a run SIGKILLed once a chunk is stored (the test
watches the run's log for it) loses at most the chunk under way. Its rerun asks the model only for
the answers not kept (the served model's server counts the prompts it answered), and the
warehouse ends as an uninterrupted run leaves it. While the run goes on, each chunk is reported as
a log line and an observation of the partition (answers stored of answers needed)."""

import logging
import os
import signal
import subprocess
import sys
import time

import duckdb
import pytest
from dagster import DagsterInstance

from tests.conftest import PROJECT_ROOT
from tests.faults.scenarios import instant_server, prompts_answered, served_evaluation
from tests.processes import STARTED, lines_until, stop_group
from tests.tables import assert_same_rows, file_snapshot

CHUNK = 40  # answers per chunk: MMLU-Pro's 70-document slice needs about 650, so about 17 chunks
KILLED_AFTER = "chunk 2 kept"  # the log line the test waits for before it kills the run
CHECK_PROMPTS = 1  # every run checks the server's log-probabilities first, on one prompt
KEPT_WITHIN_S = 600  # a hang guard: the killed run keeps its chunks in seconds


@pytest.fixture(scope="module")
def server():
    """The instant completions server, 0.05 s per HTTP request (so a run lasts seconds, and a kill
    lands mid-way)."""
    with instant_server(0.05) as address:
        yield address


@pytest.fixture(autouse=True)
def chunks(monkeypatch):
    monkeypatch.setenv("EVAL_ANSWER_CHUNK", str(CHUNK))


def count(path, query: str) -> int:
    with duckdb.connect(str(path), read_only=True) as conn:
        return conn.execute(query).fetchone()[0]


def killed_once_a_chunk_is_kept(path, server) -> str:
    """The scenario in a process of its own, SIGKILLed as soon as its log says a chunk was kept
    (after KILLED_AFTER); its log up to then."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.faults.scenarios", "served_evaluation", str(path), f"{server}/v1"],
        cwd=PROJECT_ROOT,
        env=os.environ.copy(),
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    STARTED.append(process.pid)
    lines, deadline = [], time.monotonic() + KEPT_WITHIN_S
    try:
        assert process.stderr is not None
        try:  # the deadline fires even while the child writes nothing
            for line in lines_until(process.stderr, deadline):
                lines.append(line)
                if KILLED_AFTER in line:
                    os.killpg(process.pid, signal.SIGKILL)
                    break
        except TimeoutError as timeout:
            raise AssertionError(
                f"no chunk was kept within {KEPT_WITHIN_S} s ({timeout}):\n{''.join(lines[-30:])}"
            ) from timeout
        assert process.wait(timeout=30) == -signal.SIGKILL, "".join(lines[-30:])
    finally:
        stop_group(process, grace_s=1)
    return "".join(lines)


def test_a_run_killed_after_a_chunk_is_kept_resumes_and_ends_as_an_uninterrupted_run(tmp_path, server):
    reference = tmp_path / "reference" / "warehouse.duckdb"
    reference.parent.mkdir()
    before, instance = prompts_answered(server), DagsterInstance.ephemeral()
    uninterrupted = served_evaluation(str(reference), f"{server}/v1", instance)
    asked_uninterrupted = prompts_answered(server) - before
    needed = count(reference, "SELECT count(*) FROM answers")
    assert needed > 5 * CHUNK and asked_uninterrupted == needed + CHECK_PROMPTS

    # while it ran, each chunk was reported as an observation of the partition and in the log
    entries = instance.all_logs(uninterrupted.run_id)
    observed = [
        entry.asset_observation.metadata
        for entry in entries
        if entry.asset_observation is not None and entry.asset_observation.partition
    ]
    chunks = -(-needed // CHUNK)
    assert [m["answers_stored"].value for m in observed] == [min(needed, CHUNK * n) for n in range(1, chunks + 1)]
    assert {m["answers_needed"].value for m in observed} == {needed}
    assert observed[-1]["progress"].value == f"{needed:,} of {needed:,} answers stored"
    logged = [entry.user_message for entry in entries if entry.level == logging.INFO]
    assert [n for n in range(1, chunks + 1) if any(f"chunk {n} kept, " in m for m in logged)] == list(
        range(1, chunks + 1)
    )

    resumed = tmp_path / "resumed" / "warehouse.duckdb"
    resumed.parent.mkdir()
    before = prompts_answered(server)
    killed_once_a_chunk_is_kept(resumed, server)
    asked_killed = prompts_answered(server) - before
    kept = count(resumed, "SELECT count(*) FROM answers")
    assert kept >= 2 * CHUNK and kept % CHUNK == 0  # whole chunks, at least the two it was killed after
    assert count(resumed, "SELECT count(*) FROM samples") == 0  # killed mid-evaluation

    before = prompts_answered(server)
    rerun = served_evaluation(str(resumed), f"{server}/v1")
    asked_rerun = prompts_answered(server) - before
    assert asked_rerun == needed - kept + CHECK_PROMPTS  # every kept answer reused, the rest asked once
    lost = asked_killed - CHECK_PROMPTS - kept  # asked by the killed run but not kept
    assert 0 <= lost <= CHUNK
    assert count(resumed, f"SELECT count(*) FROM answers WHERE run_id = '{rerun.run_id}'") == needed - kept

    after, expected = file_snapshot(resumed), file_snapshot(reference)
    # the killed run computed answers still stored: its row of where it computed them stays beside the rerun's
    assert len(after.pop("evaluation_runs")) == 2 and len(expected.pop("evaluation_runs")) == 1
    assert count(resumed, "SELECT count(*) FROM answers WHERE run_id NOT IN (SELECT run_id FROM evaluation_runs)") == 0
    assert_same_rows(after, expected)
