"""Crash consistency: a run SIGKILLed in the middle of each asset that the three scenarios
materialise (inside a write's transaction right after an INSERT or a DELETE, or right after its
COMMIT) and then re-run leaves every table as an uninterrupted run does: the same rows, no
duplicates, no partial partition; and a partition whose source shrank keeps no stale rows. Floats
that a model computed may differ in their last digits (tests/tables.py); everything else is exact."""

import json
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
    """Each scenario's warehouse after an uninterrupted run."""
    made = {}

    def reference(scenario):
        if scenario not in made:
            folder = tmp_path_factory.mktemp(f"reference-{scenario}")
            SCENARIOS[scenario](str(folder / "warehouse.duckdb"), *arguments(scenario, folder, server))
            made[scenario] = folder / "warehouse.duckdb"
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
# and each kind of point in each scenario. The benchmark's evaluation saves each of its solvers'
# evaluations (the letter solver's, then the harness's) in a transaction of its own.
CRASHES = [
    ("benchmark", "INSERT", "raw_rows", 1),  # benchmark_raw_rows
    ("benchmark", "DELETE", "fewshot_rows", 1),  # benchmark_fewshot_rows
    ("benchmark", "INSERT", "documents", 1),  # benchmark_documents
    ("benchmark", "INSERT", "answers", 1),  # benchmark_evaluation, the letter solver's answers
    ("benchmark", "DELETE", "evaluation_runs", 1),  # benchmark_evaluation, after its answers
    ("benchmark", "INSERT", "history", 1),  # benchmark_evaluation, its per-document history
    ("benchmark", "COMMIT", "answers", 1),  # the letter solver's first chunk of answers kept: the re-run reuses it
    ("benchmark", "INSERT", "samples", 2),  # the harness solver's samples, after the letter solver's commit
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
# The solvers whose evaluation the killed benchmark run had committed before it died.
COMMITTED = {("INSERT", "samples", 2): {"letter"}}
# How many runs computed the stored answers where it is not 1: a chunk of answers is kept as it is
# computed, so the killed run's chunks stay beside the re-run's, which reuses them. (Killed at the
# harness's samples, it had computed every answer, and the re-run computes none: 1.)
ANSWERING_RUNS = {("INSERT", "history", 1): 2, ("COMMIT", "answers", 1): 2}
# Tables a committed evaluation adds rows to beside the re-run's: each run's per-document history
# (what the regression watch compares), and where each run that computed answers computed them.
PER_RUN = ("history", "evaluation_runs")


def query(path, sql: str) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def history_by_run(path) -> list[list[tuple]]:
    """Each run's history (oldest run first), each row without the columns naming its run and time,
    its solver and document first."""
    rows = query(
        path,
        "SELECT max(scored_at) OVER (PARTITION BY run_id), run_id, solver, document_id, "
        "* EXCLUDE (run_id, solver, document_id, scored_at, prediction_run_id) FROM history ORDER BY ALL",
    )
    runs: dict[str, list[tuple]] = {}
    for _, run_id, *row in rows:
        runs.setdefault(run_id, []).append(tuple(row))
    return list(runs.values())


def assert_whole_runs(path, reference, committed: set[str], answering_runs: int) -> None:
    """The re-run's history equals the uninterrupted run's; the killed run's holds exactly the
    solvers it committed, each whole (as the uninterrupted run has it); and each run that computed
    answers recorded where it did, once, as the uninterrupted run did."""
    (expected,) = history_by_run(reference)
    *killed, rerun = history_by_run(path)
    assert_same_rows({"history": rerun}, {"history": expected})
    assert len(killed) == bool(committed)
    for run in killed:
        assert {row[0] for row in run} == committed
        assert_same_rows({"history": run}, {"history": [row for row in expected if row[0] in committed]})
    environment = "SELECT DISTINCT * EXCLUDE (run_id, recorded_at) FROM evaluation_runs"
    assert query(path, environment) == query(reference, environment)
    computing = "SELECT DISTINCT run_id FROM answers ORDER BY 1"
    assert query(path, "SELECT run_id FROM evaluation_runs ORDER BY 1") == query(path, computing)
    assert len(query(path, computing)) == answering_runs


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
        stored = query(path, f"SELECT count(*) FROM {table}")[0][0]
        assert (stored > 0) if point == "COMMIT" else (stored == 0)
    committed = COMMITTED.get((point, table, n), set())
    if scenario == "benchmark":  # only the evaluations the killed run committed, whole
        assert {solver for (solver,) in query(path, "SELECT DISTINCT solver FROM samples")} == committed
    SCENARIOS[scenario](str(path), *extra)
    after, expected = file_snapshot(path), file_snapshot(references(scenario))
    if scenario == "benchmark":
        assert_whole_runs(path, references(scenario), committed, ANSWERING_RUNS.get((point, table, n), 1))
        for per_run in PER_RUN:
            after.pop(per_run), expected.pop(per_run)
    assert_same_rows(after, expected)


def named_answers(path) -> list[tuple]:
    """The answers the warehouse's samples name: (request, its arguments and response, parsed)."""
    rows = query(
        path,
        "SELECT model_fingerprint, request_key, request_type, arguments, response FROM answers "
        "WHERE request_key IN (SELECT unnest(request_keys) FROM samples)",
    )
    return [(*row[:3], json.loads(row[3]), json.loads(row[4])) for row in rows]


def test_a_partition_whose_source_shrank_keeps_no_stale_rows(tmp_path):
    """Every table of the partition equals a fresh run's on the shrunk source. The answers the model
    gave are its fingerprint's, not the partition's: those of the rows no longer there stay, for a
    later request of the same text, and no sample names them."""
    shrunk = tmp_path / "shrunk.duckdb"
    benchmark(str(shrunk), limit=6)
    benchmark(str(shrunk), limit=4)
    fresh = tmp_path / "fresh.duckdb"
    benchmark(str(fresh), limit=4)
    after, expected = file_snapshot(shrunk), file_snapshot(fresh)
    after.pop("history"), expected.pop("history")
    stored = len(after.pop("answers")), len(expected.pop("answers"))
    assert_same_rows(after, expected)  # the 4 documents' answers, reused from the 6-document run, within the tolerance
    assert_same_rows({"answers": named_answers(shrunk)}, {"answers": named_answers(fresh)})
    assert stored[0] > stored[1] == len(named_answers(fresh))
    assert query(shrunk, "SELECT count(*) FROM raw_rows") == [(4,)]
    # the latest run's history is the fresh run's; the earlier run's stays history, whole
    *earlier, latest = history_by_run(shrunk)
    assert_same_rows({"history": latest}, {"history": history_by_run(fresh)[0]})
    assert [len({row[1] for row in run}) for run in earlier] == [6]  # its six documents
