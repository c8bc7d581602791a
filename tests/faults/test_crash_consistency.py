"""Crash consistency: a run SIGKILLed in the middle of each asset that writes (inside the write's
transaction, right after an INSERT) and then re-run leaves every table exactly as an uninterrupted
run does: the same rows, no duplicates, no partial partition; and a partition whose source shrank
keeps no stale rows."""

import os
import signal
import subprocess
import sys

import duckdb
import pytest

from tests.conftest import PROJECT_ROOT
from tests.faults.scenarios import SCENARIOS, benchmark
from tests.openai_stub_server import StubServer
from tests.processes import STARTED

# Columns that differ between two runs of the same work: when, which run, how long, which path.
VOLATILE_SUFFIXES = ("_at", "run_id", "duration_ms", "_path")
# Of two identical concurrent requests one pays and one is answered by it; retries depend on timing.
# Each blind run reads answers from its own copy of the folder.
VOLATILE = {"gateway_calls": ("attempts", "cached", "cost_usd"), "blind_answers": ("source",)}
SKIPPED_TABLES = {"schema_versions"}


def snapshot(path) -> dict[str, list[tuple]]:
    """Every table's rows, sorted, without the columns that record when and where they were made."""
    with duckdb.connect(str(path), read_only=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        rows = {}
        for table in set(tables) - SKIPPED_TABLES:
            columns = [r[0] for r in conn.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index", [table]).fetchall()]
            kept = ", ".join(f'"{c}"' for c in columns
                             if not c.endswith(VOLATILE_SUFFIXES) and c not in VOLATILE.get(table, ()))
            rows[table] = conn.execute(f"SELECT {kept} FROM {table} ORDER BY ALL").fetchall()
    return rows


@pytest.fixture(scope="module")
def server():
    with StubServer(latency_s=0.05) as stub, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-crash-not-a-real-key")
        yield stub


def arguments(scenario, tmp_path, server) -> list[str]:
    return {"benchmark": [], "era": [server.api_base], "blind": [str(tmp_path / "blind_eval")]}[scenario]


@pytest.fixture(scope="module")
def references(tmp_path_factory, server):
    """Each scenario's tables after an uninterrupted run."""
    made = {}

    def reference(scenario):
        if scenario not in made:
            folder = tmp_path_factory.mktemp(f"reference-{scenario}")
            SCENARIOS[scenario](str(folder / "warehouse.duckdb"), *arguments(scenario, folder, server))
            made[scenario] = snapshot(folder / "warehouse.duckdb")
        return made[scenario]

    return reference


def killed_run(path, table, n, scenario, extra) -> int:
    process = subprocess.Popen([sys.executable, "-m", "tests.faults.crash_run", str(path), table, str(n), scenario,
                                *extra], cwd=PROJECT_ROOT, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    STARTED.append(process.pid)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == -signal.SIGKILL, stderr.decode()[-3000:]
    return process.returncode


# (scenario, table whose INSERT the run dies after, which INSERT): the last write of each asset
CRASHES = [
    ("benchmark", "raw_rows", 1),  # benchmark_raw_rows
    ("benchmark", "harness_requests", 1),  # benchmark_prompts
    ("benchmark", "predictions", 1),  # benchmark_predictions
    ("benchmark", "score_history", 1),  # benchmark_scores
    ("era", "judge_scores", 2),  # evolution_era, checkpointing generation 1
    ("era", "era_summaries", 1),  # era_summary
    ("blind", "blind_scores", 1),  # blind_eval_scores
    ("blind", "blind_results", 1),  # blind_eval_tally
]


@pytest.mark.parametrize("scenario, table, n", CRASHES, ids=[f"{s}-{t}" for s, t, _ in CRASHES])
def test_a_run_killed_mid_write_then_rerun_equals_an_uninterrupted_run(scenario, table, n, tmp_path, server,
                                                                      references):
    path = tmp_path / "warehouse.duckdb"
    extra = arguments(scenario, tmp_path, server)
    killed_run(path, table, n, scenario, extra)
    if n == 1:  # the killed transaction held the table's first rows: none of them were committed
        with duckdb.connect(str(path), read_only=True) as conn:
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0
    SCENARIOS[scenario](str(path), *extra)
    assert snapshot(path) == references(scenario)


def test_a_partition_whose_source_shrank_keeps_no_stale_rows(tmp_path):
    shrunk = tmp_path / "shrunk.duckdb"
    benchmark(str(shrunk), limit=6)
    benchmark(str(shrunk), limit=4)
    fresh = tmp_path / "fresh.duckdb"
    benchmark(str(fresh), limit=4)
    after, expected = snapshot(shrunk), snapshot(fresh)
    history = after.pop("score_history"), expected.pop("score_history")
    assert after == expected
    with duckdb.connect(str(shrunk), read_only=True) as conn:
        latest = conn.execute("""SELECT count(*), count(DISTINCT prompt_id) FROM score_history
                                 WHERE run_id = (SELECT run_id FROM score_history ORDER BY scored_at DESC LIMIT 1)""").fetchone()
        assert conn.execute("SELECT count(*) FROM raw_rows").fetchone()[0] == 4
    assert latest == (len(history[1]), 4)  # the latest run's history is the fresh run's; earlier runs stay history
