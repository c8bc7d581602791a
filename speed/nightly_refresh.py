"""The nightly refresh of the roster, as the daemon runs it, timed: the schedule's benchmark_inputs
runs, then the model_evaluation runs roster_evaluation_sensor requests as each succeeds. A first
(cold) night into a new warehouse, then an unchanged night, which reuses every stored answer.

    .venv/bin/python speed/nightly_refresh.py                 (the demo roster, data/roster/, full slices)
    .venv/bin/python speed/nightly_refresh.py --limit 10      (each benchmark's first 10 rows)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import datetime
from pathlib import Path

from dagster import Definitions, build_run_status_sensor_context, build_schedule_context

from eval_platform.environment import environment
from eval_platform.schedules import nightly_schedule
from eval_platform.schedules.sensors import roster_evaluation_sensor


def run_request(defs: Definitions, instance, job: str, partition_key: str, limit: int | None = None):
    """Execute one run request in process, as the daemon would launch it (inputs cut to `limit` rows)."""
    ops = {"benchmark_raw_rows": {"config": {"limit": limit}}} if job == "benchmark_inputs" and limit else {}
    result = defs.resolve_job_def(job).execute_in_process(
        partition_key=partition_key, instance=instance, run_config={"ops": ops}
    )
    assert result.success, f"{job} [{partition_key}] failed"
    return result


def evaluation_counts(result) -> dict[str, dict]:
    """The benchmark_evaluation metadata of a run: per solver, the answers it asked for, those it
    computed, and the forward passes."""
    return {
        str(event.partition): event.materialization.metadata["solvers"].value
        for event in result.get_asset_materialization_events()
        if event.asset_key.path[-1] == "benchmark_evaluation"
    }


def run_night(
    defs: Definitions, instance, day: datetime, benchmarks: list[str] | None = None, limit: int | None = None
) -> tuple[dict[str, dict], float]:
    """One night: each of the schedule's runs (those of `benchmarks`, default all), then the runs the
    sensor requests when it succeeds. Each evaluation's answer counts, and the wall time."""
    roster = defs.resources["roster"]
    started = time.perf_counter()
    counts: dict[str, dict] = {}
    with build_schedule_context(instance, day, resources={"roster": roster}) as context:
        nightly = nightly_schedule(environment())(context)
    for request in nightly:
        if benchmarks is not None and request.partition_key not in benchmarks:
            continue
        inputs = run_request(defs, instance, "benchmark_inputs", request.partition_key, limit)
        with build_run_status_sensor_context(
            sensor_name="roster_evaluation_sensor",
            dagster_instance=instance,
            dagster_run=inputs.dagster_run,
            dagster_event=inputs.get_run_success_event(),
            resources={"roster": roster},
        ) as context:
            evaluations = roster_evaluation_sensor(context)
        for evaluation in evaluations:
            counts |= evaluation_counts(run_request(defs, instance, "model_evaluation", evaluation.partition_key))
    return counts, time.perf_counter() - started


def totals(counts: dict[str, dict]) -> dict[str, int]:
    return {
        field: sum(solver[field] for solvers in counts.values() for solver in solvers.values())
        for field in ("answers", "computed", "forward_passes")
    }


def main() -> None:
    from dagster import DagsterInstance

    from eval_platform.definitions import defs
    from eval_platform.resources import LanguageModelResource, ModelGatewayResource, RosterResource, WarehouseResource

    code_location = defs()

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, help="Each benchmark's first N rows.")
    parser.add_argument("--roster", default=None, help="The roster folder (default: data/roster/).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        night_defs = Definitions(
            assets=list(code_location.assets),
            jobs=list(code_location.jobs),
            resources={
                "warehouse": WarehouseResource(database=str(Path(folder) / "warehouse.duckdb")),
                "roster": RosterResource(**({"directory": args.roster} if args.roster else {})),
                "evaluation_model": LanguageModelResource(),
                "gateway": ModelGatewayResource(),
            },
        )
        instance = DagsterInstance.local_temp(folder)  # persistent, as the daemon's: the schedule adds partitions
        for label, day in (("first night (cold warehouse)", 23), ("unchanged night", 24)):
            counts, seconds = run_night(night_defs, instance, datetime(2026, 11, day, 2, 0), limit=args.limit)
            print(f"{label}: {seconds:.1f} s, {len(counts)} evaluations, answers {totals(counts)}", flush=True)


if __name__ == "__main__":
    main()
