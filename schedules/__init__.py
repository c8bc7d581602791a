"""The nightly refresh, and the run requests it and the sensors make (schedules/sensors.py).

Every night each declared benchmark's inputs are refreshed (a dataset's rows and documents; a
harness task has none to ingest); `roster_evaluation_sensor` then evaluates every roster model on
it, each after the entries it is compared with. The main command (`eval-platform run`) runs these
same requests, in this same order."""

from dagster import DagsterInstance, DynamicPartitionsDefinition, RunRequest, ScheduleEvaluationContext, schedule

from eval_platform.benchmarks.declarations import declared_benchmarks
from eval_platform.benchmarks.protocols import Protocol
from eval_platform.benchmarks.roster import RosterEntry, evaluation_order, missing_partitions
from eval_platform.environment import environment
from evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions
from jobs import benchmark_inputs_job, model_evaluation_job


def add_missing(instance: DagsterInstance, dimension: DynamicPartitionsDefinition, names: list[str]) -> None:
    """Make the names keys of a dynamic dimension where they are not yet."""
    assert dimension.name is not None
    added = missing_partitions(names, instance.get_dynamic_partitions(dimension.name))
    if added:
        instance.add_dynamic_partitions(dimension.name, added)


def inputs_run_requests(instance: DagsterInstance, benchmarks: list[str], run_key: str) -> list[RunRequest]:
    """benchmark_inputs runs for each of `benchmarks` (each made a key of the benchmark dimension)."""
    add_missing(instance, benchmark_partitions, benchmarks)
    return [
        RunRequest(run_key=f"{run_key}:{name}", partition_key=name, job_name=benchmark_inputs_job.name)
        for name in benchmarks
    ]


def evaluation_run_requests(
    instance: DagsterInstance,
    roster: dict[str, RosterEntry],
    benchmarks: list[str],
    protocols: dict[str, Protocol],
    run_key: str,
) -> list[RunRequest]:
    """model_evaluation runs for every roster entry on each of `benchmarks` it is evaluated on, each
    after the entries it is compared with; benchmark and roster names not yet in their dimensions
    are added."""
    add_missing(instance, benchmark_partitions, benchmarks)
    add_missing(instance, roster_partitions, list(roster))
    return [
        RunRequest(
            run_key=f"{run_key}:{name}:{benchmark}",
            partition_key=evaluation_key(benchmark, name),
            job_name=model_evaluation_job.name,
            tags=roster[name].run_tags or {},
        )
        for benchmark in benchmarks
        for name in evaluation_order(roster)
        if roster[name].evaluates(benchmark, protocols)
    ]


@schedule(
    job=benchmark_inputs_job,
    cron_schedule=environment().nightly_cron,
    execution_timezone=environment().timezone,
    description="Every night, refresh every declared benchmark's inputs; roster_evaluation_sensor then evaluates "
    "every roster model on each (an unchanged model reuses its stored answers and computes none). Cron and time "
    "zone: EVAL_NIGHTLY_CRON, EVAL_TIMEZONE.",
)
def nightly_benchmark_refresh(context: ScheduleEvaluationContext) -> list[RunRequest]:
    night = context.scheduled_execution_time.strftime("%Y-%m-%d")
    return inputs_run_requests(context.instance, list(declared_benchmarks()), night)


SCHEDULES = [nightly_benchmark_refresh]
