"""lm-evaluation-harness's own output, imported and set against the platform's own evaluation of
the same model: per benchmark, the items the harness logged, those matched to the warehouse's
documents, those agreeing on every metric, and those flipped.

    python speed/import_round_trip.py [BENCHMARK ...]

Per benchmark: the harness's command line (`speed/harness_cli.py`, in a process that never imports
the platform) on SmolLM2-135M-Instruct and the shipped slice's first DOCUMENTS documents (a
dataset's rows as the harness's files, a harness task on its declared files; the declaration's
shots, else the task's own; generation within the demo's 96 new tokens); then, in a scratch
warehouse by Dagster materialisations, the platform's harness solver on the same documents with
the same settings, the output imported (an imports folder set in the launchpad), and
`model_comparison` of the import against the platform's evaluation. An item agrees where every
metric does: a 0/1 metric equal, a number within the parity's log-likelihood tolerance
(`speed/lm_eval_parity.py`'s `agree`).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = 5
MAX_GEN_TOKS = 96
DEFAULT = [
    "arc_easy", "arc_challenge", "hellaswag", "mmlu", "truthfulqa_mc2", "winogrande", "gsm8k",
    "leaderboard_bbh", "leaderboard_ifeval", "leaderboard_mmlu_pro",
]  # fmt: skip


def harness_spec(name: str, benchmark: Any, folder: Path) -> dict[str, Any]:
    """The harness's run of the benchmark's first documents, as speed/harness_cli.py takes it."""
    from speed.lm_eval_parity import FEWSHOT_FILES, HARNESS_TASKS, harness_data_files, harness_model_spec, jsonl

    if benchmark.is_dataset:
        rows = jsonl(ROOT / "data" / "benchmarks" / Path(benchmark.dataset.file).name, DOCUMENTS)
        pool = ROOT / "data" / "benchmarks" / "fewshot" / FEWSHOT_FILES.get(name, "-")
        (folder / "data").mkdir()
        files = harness_data_files(name, rows, jsonl(pool) if pool.is_file() else [], folder / "data")
        tasks = sorted(files)
        assert name in HARNESS_TASKS, f"{name}: no harness task known for the dataset"
    else:
        files, tasks = dict(benchmark.data_files), [benchmark.task or name]
    run = {"model": harness_model_spec(), "tasks": tasks, "data_files": files, "limit": DOCUMENTS}
    if benchmark.num_fewshot is not None:
        run["num_fewshot"] = benchmark.num_fewshot
    return run


def platform_side(name: str, output: Path, scratch: Path) -> dict[str, Any]:
    """The platform's evaluation and the import's, compared: the table's row."""
    from dagster import DagsterInstance, materialize

    from eval_engine import DEFAULT_LOCAL_MODEL
    from eval_platform.benchmarks.roster import RosterEntry, write_entry
    from eval_platform.definitions import defs
    from eval_platform.evaluation_assets.benchmarks.assets import (
        benchmark_documents,
        benchmark_evaluation,
        benchmark_fewshot_rows,
        benchmark_raw_rows,
        model_comparison,
    )
    from eval_platform.evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions
    from speed.lm_eval_parity import agree

    write_entry(scratch / "roster", RosterEntry(name="smollm2", model=DEFAULT_LOCAL_MODEL, solvers=("harness",)))
    (scratch / "imports").mkdir()
    (scratch / "imports" / "harness.yaml").write_text(json.dumps({"source": str(output), "baseline": "smollm2"}))
    resources = {
        "warehouse": {"config": {"database": str(scratch / "warehouse.duckdb")}},
        "roster": {"config": {"directory": str(scratch / "roster"), "imports_dir": str(scratch / "imports")}},
    }
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(benchmark_partitions.name, [name])
    instance.add_dynamic_partitions(roster_partitions.name, ["smollm2", "harness"])

    def run(assets: list, partition: Any, ops: dict | None = None) -> None:
        config = {"resources": resources, "ops": ops or {}}
        materialize(assets, resources=defs().resources, run_config=config, partition_key=partition, instance=instance)

    inputs = [benchmark_raw_rows, benchmark_fewshot_rows, benchmark_documents]
    run(inputs, name, {"benchmark_raw_rows": {"config": {"limit": DOCUMENTS}}})
    settings = {"limit": DOCUMENTS, "max_gen_toks": MAX_GEN_TOKS}
    run([benchmark_evaluation], evaluation_key(name, "smollm2"), {"benchmark_evaluation": {"config": settings}})
    run([benchmark_evaluation], evaluation_key(name, "harness"))
    run([model_comparison], evaluation_key(name, "harness"))
    import duckdb

    with duckdb.connect(str(scratch / "warehouse.duckdb"), read_only=True) as conn:
        logged = sum(1 for path in output.rglob("samples_*.jsonl") for line in path.open() if line.strip())
        (matched,) = conn.execute("SELECT count(*) FROM samples WHERE model = 'harness'").fetchone() or (0,)
        (rejected,) = conn.execute("SELECT count(*) FROM import_rejections").fetchone() or (0,)
        pairs = conn.execute(
            """SELECT i.metrics::VARCHAR, p.metrics::VARCHAR FROM samples i
               JOIN samples p USING (benchmark, settings_key, solver, task, doc_id, filter)
               WHERE i.model = 'harness' AND p.model = 'smollm2'"""
        ).fetchall()
        metrics = [(json.loads(theirs), json.loads(ours)) for theirs, ours in pairs]
        agreeing = sum(a.keys() == b.keys() and all(agree(a[name], b[name]) for name in a) for a, b in metrics)
        (flipped, compared) = conn.execute(
            "SELECT coalesce(sum(only_a + only_b), 0), count(*) FROM comparisons WHERE model_a = 'harness'"
        ).fetchone() or (0, 0)
    return {"logged": logged, "matched": matched, "rejected": rejected, "agreeing": agreeing,
            "flipped": flipped, "comparisons": compared}  # fmt: skip


def round_trip(name: str) -> dict[str, Any]:
    from eval_platform.benchmarks.declarations import declared_benchmarks
    from speed.harness_cli import run_cli

    benchmark = declared_benchmarks(ROOT / "data" / "benchmarks")[name]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        spec = harness_spec(name, benchmark, folder)
        output = run_cli({**spec, "gen_kwargs": {"max_gen_toks": MAX_GEN_TOKS}}, folder / "harness")
        row = platform_side(name, output, folder)
    return {"benchmark": name, **row}


def main(names: list[str]) -> None:
    print("| benchmark | items logged | matched | rejected | agreeing | flipped | comparisons |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in names:
        row = round_trip(name)
        print(
            f"| {name} | {row['logged']} | {row['matched']} | {row['rejected']} | {row['agreeing']} | "
            f"{row['flipped']} | {row['comparisons']} |",
            flush=True,
        )


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main(sys.argv[1:] or DEFAULT)
