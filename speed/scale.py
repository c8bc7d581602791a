"""The platform's own cost at full size: the full MMLU-Pro test split (12,032 documents, five-shot)
and the full BBH (24 subtasks, 5,761 documents, three-shot) through `benchmark_evaluation`, with an
engine that costs nothing, behind a real transport.

    nice python speed/scale.py [--sizes 1000 4000 full] [--benchmarks mmlu_pro bbh] [--data DIR]

The engine costs nothing. By default (`--engine in-process`, what a local model on a GPU leaves to
the platform) it is `InstantModel`, a model in the evaluating process whose log-likelihoods are a
function of the request (no tokenizer, no network), registered as the backend `instant/`. With
`--engine served` it is tests/completions_server.py --instant, an OpenAI-compatible completions
server on 127.0.0.1 whose log-probabilities are a function of the text, in a process of its own,
asked through the platform's served path (the gateway, 8 prompts an HTTP request, 8 requests in
flight, every prompt's tokens echoed back as JSON). Each benchmark is declared as the shipped
leaderboard declarations declare it (data/benchmarks/leaderboard_*.yaml), its files pointed at the
full data (`--data`, default ../shared/benchmarks/v2/, see its SOURCES.md); a size of N documents
is the first N of MMLU-Pro, and the first N/24 of each BBH subtask (the harness's `limit`).

Each run is one partition materialised in a fresh process, with a fresh warehouse and Dagster
storage ($DAGSTER_HOME), as a run of the model_evaluation job is. Per run it prints the
documents, the materialisation's wall time and the evaluating process's CPU time per 1,000
documents, the engine server's CPU time per 1,000 documents (the "model", apart from the
platform), the process's peak memory (RSS), the bytes the run added to Dagster's storage and to
the warehouse, the largest materialisation event (as stored, its metadata in it), and whether every row is stored:
a sample per document, and an answer for every request the samples name (for MMLU-Pro also
counted from the data: one request per option of each distinct question). Last, the cost per document from the smallest
size to the largest (the fixed costs, imports and the harness's task index, taken out).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODEL = "instant"  # the roster entry: instant/instant (in-process) or served/instant
SHIPPED = {"mmlu_pro": "leaderboard_mmlu_pro", "bbh": "leaderboard_bbh"}  # data/benchmarks/<name>.yaml
BBH_TASKS = 24
# the full split each shipped slice was taken from (data/benchmarks/SOURCES.md), relative to --data
FULL_FILES = {"mmlu_pro/test.jsonl": "mmlu_pro.jsonl", "mmlu_pro/validation.jsonl": "fewshot/mmlu_pro_validation.jsonl"}
GOAL_MS_PER_DOCUMENT, GOAL_PEAK_GIB = 5.0, 4.0  # the platform's own cost (issue 57), its memory


def declaration(name: str, data: Path, size: int | None) -> dict:
    """The shipped declaration of the benchmark, its files the full splits, `size` documents."""
    import yaml

    shipped = yaml.safe_load((ROOT / "data" / "benchmarks" / f"{SHIPPED[name]}.yaml").read_text(encoding="utf-8"))
    shipped["data_files"] = {
        task: {split: str(data / (FULL_FILES.get(path) or path)) for split, path in splits.items()}
        for task, splits in shipped["data_files"].items()
    }
    if size is not None:
        shipped["limit"] = size if name == "mmlu_pro" else math.ceil(size / BBH_TASKS)
    return shipped


def documents_in(declared: dict) -> int:
    """The documents the declaration evaluates, counted from its files."""
    limit = declared.get("limit")
    total = 0
    for splits in declared["data_files"].values():
        rows = sum(1 for line in Path(splits["test"]).read_text(encoding="utf-8").split("\n") if line.strip())
        total += rows if limit is None else min(limit, rows)
    return total


def mmlu_pro_requests(declared: dict) -> int:
    """MMLU-Pro's distinct requests, counted from the data: one per option of each distinct question
    evaluated (every prompt has the same five shots; 2.5% of the rows repeat another's question and
    options, whose answers are stored once)."""
    (splits,) = declared["data_files"].values()
    lines = [line for line in Path(splits["test"]).read_text(encoding="utf-8").split("\n") if line.strip()]
    rows = map(json.loads, lines[: declared.get("limit") or len(lines)])
    return sum(len(options) for _, options in {(row["question"], tuple(row["options"])) for row in rows})


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


class InstantModel:
    """A model that answers at once, in this process: each log-likelihood a function of its
    request's text, no tokens, no forward pass."""

    rubric_judging = "probabilities"

    def __init__(self, name: str) -> None:
        self.name = self.fingerprint = name

    def greedy_loglikelihoods(self, requests, batch_size: int = 8) -> list[tuple[float, bool]]:
        return [(-(zlib.crc32(f"{r.context}{r.continuation}".encode()) % 1000) / 100, False) for r in requests]

    def loglikelihoods(self, requests, batch_size: int = 8) -> list[float]:
        return [value for value, _ in self.greedy_loglikelihoods(requests, batch_size)]

    def describe_placement(self) -> dict:
        return {"device": "instant", "device_name": "no model (speed/scale.py)"}


def open_instant_model(name: str, settings, gateway=None) -> InstantModel:
    return InstantModel(name)


def child(benchmark: str) -> None:
    """One partition materialised in this process (its environment set by the parent): a JSON line."""
    from dagster import DagsterEventType, DagsterInstance, materialize
    from dagster._serdes import serialize_value

    from eval_platform.common.models import BACKENDS
    from eval_platform.definitions import defs
    from eval_platform.evaluation_assets.benchmarks.assets import benchmark_evaluation
    from eval_platform.evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions

    BACKENDS.register("instant/", "speed.scale:open_instant_model")
    instance = DagsterInstance.get()
    instance.add_dynamic_partitions(str(benchmark_partitions.name), [benchmark])
    instance.add_dynamic_partitions(str(roster_partitions.name), [MODEL])
    home = Path(os.environ["DAGSTER_HOME"])
    before_bytes, wall, cpu = folder_bytes(home), time.perf_counter(), time.process_time()
    result = materialize(
        [benchmark_evaluation],
        resources=defs().resources,
        partition_key=evaluation_key(benchmark, MODEL),
        instance=instance,
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    events = instance.all_logs(result.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
    largest = max(len(serialize_value(entry)) for entry in events)  # the event as stored, its metadata in it
    print(
        json.dumps(
            {
                "success": result.success,
                "wall_s": wall,
                "cpu_s": cpu,
                "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "dagster_bytes": folder_bytes(home) - before_bytes,
                "largest_event_bytes": largest,
            }
        ),
        flush=True,
    )


def stored_rows(warehouse: Path) -> dict[str, int]:
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as conn:
        counts = conn.execute("""
                    SELECT (SELECT count(DISTINCT (task, doc_id)) FROM samples),
                           (SELECT count(DISTINCT k) FROM samples, unnest(request_keys) AS u(k)),
                           (SELECT count(*) FROM answers WHERE request_key IN
                               (SELECT unnest(request_keys) FROM samples)),
                           (SELECT count(*) FROM results)""").fetchone()
    assert counts is not None
    return dict(zip(("documents", "requests", "answers", "results"), counts, strict=True))


def run(name: str, size: int | None, data: Path, api_base: str | None, server) -> dict:
    """One benchmark at one size in a fresh process, warehouse and Dagster storage."""
    import yaml

    work = Path(tempfile.mkdtemp(prefix=f"scale-{name}-"))
    for folder in ("dagster", "benchmarks", "roster"):
        (work / folder).mkdir()
    declared = declaration(name, data, size)
    (work / "benchmarks" / f"{SHIPPED[name]}.yaml").write_text(yaml.safe_dump(declared), encoding="utf-8")
    served = {"model": f"served/{MODEL}", "api_base": api_base} if api_base else {"model": f"instant/{MODEL}"}
    entry = {**served, "solvers": ["harness"]}
    (work / "roster" / f"{MODEL}.yaml").write_text(yaml.safe_dump(entry), encoding="utf-8")
    environment = {
        **os.environ,
        "DAGSTER_HOME": str(work / "dagster"),
        "EVAL_WAREHOUSE": str(work / "warehouse.duckdb"),
        "EVAL_BENCHMARKS_DIR": str(work / "benchmarks"),
        "EVAL_ROSTER_DIR": str(work / "roster"),
    }
    (work / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    server_cpu = sum(server.cpu_times()[:2]) if server else 0.0
    with open(work / "run.log", "w", encoding="utf-8") as log:
        finished = subprocess.run(
            [sys.executable, __file__, "--child", SHIPPED[name]],
            env=environment,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            check=False,
        )
    lines = [line for line in finished.stdout.splitlines() if line.startswith("{")]
    if finished.returncode or not lines:
        raise RuntimeError(f"{name} at {size or 'full'} failed: see {work / 'run.log'}")
    measured = json.loads(lines[-1])
    documents = documents_in(declared)
    rows = stored_rows(work / "warehouse.duckdb")
    expected_requests = mmlu_pro_requests(declared) if name == "mmlu_pro" else rows["requests"]
    return {
        **measured,
        "benchmark": name,
        "size": size or "full",
        "documents": documents,
        "engine_cpu_s": sum(server.cpu_times()[:2]) - server_cpu if server else 0.0,
        "warehouse_bytes": (work / "warehouse.duckdb").stat().st_size,
        **rows,
        "every_row": rows["documents"] == documents and rows["answers"] == rows["requests"] == expected_requests,
        "folder": str(work),
    }


def per_thousand(row: dict, key: str) -> float:
    return row[key] / row["documents"] * 1000


def table(rows: list[dict]) -> str:
    header = (
        "| benchmark | size | documents | answers | wall s | wall s per 1k documents | platform CPU s per 1k "
        "| engine CPU s per 1k | peak RSS GiB | Dagster storage added | warehouse | largest materialisation event "
        "| every row stored |"
    )
    lines = [header, "|---" * 13 + "|"]
    for r in rows:
        lines.append(
            f"| {r['benchmark']} | {r['size']} | {r['documents']:,} | {r['answers']:,} | {r['wall_s']:.0f} | "
            f"{per_thousand(r, 'wall_s'):.1f} | {per_thousand(r, 'cpu_s'):.1f} | "
            f"{per_thousand(r, 'engine_cpu_s'):.1f} | "
            f"{r['peak_rss_bytes'] / 2**30:.2f} | {r['dagster_bytes'] / 2**20:.2f} MiB | "
            f"{r['warehouse_bytes'] / 2**20:.0f} MiB | {r['largest_event_bytes'] / 1024:.0f} KiB | "
            f"{'yes' if r['every_row'] else 'NO'} |"
        )
    return "\n".join(lines)


def marginal(rows: list[dict]) -> list[str]:
    """Each benchmark's cost per document between its smallest and largest size (fixed costs out)."""
    lines = []
    for name in dict.fromkeys(r["benchmark"] for r in rows):
        mine = sorted((r for r in rows if r["benchmark"] == name), key=lambda r: r["documents"])
        if len(mine) < 2:
            continue
        small, large = mine[0], mine[-1]
        documents = large["documents"] - small["documents"]
        wall = (large["wall_s"] - small["wall_s"]) / documents * 1000
        cpu = (large["cpu_s"] - small["cpu_s"]) / documents * 1000
        engine = (large["engine_cpu_s"] - small["engine_cpu_s"]) / documents * 1000
        lines.append(
            f"{name}: from {small['documents']:,} to {large['documents']:,} documents, each further document cost "
            f"{wall:.1f} ms of wall time, {cpu:.1f} ms of the platform's CPU, {engine:.1f} ms of the engine's CPU"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["1000", "4000", "full"])
    parser.add_argument("--benchmarks", nargs="+", default=list(SHIPPED), choices=list(SHIPPED))
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "benchmarks" / "v2")
    parser.add_argument("--engine", choices=("in-process", "served"), default="in-process")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    import psutil

    from eval_engine import cpu_name
    from tests.processes import free_port, running

    print(
        f"{cpu_name()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; "
        f"the {args.engine} instant engine",
        flush=True,
    )
    rows = []

    def every_size(api_base: str | None, server) -> None:
        for name in args.benchmarks:
            for size in args.sizes:
                row = run(name, None if size == "full" else int(size), args.data, api_base, server)
                print(json.dumps(row), flush=True)
                rows.append(row)

    if args.engine == "served":
        port = free_port()
        command = [sys.executable, "-m", "tests.completions_server", "--port", str(port), "--instant"]
        with running(command, f"http://127.0.0.1:{port}/health", cwd=ROOT) as process:
            every_size(f"http://127.0.0.1:{port}/v1", psutil.Process(process.pid))
    else:
        every_size(None, None)
    print()
    print(table(rows))
    print()
    print("\n".join(marginal(rows)))
    largest = [
        max((r for r in rows if r["benchmark"] == name), key=lambda r: r["documents"]) for name in args.benchmarks
    ]
    worst = max(per_thousand(r, "cpu_s") for r in largest)  # seconds per 1,000 documents: ms per document
    peak = max(r["peak_rss_bytes"] for r in rows) / 2**30
    met = {True: "met", False: "not met"}
    every = "yes" if all(r["every_row"] for r in rows) else "NO"
    print(
        f"goals: the platform's CPU under {GOAL_MS_PER_DOCUMENT:.0f} ms a document at the largest size: "
        f"{met[worst < GOAL_MS_PER_DOCUMENT]} (worst {worst:.1f}); peak memory under {GOAL_PEAK_GIB:.0f} GiB: "
        f"{met[peak < GOAL_PEAK_GIB]} ({peak:.2f}); every row stored: {every}"
    )


if __name__ == "__main__":
    main()
