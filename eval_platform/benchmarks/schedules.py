"""The nightly refresh: every spec's inputs, then every roster model on its benchmarks; and every
roster model on every harness benchmark declared in data/harness/."""

import os

from dagster import RunRequest, ScheduleEvaluationContext, schedule

from eval_platform.benchmarks.harness_tasks import load_declarations
from eval_platform.benchmarks.jobs import benchmark_inputs_job, model_evaluation_job
from eval_platform.benchmarks.partitions import benchmark_partitions, evaluation_key, roster_partitions
from eval_platform.benchmarks.resources import RosterResource
from eval_platform.benchmarks.roster import RosterEntry, evaluation_order, missing_partitions
from eval_platform.benchmarks.specs import BENCHMARKS

NIGHTLY_CRON = os.environ.get("EVAL_NIGHTLY_CRON", "0 2 * * *")
NIGHTLY_TIMEZONE = os.environ.get("EVAL_TIMEZONE", "UTC")


@schedule(
    job=benchmark_inputs_job,
    cron_schedule=NIGHTLY_CRON,
    execution_timezone=NIGHTLY_TIMEZONE,
    description="Every night, refresh every spec's inputs; roster_evaluation_sensor then evaluates "
    "every roster model on each (cron and time zone: EVAL_NIGHTLY_CRON, EVAL_TIMEZONE).",
)
def nightly_benchmark_refresh(context: ScheduleEvaluationContext):
    night = context.scheduled_execution_time.strftime("%Y-%m-%d")
    _add_missing(context.instance, benchmark_partitions, list(BENCHMARKS))
    return [RunRequest(run_key=f"{benchmark}-{night}", partition_key=benchmark) for benchmark in BENCHMARKS]


def _add_missing(instance, dimension, names: list[str]) -> None:
    added = missing_partitions(names, instance.get_dynamic_partitions(dimension.name))
    if added:
        instance.add_dynamic_partitions(dimension.name, added)


def evaluation_run_requests(
    instance, roster: dict[str, RosterEntry], benchmarks: list[str], run_key: str
) -> list[RunRequest]:
    """model_evaluation runs for every roster entry on each of `benchmarks`, of either kind, it is
    evaluated on; benchmark and roster names not yet in their dimensions are added."""
    _add_missing(instance, benchmark_partitions, benchmarks)
    _add_missing(instance, roster_partitions, list(roster))
    return [
        RunRequest(
            run_key=f"{run_key}:{name}:{benchmark}",
            partition_key=evaluation_key(benchmark, name),
            job_name=model_evaluation_job.name,
            tags=roster[name].run_tags or {},
        )
        for benchmark in benchmarks
        for name in evaluation_order(roster)
        if roster[name].evaluates(benchmark)
    ]


@schedule(
    job=model_evaluation_job,
    cron_schedule=NIGHTLY_CRON,
    execution_timezone=NIGHTLY_TIMEZONE,
    description="Every night, every roster model on every harness benchmark of data/harness/ (an unchanged "
    "model reuses its stored answers and computes none).",
)
def nightly_harness_evaluation(context: ScheduleEvaluationContext, roster: RosterResource):
    night = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return evaluation_run_requests(context.instance, roster.entries(), list(load_declarations()), night)
