"""How fast an lm-evaluation-harness output folder is imported, and in how much memory: 1k, 10k and
100k samples, each size in a fresh process.

    python speed/import_throughput.py [SIZES ...]

Each size's output folder is made from the shipped harness output (tests/data/harness_output/): its
ARC-Easy samples repeated, each copy's question made its own (so every sample is a document of its
own), its results file as the harness wrote it; the documents it is matched with are given in
memory (the warehouse's read of them, `known_documents`, is not timed). Printed per size: the
seconds to read and match the file (`imported_evaluation`), to store it in a new DuckDB file
(`save_import`, one transaction), the whole, and the process's peak resident memory.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "tests" / "data" / "harness_output" / "output"
SIZES = (1_000, 10_000, 100_000)


def make_output(folder: Path, size: int) -> tuple[Path, list[dict]]:
    """An output folder of `size` ARC-Easy samples (copies of the shipped ones, each question its
    own), and the documents they are of."""
    (results,) = SHIPPED.rglob("results_*.json")
    (samples,) = SHIPPED.rglob("samples_arc_easy_*.jsonl")
    shipped = [json.loads(line) for line in samples.read_text().splitlines()]
    out = folder / "output" / results.parent.name
    out.mkdir(parents=True)
    report = json.loads(results.read_text())
    report["n-samples"]["arc_easy"] = {"original": size, "effective": size}
    (out / results.name).write_text(json.dumps(report))
    docs = []
    with (out / samples.name).open("w") as lines:
        for i in range(size):
            sample = json.loads(json.dumps(shipped[i % len(shipped)]))
            sample["doc"]["question"] += f" ({i})"
            sample["doc_id"] = i
            docs.append(sample["doc"])
            lines.write(json.dumps(sample) + "\n")
    return folder / "output", docs


def measure(size: int) -> dict[str, float]:
    """One size, in this process: the figures printed."""
    from eval_platform.benchmarks.declarations import declared_benchmarks
    from eval_platform.benchmarks.imports import KnownDocument, content_key, imported_evaluation, read_harness_output
    from eval_platform.benchmarks.store import EvaluationStore
    from eval_platform.benchmarks.store.evaluations import EvaluationRun
    from eval_platform.environment import DATA_DIR
    from resources import WarehouseResource

    benchmark = declared_benchmarks(DATA_DIR / "benchmarks")["arc_easy"]
    with tempfile.TemporaryDirectory() as scratch:
        folder, docs = make_output(Path(scratch), size)
        known = {
            ("arc_easy", content_key(doc)): [KnownDocument("arc_easy", i, f"doc-{i}", None)]
            for i, doc in enumerate(docs)
        }
        del docs
        warehouse = WarehouseResource(database=str(Path(scratch) / "warehouse.duckdb"))
        with warehouse.store(EvaluationStore):
            pass  # the tables made before the clock starts
        start = time.perf_counter()
        output = read_harness_output(folder)
        result = imported_evaluation(output, benchmark, known, 1234)
        read = time.perf_counter() - start
        run = EvaluationRun("arc_easy", "imported", result.source, result.fingerprint, "run", result.settings, {})
        with warehouse.store(EvaluationStore) as store:
            store.save_import(run, result)
        whole = time.perf_counter() - start
        assert len(result.evaluation.samples) == size and not result.rejections
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"samples": size, "read_s": read, "store_s": whole - read, "whole_s": whole, "peak_mib": peak}


def main(sizes: list[int]) -> None:
    print("| samples | read and match (s) | store (s) | whole (s) | peak memory (MiB) |")
    print("|---:|---:|---:|---:|---:|")
    for size in sizes:
        completed = subprocess.run(
            [sys.executable, __file__, "--one", str(size)], capture_output=True, text=True, check=False, cwd=ROOT
        )
        if completed.returncode:
            sys.exit(f"{size} samples failed:\n{completed.stderr[-4000:]}")
        row = json.loads(completed.stdout.strip().splitlines()[-1])
        print(
            f"| {row['samples']:,} | {row['read_s']:.1f} | {row['store_s']:.1f} | {row['whole_s']:.1f} | "
            f"{row['peak_mib']:.0f} |"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        sys.path.insert(0, str(ROOT))
        print(json.dumps(measure(int(sys.argv[2]))))
    else:
        main([int(size) for size in sys.argv[1:]] or list(SIZES))
