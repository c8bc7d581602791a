"""Items per second of a backfill in the team setup (Dagster on PostgreSQL, the daemon, Celery
workers, the warehouse on DuckLake) against a served model with a fixed latency, for 1, 2 and 4
workers.

    python speed/team_scaling.py --latency 0.25 --rows 20 --workers 1 2 4

The server (tests/completions_server.py with --memo) answers a prompt it has seen from memory after
`--latency` seconds, so a request costs the latency alone, as with a fast remote GPU server; a
first backfill on one worker warms it and is not reported. The roster has four entries, each a
name for the same served model (the queue runs one run per roster model at a time), on ARC-Easy
and Winogrande by the harness's log-likelihood requests: 8 partitions of `--rows` items. Each line: the workers, the
backfill's wall time from submission to its last run's end, and items/s.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_platform.benchmarks.roster import RosterEntry, write_entry  # noqa: E402
from eval_platform.evaluation_assets.partitions import evaluation_key  # noqa: E402
from tests.processes import free_port, running  # noqa: E402
from tests.team.team_deployment import team_deployment  # noqa: E402

BENCHMARKS = ["arc_easy", "winogrande"]
ENTRIES = [f"served-{n}" for n in range(1, 5)]


def backfill_once(folder: Path, roster: Path, workers: int, rows: int) -> float:
    """A fresh team setup with `workers` workers: the inputs, then the backfill's wall time."""
    with team_deployment(folder, workers=workers, daemon=False, EVAL_ROSTER_DIR=str(roster)) as team:
        for benchmark in BENCHMARKS:
            team.dagster(
                "asset",
                "materialize",
                "-m",
                "eval_platform.definitions",
                "--select",
                "group:benchmark_inputs",
                "--partition",
                benchmark,
                "--config-json",
                json.dumps({"ops": {"benchmark_raw_rows": {"config": {"limit": rows}}}}),
            )
        team.start_daemon()
        with team.instance() as instance:
            while sorted(instance.get_dynamic_partitions("roster_models")) != ENTRIES:
                time.sleep(0.5)
        keys = [str(evaluation_key(b, e)) for b in BENCHMARKS for e in ENTRIES]
        start = time.perf_counter()
        team.dagster(
            "job",
            "backfill",
            "-w",
            "workspace.yaml",
            "-j",
            "model_evaluation",
            "--noprompt",
            "--partitions",
            ",".join(keys),
        )
        runs = team.wait_for_runs("model_evaluation", len(keys), timeout_s=1800)
        elapsed = time.perf_counter() - start
        failed = [run.run_id for run in runs if run.status.value != "SUCCESS"]
        if failed:
            raise RuntimeError(f"runs failed: {failed}; logs in {folder}")
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    port = free_port()
    with (
        tempfile.TemporaryDirectory() as scratch,
        running(
            [
                sys.executable,
                "-m",
                "tests.completions_server",
                "--port",
                str(port),
                "--latency",
                str(args.latency),
                "--memo",
            ],
            f"http://127.0.0.1:{port}/health",
            cwd=str(Path(__file__).resolve().parents[1]),
        ),
    ):
        roster = Path(scratch) / "roster"
        for entry in ENTRIES:
            write_entry(
                roster,
                RosterEntry(
                    name=entry,
                    model=f"served/{entry}",
                    api_base=f"http://127.0.0.1:{port}/v1",
                    solvers=("harness",),
                    benchmarks=tuple(BENCHMARKS),
                ),
            )
        items = len(BENCHMARKS) * len(ENTRIES) * args.rows
        backfill_once(Path(scratch) / "warm", roster, 1, args.rows)
        print(
            f"Backfill of {len(BENCHMARKS) * len(ENTRIES)} partitions ({items} items), served model with "
            f"{args.latency} s per request"
        )
        baseline = None
        for workers in args.workers:
            elapsed = backfill_once(Path(scratch) / f"workers-{workers}", roster, workers, args.rows)
            baseline = baseline or items / elapsed
            print(
                f"{workers} worker(s): {elapsed:6.1f} s, {items / elapsed:5.2f} items/s "
                f"({items / elapsed / baseline:.2f}x the first)",
                flush=True,
            )


if __name__ == "__main__":
    main()
