"""The nightly refresh. Every night each declared benchmark's inputs are refreshed (a dataset's rows
and documents; a harness task has none to ingest); `roster_evaluation_sensor` then evaluates every
roster model on it, each after the entries it is compared with. Both ask the planner
(schedules/planner.py), as the main command (`eval-platform run`) does."""

from dagster import RunRequest, ScheduleEvaluationContext, schedule

from eval_platform.environment import environment
from eval_platform.jobs import benchmark_inputs_job
from eval_platform.resources import RosterResource
from eval_platform.schedules.planner import Planner


@schedule(
    job=benchmark_inputs_job,
    cron_schedule=environment().nightly_cron,
    execution_timezone=environment().timezone,
    description="Every night, refresh every declared benchmark's inputs; roster_evaluation_sensor then evaluates "
    "every roster model on each (an unchanged model reuses its stored answers and computes none). Cron and time "
    "zone: EVAL_NIGHTLY_CRON, EVAL_TIMEZONE.",
)
def nightly_benchmark_refresh(context: ScheduleEvaluationContext, roster: RosterResource) -> list[RunRequest]:
    return Planner.of(context.instance, roster).nightly(context.scheduled_execution_time.strftime("%Y-%m-%d"))


SCHEDULES = [nightly_benchmark_refresh]
