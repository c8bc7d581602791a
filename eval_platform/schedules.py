"""The nightly benchmark refresh and the sensor that tallies newly filled blind-evaluation sheets."""

import hashlib
import json
import os
from pathlib import Path

from dagster import (
    DefaultSensorStatus, RunRequest, ScheduleEvaluationContext, SensorEvaluationContext, SkipReason, schedule, sensor,
)

from eval_platform.jobs import benchmark_refresh_job, blind_evaluation_tally_job
from eval_platform.partitions import benchmark_partitions
from eval_platform.resources import BLIND_EVAL_DIR

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
        sheets = {p.name: p.stat().st_mtime for p in sorted(folder.glob("*.xlsx")) if not p.name.startswith("~$")}
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


blind_eval_filled_sheet_sensor = filled_sheet_sensor()
ALL_SCHEDULES = [nightly_benchmark_refresh]
ALL_SENSORS = [blind_eval_filled_sheet_sensor]
