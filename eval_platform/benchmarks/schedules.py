"""The nightly benchmark refresh."""

import os

from dagster import RunRequest, ScheduleEvaluationContext, schedule

from eval_platform.benchmarks.jobs import benchmark_refresh_job
from eval_platform.benchmarks.partitions import benchmark_partitions

NIGHTLY_CRON = os.environ.get("EVAL_NIGHTLY_CRON", "0 2 * * *")
NIGHTLY_TIMEZONE = os.environ.get("EVAL_TIMEZONE", "UTC")


@schedule(job=benchmark_refresh_job, cron_schedule=NIGHTLY_CRON, execution_timezone=NIGHTLY_TIMEZONE,
          description="Every night, refresh every benchmark partition (cron and time zone: EVAL_NIGHTLY_CRON, "
                      "EVAL_TIMEZONE).")
def nightly_benchmark_refresh(context: ScheduleEvaluationContext):
    night = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return [RunRequest(run_key=f"{partition}-{night}", partition_key=partition)
            for partition in benchmark_partitions.get_partition_keys()]
