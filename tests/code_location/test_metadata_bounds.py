"""Metadata of bounded size: whatever a benchmark's size, no materialisation puts more than about
1 MB into Dagster's event log. Two served models (the instant completions server: answers from the
text, at once) are evaluated on 2,000 documents whose prompts hold 6 MB of text, compared, and
ranked; every event of every run is read back from the instance's event log and measured as
stored. The previews show a few documents and say where every one of them is."""

import json
import sys

import pytest
from dagster import DagsterEventType, DagsterInstance
from dagster._serdes import serialize_value

from eval_platform.evaluation_assets.benchmarks.assets import leaderboard, model_comparison, protocol_scores
from eval_platform.resources import ModelGatewayResource
from tests.conftest import DATA_BENCHMARKS, PROJECT_ROOT
from tests.evaluation import materialize_configured, materialize_evaluation, materialize_inputs, roster_with
from tests.processes import free_port, running

pytestmark = pytest.mark.slow  # every test here takes seconds: the fast tier leaves them out

DOCUMENTS = 2_000
FILLER = 3_000  # characters of text added to each question
LIMIT = 1_000_000  # bytes of an event as stored, its metadata in it
ASSETS = {
    "benchmark_raw_rows",
    "benchmark_fewshot_rows",
    "benchmark_documents",
    "benchmark_evaluation",
    "model_comparison",
    "protocol_scores",
    "leaderboard",
}


@pytest.fixture(scope="module")
def server():
    port = free_port()
    command = [sys.executable, "-m", "tests.completions_server", "--port", str(port), "--instant"]
    with running(command, f"http://127.0.0.1:{port}/health", cwd=PROJECT_ROOT):
        yield f"http://127.0.0.1:{port}/v1"


def large_benchmark(folder) -> None:
    """ARC-Easy's shipped rows, repeated to DOCUMENTS rows of their own ids, each question FILLER
    characters longer, declared as the benchmark `arc_large` (the harness's arc_easy, zero-shot)."""
    rows = [json.loads(line) for line in (DATA_BENCHMARKS / "arc_easy.jsonl").read_text().splitlines()]
    with open(folder / "arc_large.jsonl", "w", encoding="utf-8") as out:
        for n in range(DOCUMENTS):
            row = rows[n % len(rows)]
            filler = " ".join(f"(remark {n}.{k} on the question)" for k in range(FILLER // 26))[:FILLER]
            out.write(json.dumps({**row, "id": f"{row['id']}-{n}", "question": f"{filler} {row['question']}"}) + "\n")
    (folder / "arc_large.yaml").write_text(
        "title: ARC-Easy, large\ntask: arc_easy\ntask_folder: arc\nparser: arc\n"
        "dataset: {file: arc_large.jsonl}\nnum_fewshot: 0\nsolvers: [harness]\nheadline: {metric: acc_norm}\n",
        encoding="utf-8",
    )


def test_no_materialisation_writes_more_than_a_megabyte_of_metadata(tmp_path, warehouse, server, monkeypatch):
    (tmp_path / "benchmarks").mkdir()
    large_benchmark(tmp_path / "benchmarks")
    monkeypatch.setenv("EVAL_BENCHMARKS_DIR", str(tmp_path / "benchmarks"))
    roster_with(tmp_path / "roster", "instant-a", model="served/instant-a", solvers=["harness"])
    roster = roster_with(
        tmp_path / "roster", "instant-b", model="served/instant-b", solvers=["harness"], baseline="instant-a"
    )
    gateway = ModelGatewayResource(api_base=server)
    instance = DagsterInstance.ephemeral()
    assert materialize_inputs(warehouse, "arc_large", instance=instance).success
    for name in ("instant-a", "instant-b"):
        assert materialize_evaluation(warehouse, "arc_large", name, roster, gateway=gateway, instance=instance).success
    assert materialize_evaluation(
        warehouse, "arc_large", "instant-b", roster, assets=[model_comparison], instance=instance
    ).success
    settings = {"warehouse": warehouse, "roster": roster}
    assert materialize_configured([protocol_scores, leaderboard], settings, instance=instance).success

    with warehouse.get_connection() as conn:
        prompts, differing = conn.execute("""
            SELECT sum(length(a.prompt) + length(b.prompt)), count(*) FILTER (WHERE a.metrics <> b.metrics)
            FROM samples a JOIN samples b USING (benchmark, settings_key, solver, task, doc_id, filter)
            WHERE a.model = 'instant-a' AND b.model = 'instant-b'""").fetchone()
    assert prompts > 12 * LIMIT and differing > 100  # far more text than the bound, and much to compare

    materialised, sizes = {}, []
    for run in instance.get_runs():
        for entry in instance.all_logs(run.run_id):
            sizes.append(len(serialize_value(entry)))
            event = entry.dagster_event
            if event is not None and event.event_type == DagsterEventType.ASSET_MATERIALIZATION:
                assert entry.asset_materialization is not None
                key = entry.asset_materialization.asset_key.to_user_string()
                materialised.setdefault(key, []).append(entry.asset_materialization.metadata)
    assert set(materialised) == ASSETS
    assert max(sizes) < LIMIT, sorted(sizes)[-5:]

    evaluation = {m["roster_model"].value: m for m in materialised["benchmark_evaluation"]}["instant-b"]
    assert f"of {DOCUMENTS} documents shown" in evaluation["samples"].value
    assert "FROM samples WHERE benchmark = 'arc_large' AND model IN ('instant-b')" in evaluation["every_document"].value
    comparison = materialised["model_comparison"][-1]
    assert "documents differ (listed first; 30 shown)" in comparison["items"].value
    assert "model IN ('instant-b', 'instant-a')" in comparison["every_document"].value
