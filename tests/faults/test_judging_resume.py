"""A judging run killed mid-way and run again loses no verdict and duplicates none: a panel of two
HTTP judges (tests/openai_stub_server.py) judging stored pairs (`pairwise_verdicts`) or MT-Bench's
model pairs (`mt_bench_verdicts`) in a process of its own, its verdicts kept in the warehouse in
chunks as they come (EVAL_ANSWER_CHUNK). The server answers as many calls as the first judge's
verdicts and a chunk of the second's, and holds the rest unanswered (`StubServer.hold_after`), so
the run cannot get past that point; the test watches the verdict table (read-only) and SIGKILLs the
run once the warehouse holds them: the kill follows what the run wrote, not a clock or a log line.
Its rerun asks the judges only for the verdicts not kept (the server counts the calls), and its
verdicts equal, row for row and keyed by judge, set, pair, turn and order, those of an
uninterrupted run on a second warehouse, and so does every other table."""

import os
import signal
import threading
import time
from pathlib import Path

import duckdb
import psutil
import pytest

from tests.faults.scenarios import JUDGES, JUDGINGS
from tests.openai_stub_server import StubServer
from tests.processes import Zygote
from tests.tables import assert_same_rows, file_snapshot

STUB_JUDGE = "judge-pairwise"  # the stub model both judges are answered as (so one counter counts both)
LATENCY_S = 0.02  # per call: the gateway's calls overlap, as a provider's do
CHUNK = 8  # verdicts per chunk kept (one slice of eight calls at once, the gateway's concurrency)
KEY = ["judge", "set_name", "item_id", "turn", "shown_order"]
TABLES = {"pairwise_verdicts": "judge_verdicts", "mt_bench_verdicts": "mt_bench_verdicts"}  # where each keeps them
DEADLINE_S = 600  # a hang guard: the killed run keeps its chunks in seconds
POLL_S = 0.05
# The calls a whole panel's run makes: each of 28 pairs (14 items of two sets; one question's pairs of
# MT-Bench's eight models) in both orders, by each judge.
NEEDED = 28 * 2 * len(JUDGES)
KILLED_AT = NEEDED // 2 + CHUNK  # verdicts stored: the first judge's all, and the second's first chunk


@pytest.fixture(scope="module")
def server():
    aliases = {judge.removeprefix("openai/"): STUB_JUDGE for judge in JUDGES}
    with StubServer(latency_s=LATENCY_S, aliases=aliases) as stub, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-judging-resume-not-a-real-key")
        yield stub


@pytest.fixture(autouse=True)
def chunks(monkeypatch):
    monkeypatch.setenv("EVAL_ANSWER_CHUNK", str(CHUNK))


def run_judging(zygote: Zygote, path: Path, server, verdicts: str) -> int:
    """The judging scenario in a process of its own (forked from the zygote): its exit code."""
    log = path.with_name(f"{path.stem}.log")
    return zygote.run(
        "tests.faults.scenarios", ["judging", str(path), server.api_base, verdicts], timeout_s=600, stderr=str(log)
    )


def stored_verdicts(path: Path, verdicts: str) -> int | None:
    """The verdicts the warehouse holds now, read-only; None while it cannot be read (the run holds
    it, or has not created the table yet)."""
    try:
        with duckdb.connect(str(path), read_only=True) as conn:
            return conn.execute(f"SELECT count(*) FROM {TABLES[verdicts]}").fetchone()[0]
    except duckdb.Error:
        return None


def file_state(path: Path) -> tuple:
    """What changes when a write commits: the database file's and its log's size and time."""
    state = []
    for file in (path, path.with_name(f"{path.name}.wal")):
        try:
            stat = file.stat()
            state.append((stat.st_size, stat.st_mtime_ns))
        except FileNotFoundError:
            state.append(None)
    return tuple(state)


def killed_once_stored(zygote: Zygote, path: Path, server, verdicts: str, rows: int) -> int:
    """The judging scenario in a process of its own, SIGKILLed (its whole group) as soon as the
    warehouse holds `rows` verdicts (read whenever the file changed, the run's own lock aside);
    the verdicts it held then. Whatever happens, the child is gone when this returns."""
    exit_code: list[int] = []
    runner = threading.Thread(target=lambda: exit_code.append(run_judging(zygote, path, server, verdicts)))
    runner.start()
    child, seen, read = None, 0, None
    try:
        deadline = time.monotonic() + DEADLINE_S
        while seen < rows:  # the deadline fires though the run writes nothing
            assert runner.is_alive(), f"the run ended (exit {exit_code}) before {rows} verdicts were stored"
            assert time.monotonic() < deadline, f"no {rows} verdicts stored within {DEADLINE_S} s (last read: {seen})"
            time.sleep(POLL_S)
            if (state := file_state(path)) != read:
                count = stored_verdicts(path, verdicts)
                if count is not None:
                    seen, read = count, state
        (child,) = psutil.Process(zygote.process.pid).children()
        os.killpg(child.pid, signal.SIGKILL)
        runner.join(60)
        assert exit_code == [-signal.SIGKILL], path.with_name(f"{path.stem}.log").read_text()[-3000:]
    finally:
        if runner.is_alive():  # a failed assertion above: the child is stopped, and the zygote answers
            for process in [child] if child else psutil.Process(zygote.process.pid).children():
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            runner.join(60)
    return seen


def verdict_rows(path: Path, verdicts: str) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as conn:
        return conn.execute(f"SELECT * EXCLUDE (judged_at) FROM {TABLES[verdicts]} ORDER BY ALL").fetchall()


def duplicate_keys(path: Path, verdicts: str) -> list[tuple]:
    columns = ", ".join(KEY)
    with duckdb.connect(str(path), read_only=True) as conn:
        return conn.execute(f"SELECT {columns} FROM {TABLES[verdicts]} GROUP BY ALL HAVING count(*) > 1").fetchall()


@pytest.mark.parametrize("verdicts", sorted(JUDGINGS))
def test_a_judging_run_killed_mid_panel_and_rerun_equals_an_uninterrupted_run(verdicts, tmp_path, server, zygote):
    reference = tmp_path / "reference.duckdb"
    before = server.calls[STUB_JUDGE]
    assert run_judging(zygote, reference, server, verdicts) == 0, reference.with_name("reference.log").read_text()
    assert server.calls[STUB_JUDGE] - before == NEEDED  # each call once: nothing retried, nothing doubled
    expected = verdict_rows(reference, verdicts)
    assert len(expected) == NEEDED and {row[0] for row in expected} == set(JUDGES)

    # killed once the first judge's verdicts and a chunk of the second's are in the warehouse
    resumed = tmp_path / "resumed.duckdb"
    before = server.calls[STUB_JUDGE]
    server.hold_after(KILLED_AT)
    try:
        seen = killed_once_stored(zygote, resumed, server, verdicts, KILLED_AT)
    finally:
        server.release()
    asked_killed = server.calls[STUB_JUDGE] - before
    kept = len(verdict_rows(resumed, verdicts))
    assert seen == kept == KILLED_AT  # killed where the server held it, every verdict it was seen to hold kept
    assert kept % CHUNK == 0  # whole chunks: the one under way when killed is lost, never half of it
    assert 0 <= asked_killed - kept <= CHUNK  # asked but not kept: at most the chunk under way
    assert duplicate_keys(resumed, verdicts) == []
    assert set(verdict_rows(resumed, verdicts)) <= set(expected)  # each kept verdict as the judge gave it

    before = server.calls[STUB_JUDGE]
    assert run_judging(zygote, resumed, server, verdicts) == 0, resumed.with_name("resumed.log").read_text()
    assert server.calls[STUB_JUDGE] - before == NEEDED - kept  # every kept verdict reused, the rest asked once

    assert duplicate_keys(resumed, verdicts) == []
    assert verdict_rows(resumed, verdicts) == expected  # none lost, none doubled, each as the judge gave it
    assert_same_rows(file_snapshot(resumed), file_snapshot(reference))  # and every other table as well
