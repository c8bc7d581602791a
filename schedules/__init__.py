"""The nightly refresh. Every night each declared benchmark's inputs are refreshed (a dataset's rows
and documents; a harness task has none to ingest); `roster_evaluation_sensor` then evaluates every
roster model on it, each after the entries it is compared with. Both ask the planner
(schedules/planner.py), as the main command (`eval-platform run`) does."""

from dagster import RunRequest, ScheduleDefinition, ScheduleEvaluationContext, schedule

from eval_platform.environment import Environment
from eval_platform.jobs import benchmark_inputs_job
from eval_platform.resources import RosterResource
from eval_platform.schedules.planner import Planner


def refresh_every_benchmark(context: ScheduleEvaluationContext, roster: RosterResource) -> list[RunRequest]:
    """A tick of the nightly refresh: each declared benchmark's inputs, keyed by the tick's day."""
    return Planner.of(context.instance, roster).nightly(context.scheduled_execution_time.strftime("%Y-%m-%d"))


def nightly_schedule(settings: Environment) -> ScheduleDefinition:
    """The nightly refresh at the cron and time zone of `settings` (the code location's environment
    when it loads: EVAL_NIGHTLY_CRON, EVAL_TIMEZONE)."""
    return schedule(
        name="nightly_benchmark_refresh",
        job=benchmark_inputs_job,
        cron_schedule=settings.nightly_cron,
        execution_timezone=settings.timezone,
        description="Every night, refresh every declared benchmark's inputs; roster_evaluation_sensor then evaluates "
        "every roster model on each (an unchanged model reuses its stored answers and computes none). Cron and time "
        "zone: EVAL_NIGHTLY_CRON, EVAL_TIMEZONE.",
    )(refresh_every_benchmark)
