"""How fast an lm-evaluation-harness output folder is imported, and that evaluation exported as an
inspect_ai log, and in how much memory: 1k, 10k and 100k samples, each step of each size in a fresh
process.

    python speed/import_throughput.py [--memory-limit 300MB] [SIZES ...]

Each size's output folder is made from the shipped harness output (tests/data/harness_output/): its
ARC-Easy samples repeated, each copy's question made its own (so every sample is a document of its
own), its results file as the harness wrote it; the documents it is matched with are given in
memory (the warehouse's read of them, `known_documents`, is not timed). Printed per size: the
seconds to read and match the file (`imported_evaluation`), to store it in a new DuckDB file
(`save_import`, one transaction), the whole, and the process's peak resident memory; then, in a
process of its own, the seconds to export the stored evaluation as an inspect_ai log
(`export_inspect_logs`, as the `inspect_log` asset), that process's peak memory and the log's size;
then, in a third, the seconds and peak memory to import that log back (`inspect_evaluation`, as an
import of another model). Each import is stored as the import asset stores it, under the warehouse
resource's `import_memory_limit` (DuckDB's memory limit past which an import's uncommitted rows spill
to disk), its default unless `--memory-limit` gives another.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "tests" / "data" / "harness_output" / "output"
SIZES = (1_000, 10_000, 100_000)


def synthetic_samples(size: int) -> Iterator[dict]:
    """`size` ARC-Easy samples: copies of the shipped ones, each question its own."""
    (samples,) = SHIPPED.rglob("samples_arc_easy_*.jsonl")
    shipped = [json.loads(line) for line in samples.read_text().splitlines()]
    for i in range(size):
        sample = json.loads(json.dumps(shipped[i % len(shipped)]))
        sample["doc"]["question"] += f" ({i})"
        sample["doc_id"] = i
        yield sample


def known(size: int) -> dict:
    """The documents of the synthetic samples, as the warehouse would know them."""
    from eval_platform.benchmarks.imports import KnownDocument, content_key

    return {
        ("arc_easy", content_key(sample["doc"])): [KnownDocument("arc_easy", i, f"doc-{i}", None)]
        for i, sample in enumerate(synthetic_samples(size))
    }


def make_output(folder: Path, size: int) -> Path:
    """An output folder of `size` synthetic ARC-Easy samples, its results file as the harness wrote it."""
    (results,) = SHIPPED.rglob("results_*.json")
    (samples,) = SHIPPED.rglob("samples_arc_easy_*.jsonl")
    out = folder / "output" / results.parent.name
    out.mkdir(parents=True)
    report = json.loads(results.read_text())
    report["n-samples"]["arc_easy"] = {"original": size, "effective": size}
    (out / results.name).write_text(json.dumps(report))
    with (out / samples.name).open("w") as lines:
        lines.writelines(json.dumps(sample) + "\n" for sample in synthetic_samples(size))
    return folder / "output"


def measure(size: int, scratch: Path) -> dict[str, float]:
    """One size's import, in this process, into a warehouse in `scratch`: the figures printed."""
    from eval_platform.benchmarks.imports import imported_evaluation, read_harness_output
    from eval_platform.benchmarks.store import EvaluationStore
    from eval_platform.benchmarks.store.evaluations import EvaluationRun

    folder, documents = make_output(scratch, size), known(size)
    warehouse = warehouse_at(scratch)
    with warehouse.store(EvaluationStore):
        pass  # the tables made before the clock starts
    start = time.perf_counter()
    output = read_harness_output(folder)
    result = imported_evaluation(output, arc_easy(), documents, 1234)
    read = time.perf_counter() - start
    run = EvaluationRun("arc_easy", "imported", result.source, result.fingerprint, "run", result.settings, {})
    with warehouse.store(EvaluationStore, warehouse.import_memory_limit) as store:
        store.save_import(run, result)
    whole = time.perf_counter() - start
    assert len(result.evaluation.samples) == size and not result.rejections
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"samples": size, "read_s": read, "store_s": whole - read, "whole_s": whole, "peak_mib": peak}


def measure_export(size: int, scratch: Path) -> dict[str, float]:
    """The evaluation `measure` stored in `scratch`, exported as an inspect_ai log, in this process."""
    from eval_platform.evaluation_assets.benchmarks.assets import export_partition

    warehouse = warehouse_at(scratch)
    start = time.perf_counter()
    ((path, count),) = export_partition(warehouse, "arc_easy", "imported", scratch / "exports").items()
    seconds = time.perf_counter() - start
    assert count == size, count
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"export_s": seconds, "export_peak_mib": peak, "log_mib": path.stat().st_size / 2**20}


def measure_reimport(size: int, scratch: Path) -> dict[str, float]:
    """The log `measure_export` wrote, imported as an inspect_ai log (another model) into the same
    warehouse, in this process."""
    from eval_platform.benchmarks.inspect_imports import inspect_evaluation, read_inspect_log
    from eval_platform.benchmarks.store import EvaluationStore
    from eval_platform.benchmarks.store.evaluations import EvaluationRun

    (path,) = (scratch / "exports").glob("*.eval")
    documents = known(size)
    warehouse = warehouse_at(scratch)
    start = time.perf_counter()
    result = inspect_evaluation(read_inspect_log(path), arc_easy(), documents, {})
    run = EvaluationRun("arc_easy", "reimported", result.source, result.fingerprint, "run", result.settings, {})
    with warehouse.store(EvaluationStore, warehouse.import_memory_limit) as store:
        store.save_import(run, result)
    seconds = time.perf_counter() - start
    assert len(result.lineage) == size and not result.rejections, (len(result.lineage), result.rejections[:1])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"reimport_s": seconds, "reimport_peak_mib": peak}


def warehouse_at(scratch: Path):
    from eval_platform.resources import WarehouseResource

    limit = os.environ.get("IMPORT_THROUGHPUT_MEMORY_LIMIT")
    return WarehouseResource(
        database=str(scratch / "warehouse.duckdb"), **({"import_memory_limit": limit} if limit else {})
    )


def arc_easy():
    from eval_platform.benchmarks.declarations import declared_benchmarks
    from eval_platform.environment import DATA_DIR

    return declared_benchmarks(DATA_DIR / "benchmarks")["arc_easy"]


def in_process(step: str, size: int, scratch: Path) -> dict[str, float]:
    completed = subprocess.run(
        [sys.executable, __file__, step, str(size), str(scratch)], capture_output=True, text=True, check=False, cwd=ROOT
    )
    if completed.returncode:
        sys.exit(f"{size} samples failed ({step}):\n{completed.stderr[-4000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main(sizes: list[int], memory_limit: str | None) -> None:
    if memory_limit:
        os.environ["IMPORT_THROUGHPUT_MEMORY_LIMIT"] = memory_limit  # the steps' processes read it
    print("| samples | read and match (s) | store (s) | import (s) | peak memory (MiB) "
          "| export (s) | peak memory (MiB) | log (MiB) | log imported (s) | peak memory (MiB) |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in sizes:
        with tempfile.TemporaryDirectory() as scratch:
            row = in_process("--import", size, Path(scratch))
            row |= in_process("--export", size, Path(scratch))
            row |= in_process("--reimport", size, Path(scratch))
        print(
            f"| {row['samples']:,} | {row['read_s']:.1f} | {row['store_s']:.1f} | {row['whole_s']:.1f} | "
            f"{row['peak_mib']:.0f} | {row['export_s']:.1f} | {row['export_peak_mib']:.0f} | {row['log_mib']:.1f} | "
            f"{row['reimport_s']:.1f} | {row['reimport_peak_mib']:.0f} |"
        )


if __name__ == "__main__":
    steps = {"--import": measure, "--export": measure_export, "--reimport": measure_reimport}
    if sys.argv[1:2] and sys.argv[1] in steps:
        sys.path.insert(0, str(ROOT))
        print(json.dumps(steps[sys.argv[1]](int(sys.argv[2]), Path(sys.argv[3]))))
    else:
        options = sys.argv[1:]
        limit = options.pop(options.index("--memory-limit") + 1) if "--memory-limit" in options else None
        sizes = [int(size) for size in options if size != "--memory-limit"]
        main(sizes or list(SIZES), limit)
