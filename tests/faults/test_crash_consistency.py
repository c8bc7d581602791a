"""Crash consistency: a run SIGKILLed in the middle of each asset that the three scenarios
materialise (inside a write's transaction right after an INSERT or a DELETE, or right after its
COMMIT) and then re-run leaves every table as an uninterrupted run does: the same rows, no
duplicates, no partial partition; and a partition whose source shrank keeps no stale rows. Floats
that a model computed may differ in their last digits (tests/tables.py); everything else is exact."""

import signal

import duckdb
import pytest

from tests.faults.scenarios import SCENARIOS, benchmark
from tests.openai_stub_server import StubServer
from tests.tables import assert_same_rows, file_snapshot


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
            made[scenario] = file_snapshot(folder / "warehouse.duckdb")
        return made[scenario]

    return reference


def killed_run(zygote, path, point, table, n, scenario, extra) -> None:
    """The scenario in a process of its own (forked from the zygote), SIGKILLed at the point."""
    stderr = path.with_name("killed-run.log")
    code = zygote.run(
        "tests.faults.crash_run", [str(path), point, table, str(n), scenario, *extra], timeout_s=300, stderr=str(stderr)
    )
    assert code == -signal.SIGKILL, stderr.read_text()[-3000:]


# (scenario, where the run dies: after an INSERT or a DELETE inside the write's transaction or right
# after its COMMIT, the table written, the n-th such point): every asset the scenarios materialise,
# and each kind of point in each scenario
CRASHES = [
    ("benchmark", "INSERT", "raw_rows", 1),  # benchmark_raw_rows
    ("benchmark", "DELETE", "fewshot_rows", 1),  # benchmark_fewshot_rows
    ("benchmark", "INSERT", "harness_requests", 1),  # benchmark_prompts
    ("benchmark", "INSERT", "predictions", 1),  # benchmark_predictions
    ("benchmark", "DELETE", "prediction_runs", 1),  # benchmark_predictions, after its predictions
    ("benchmark", "INSERT", "score_history", 1),  # benchmark_scores
    ("benchmark", "COMMIT", "predictions", 1),  # benchmark_predictions, committed: the re-run reuses them
    ("era", "DELETE", "source_paragraphs", 1),  # source_paragraphs
    ("era", "COMMIT", "gene_pool", 1),  # gene_pools, committed
    ("era", "INSERT", "judge_scores", 2),  # evolution_era, checkpointing generation 1
    ("era", "DELETE", "generations", 2),  # evolution_era, checkpointing generation 1
    ("era", "COMMIT", "generations", 1),  # evolution_era, generation 0 committed
    ("era", "INSERT", "era_summaries", 1),  # era_summary
    ("blind", "DELETE", "blind_questions", 1),  # blind_eval_questions
    ("blind", "INSERT", "blind_answers", 1),  # blind_eval_answers
    ("blind", "COMMIT", "blind_key", 1),  # blind_eval_sheet, committed
    ("blind", "INSERT", "blind_scores", 1),  # blind_eval_scores
    ("blind", "DELETE", "blind_results", 1),  # blind_eval_tally
]


@pytest.mark.parametrize(
    "scenario, point, table, n", CRASHES, ids=[f"{s}-{p.lower()}-{t}-{n}" for s, p, t, n in CRASHES]
)
def test_a_run_killed_mid_write_then_rerun_equals_an_uninterrupted_run(
    scenario, point, table, n, tmp_path, server, references, zygote
):
    path = tmp_path / "warehouse.duckdb"
    extra = arguments(scenario, tmp_path, server)
    killed_run(zygote, path, point, table, n, scenario, extra)
    if n == 1:  # the table's first write: killed inside it, nothing was committed; after it, all was
        with duckdb.connect(str(path), read_only=True) as conn:
            stored = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        assert (stored > 0) if point == "COMMIT" else (stored == 0)
    SCENARIOS[scenario](str(path), *extra)
    assert_same_rows(file_snapshot(path), references(scenario))


def test_a_partition_whose_source_shrank_keeps_no_stale_rows(tmp_path):
    shrunk = tmp_path / "shrunk.duckdb"
    benchmark(str(shrunk), limit=6)
    benchmark(str(shrunk), limit=4)
    fresh = tmp_path / "fresh.duckdb"
    benchmark(str(fresh), limit=4)
    after, expected = file_snapshot(shrunk), file_snapshot(fresh)
    history = after.pop("score_history"), expected.pop("score_history")
    assert_same_rows(after, expected)  # the 4 predictions reused from the 6-item batch agree within the tolerance
    with duckdb.connect(str(shrunk), read_only=True) as conn:
        latest = conn.execute("""SELECT count(*), count(DISTINCT prompt_id) FROM score_history
                                 WHERE run_id = (SELECT run_id FROM score_history ORDER BY scored_at DESC LIMIT 1)""").fetchone()
        assert conn.execute("SELECT count(*) FROM raw_rows").fetchone()[0] == 4
    assert latest == (len(history[1]), 4)  # the latest run's history is the fresh run's; earlier runs stay history
