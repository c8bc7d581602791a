"""The sensors, each asking the planner (schedules/planner.py) what to run: a benchmark's refreshed
inputs -> every roster model on it; a new or changed roster entry -> its evaluations; a new
checkpoint directory -> a roster entry compared with the checkpoint before it; a dropped era
configuration -> an era run; a filled blind-evaluation sheet -> a tally."""

import json
from pathlib import Path

from dagster import (
    DagsterRunStatus,
    DefaultSensorStatus,
    RunRequest,
    RunStatusSensorContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    run_status_sensor,
    sensor,
)

from eval_platform.benchmarks.imports import source_stamp
from eval_platform.benchmarks.roster import RosterEntry, missing_partitions, new_checkpoint_entries, write_entry
from eval_platform.environment import environment
from eval_platform.evaluation_assets.partitions import ERAS, ROSTER_MODELS, era_partitions, roster_partitions
from eval_platform.jobs import benchmark_inputs_job, blind_evaluation_tally_job, evolution_era_job, model_evaluation_job
from eval_platform.resources import RosterResource
from eval_platform.schedules.planner import (
    Planner,
    digest,
    era_digests,
    era_run_requests,
    filled_sheets,
    tally_run_request,
)

PARTITION_TAG = "dagster/partition"


@run_status_sensor(
    run_status=DagsterRunStatus.SUCCESS,
    monitored_jobs=[benchmark_inputs_job],
    request_job=model_evaluation_job,
    name="roster_evaluation_sensor",
    default_status=DefaultSensorStatus.RUNNING,
    description="When a benchmark's inputs are refreshed (nightly, or by hand), evaluate every roster model on it. "
    "An unchanged model reuses its stored answers; a changed entry (settings or weights) is evaluated again.",
)
def roster_evaluation_sensor(context: RunStatusSensorContext, roster: RosterResource) -> list[RunRequest]:
    run = context.dagster_run
    return Planner.of(context.instance, roster).after_success(run.job_name, run.tags.get(PARTITION_TAG), run.run_id)


def entry_digests(roster: dict[str, RosterEntry]) -> dict[str, str]:
    """Each entry's digest: its fields, and an import's files as they are now (rewritten, it changes)."""
    return {
        name: digest((entry.model_dump_json() + (source_stamp(Path(entry.source)) if entry.source else "")).encode())
        for name, entry in roster.items()
    }


@sensor(
    name="roster_sensor",
    jobs=[model_evaluation_job],
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description="Makes each roster entry (and each import of the imports folder) a key of the model dimension and "
    "each declared benchmark a key of the benchmark dimension (so they can be launched from the UI), and evaluates "
    "an entry added or changed (an import: its files rewritten) since the sensor's last tick on its benchmarks. Its "
    "first tick only takes note of the roster.",
)
def roster_sensor(context: SensorEvaluationContext, roster: RosterResource) -> SensorResult:
    entries = roster.entries()
    digests = entry_digests(entries)
    seen = json.loads(context.cursor) if context.cursor else None
    changed = {} if seen is None else {name: e for name, e in entries.items() if seen.get(name) != digests[name]}
    existing = context.instance.get_dynamic_partitions(ROSTER_MODELS)
    roster_digest = digest(json.dumps(digests).encode())
    return SensorResult(
        run_requests=Planner.of(context.instance, roster).roster_changed(changed, f"roster-{roster_digest}"),
        cursor=json.dumps(digests),
        dynamic_partitions_requests=[roster_partitions.build_add_request(missing_partitions(entries, existing))],
    )


def checkpoint_sensor(folder: Path | None = None, name: str = "checkpoint_sensor"):
    """A sensor that adds a roster entry for each new checkpoint directory in `folder` (default
    EVAL_CHECKPOINT_DIR) and evaluates it."""
    folder = Path(folder or environment().checkpoint_dir)

    @sensor(
        name=name,
        jobs=[model_evaluation_job],
        minimum_interval_seconds=60,
        default_status=DefaultSensorStatus.STOPPED,
        description=f"Adds each new checkpoint directory in {folder} to the roster and evaluates it on its benchmarks, "
        "comparing it with the checkpoint before it and its baseline.",
    )
    def _sensor(context: SensorEvaluationContext, roster: RosterResource) -> SensorResult | SkipReason:
        if not folder.is_dir():
            return SkipReason(f"No checkpoints folder {folder}")
        new = new_checkpoint_entries(folder, roster.entries())
        if not new:
            return SkipReason(f"No new checkpoint directory in {folder}")
        for entry in new:
            path = write_entry(roster.folder(), entry)
            context.log.info(f"Checkpoint {entry.name}: roster entry {path}")
        requests = Planner.of(context.instance, roster).roster_changed({e.name: e for e in new}, "checkpoint")
        return SensorResult(run_requests=requests)

    return _sensor


def era_sensor(folder: Path | None = None, name: str = "era_config_sensor"):
    """A sensor that adds an era partition and runs it for each new or changed `<era>.json` (its
    settings) in `folder` (default data/evolution/eras/)."""
    folder = Path(folder or environment().eras_dir)

    @sensor(
        name=name,
        job=evolution_era_job,
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
        description=f"Adds and runs an era for each era configuration (<era>.json) dropped into {folder}.",
    )
    def _sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
        requests = era_run_requests(folder, json.loads(context.cursor) if context.cursor else {})
        if not requests:
            return SkipReason(f"No new or changed era configuration in {folder}")
        existing = set(context.instance.get_dynamic_partitions(ERAS))
        added = [str(r.partition_key) for r in requests if r.partition_key not in existing]
        return SensorResult(
            run_requests=requests,
            cursor=json.dumps(era_digests(folder)),
            dynamic_partitions_requests=[era_partitions.build_add_request(added)],
        )

    return _sensor


def filled_sheet_sensor(blind_eval_dir: Path | None = None, name: str = "blind_eval_filled_sheet_sensor"):
    """A sensor that requests a tally when a filled sheet appears in (or changes in) <dir>/filled."""
    blind_dir = Path(blind_eval_dir or environment().blind_dir)
    folder = blind_dir / "filled"

    @sensor(
        name=name,
        job=blind_evaluation_tally_job,
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
        description=f"Tallies the blind evaluation when a filled sheet is dropped into {folder}.",
    )
    def _sensor(context: SensorEvaluationContext) -> RunRequest | SkipReason:
        request = tally_run_request(blind_dir, json.loads(context.cursor) if context.cursor else {})
        if request is None:
            return SkipReason(f"No new or changed filled sheet in {folder}")
        context.update_cursor(json.dumps(filled_sheets(blind_dir)))
        return request

    return _sensor


checkpoint_evaluation_sensor = checkpoint_sensor()
era_config_sensor = era_sensor()
blind_eval_filled_sheet_sensor = filled_sheet_sensor()

SENSORS = [
    roster_sensor,
    roster_evaluation_sensor,
    checkpoint_evaluation_sensor,
    blind_eval_filled_sheet_sensor,
    era_config_sensor,
]
