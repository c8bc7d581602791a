"""The code location loads fast without heavy imports, validates, and runs under the multiprocess executor."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from dagster import DagsterInstance, execute_job, reconstructable

from tests.conftest import PROJECT_ROOT
from tests.multiprocess_jobs import era_graph, unpartitioned_graph

# lm_eval: its model protocol pulls in requests and more, half a second for every Dagster process
HEAVY = ["torch", "transformers", "litellm", "lm_eval", "datasets", "matplotlib", "scipy", "sklearn", "openpyxl"]


def test_definitions_load_without_heavy_imports():
    code = (
        "import sys, time; t = time.perf_counter(); from eval_platform.definitions import defs; defs(); "
        "import json; print(json.dumps({'seconds': time.perf_counter() - t, "
        f"'heavy': [m for m in {HEAVY!r} if m in sys.modules]}}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["heavy"] == []
    print(f"code location import: {report['seconds']:.2f}s")


@pytest.mark.slow
def test_dagster_definitions_validate(tmp_path):
    dagster = os.path.join(os.path.dirname(sys.executable), "dagster")
    result = subprocess.run(
        [dagster, "definitions", "validate", "-w", "workspace.yaml"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation successful" in result.stdout + result.stderr


@pytest.mark.slow
def test_multiprocess_executor_shares_the_warehouse(tmp_path, monkeypatch):
    blind_dir = tmp_path / "blind_eval"
    shutil.copytree(PROJECT_ROOT / "data" / "blind_eval", blind_dir, ignore=shutil.ignore_patterns("issued", "*.xlsx"))
    monkeypatch.setenv("EVAL_WAREHOUSE", str(tmp_path / "warehouse.duckdb"))
    monkeypatch.setenv("EVAL_BLIND_DIR", str(blind_dir))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    era = {"population_size": 3, "generations": 1, "compression_max_tokens": 8}
    multiprocess = {"execution": {"config": {"multiprocess": {"max_concurrent": 4}}}}
    start = time.perf_counter()
    with DagsterInstance.get() as instance:
        inputs = execute_job(
            reconstructable(unpartitioned_graph),
            instance=instance,
            run_config={
                **multiprocess,
                "ops": {
                    op: {"config": {"folder": str(blind_dir)}}
                    for op in ("blind_eval_questions", "blind_eval_answers", "blind_eval_sheet")
                },
            },
        )
        instance.add_dynamic_partitions("eras", ["multiprocess"])
        era_run = execute_job(
            reconstructable(era_graph),
            instance=instance,
            tags={"dagster/partition": "multiprocess"},
            run_config={**multiprocess, "ops": {"evolution_era": {"config": era}}},
        )
        for result in (inputs, era_run):
            assert result.success, [str(e.event_specific_data.error) for e in result.all_events if e.is_step_failure]
            starts = [e for e in result.all_events if e.event_type_value == "STEP_START"]
            assert len({e.pid for e in starts}) == len(starts) >= 4  # every step in its own process
    import duckdb

    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM generations").fetchone()[0] == 6
        assert conn.execute("SELECT count(*) FROM blind_key").fetchone()[0] == 5
    print(f"multiprocess run: {time.perf_counter() - start:.1f}s")
