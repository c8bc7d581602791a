"""The nightly benchmark refresh, the sensor that starts eras dropped into data/evolution/eras/, and
the sensor that tallies newly filled blind-evaluation sheets."""

import hashlib
import json
import os
from pathlib import Path

from dagster import (
    DefaultSensorStatus, RunRequest, ScheduleEvaluationContext, SensorEvaluationContext, SensorResult, SkipReason,
    schedule, sensor,
)

from eval_platform.jobs import benchmark_refresh_job, blind_evaluation_tally_job, evolution_era_job
from eval_platform.partitions import benchmark_partitions, era_partitions
from eval_platform.resources import BLIND_EVAL_DIR, DATA_DIR

ERA_DIR = DATA_DIR / "evolution" / "eras"

NIGHTLY_CRON = os.environ.get("EVAL_NIGHTLY_CRON", "0 2 * * *")
NIGHTLY_TIMEZONE = os.environ.get("EVAL_TIMEZONE", "UTC")


@schedule(job=benchmark_refresh_job, cron_schedule=NIGHTLY_CRON, execution_timezone=NIGHTLY_TIMEZONE,
          description="Every night, refresh every benchmark partition (cron and time zone: EVAL_NIGHTLY_CRON, "
                      "EVAL_TIMEZONE).")
def nightly_benchmark_refresh(context: ScheduleEvaluationContext):
    night = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return [RunRequest(run_key=f"{partition}-{night}", partition_key=partition)
            for partition in benchmark_partitions.get_partition_keys()]


def filled_sheet_sensor(blind_eval_dir: Path = BLIND_EVAL_DIR, name: str = "blind_eval_filled_sheet_sensor"):
    """A sensor that requests a tally when a filled sheet appears in (or changes in) <dir>/filled."""
    folder = Path(blind_eval_dir) / "filled"

    @sensor(name=name, job=blind_evaluation_tally_job, minimum_interval_seconds=30,
            default_status=DefaultSensorStatus.STOPPED,
            description=f"Tallies the blind evaluation when a filled sheet is dropped into {folder}.")
    def _sensor(context: SensorEvaluationContext):
        sheets = {p.name: p.stat().st_mtime for p in sorted(folder.glob("*.xls*")) if not p.name.startswith("~$")}
        seen = json.loads(context.cursor) if context.cursor else {}
        changed = sorted(name for name, mtime in sheets.items() if seen.get(name) != mtime)
        if not changed:
            return SkipReason(f"No new or changed filled sheet in {folder}")
        context.update_cursor(json.dumps(sheets))
        config = {"folder": str(blind_eval_dir)}
        return RunRequest(
            run_key=hashlib.sha256(json.dumps(sheets, sort_keys=True).encode()).hexdigest()[:16],
            run_config={"ops": {"blind_eval_scores": {"config": config}}},
            tags={"filled_sheets": ",".join(changed)},
        )

    return _sensor


def era_sensor(folder: Path = ERA_DIR, name: str = "era_config_sensor"):
    """A sensor that adds an era partition and runs it for each new or changed `<era>.json` (its
    configuration: the evolution_era config) in `folder`."""

    @sensor(name=name, job=evolution_era_job, minimum_interval_seconds=30, default_status=DefaultSensorStatus.STOPPED,
            description=f"Adds and runs an era for each era configuration (<era>.json) dropped into {folder}.")
    def _sensor(context: SensorEvaluationContext):
        seen = json.loads(context.cursor) if context.cursor else {}
        files = {p.stem: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in sorted(Path(folder).glob("*.json"))}
        changed = [era for era, digest in files.items() if seen.get(era) != digest]
        if not changed:
            return SkipReason(f"No new or changed era configuration in {folder}")
        existing = set(context.instance.get_dynamic_partitions(era_partitions.name))
        requests = [RunRequest(run_key=f"{era}:{files[era]}", partition_key=era, run_config={
            "ops": {"evolution_era": {"config": json.loads((Path(folder) / f"{era}.json").read_text())}}})
            for era in changed]
        return SensorResult(run_requests=requests, cursor=json.dumps(files), dynamic_partitions_requests=[
            era_partitions.build_add_request([era for era in changed if era not in existing])])

    return _sensor


blind_eval_filled_sheet_sensor = filled_sheet_sensor()
era_config_sensor = era_sensor()
ALL_SCHEDULES = [nightly_benchmark_refresh]
ALL_SENSORS = [blind_eval_filled_sheet_sensor, era_config_sensor]
