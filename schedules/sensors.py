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
from eval_platform.evaluation_assets.partitions import ROSTER_MODELS, roster_partitions
from eval_platform.jobs import benchmark_inputs_job, blind_evaluation_tally_job, evolution_era_job, model_evaluation_job
from eval_platform.resources import RosterResource
from eval_platform.schedules.planner import Planner, digest, era_digests, filled_sheets

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
    EVAL_CHECKPOINT_DIR, read when the sensor runs) and evaluates it."""

    @sensor(
        name=name,
        jobs=[model_evaluation_job],
        minimum_interval_seconds=60,
        default_status=DefaultSensorStatus.STOPPED,
        description="Adds each new checkpoint directory in the checkpoints folder (EVAL_CHECKPOINT_DIR) to the "
        "roster and evaluates it on its benchmarks, comparing it with the checkpoint before it and its baseline.",
    )
    def _sensor(context: SensorEvaluationContext, roster: RosterResource) -> SensorResult | SkipReason:
        checkpoints = Path(folder or environment().checkpoint_dir)
        if not checkpoints.is_dir():
            return SkipReason(f"No checkpoints folder {checkpoints}")
        new = new_checkpoint_entries(checkpoints, roster.entries())
        if not new:
            return SkipReason(f"No new checkpoint directory in {checkpoints}")
        for entry in new:
            path = write_entry(roster.folder(), entry)
            context.log.info(f"Checkpoint {entry.name}: roster entry {path}")
        requests = Planner.of(context.instance, roster).roster_changed({e.name: e for e in new}, "checkpoint")
        return SensorResult(run_requests=requests)

    return _sensor


def era_sensor(folder: Path | None = None, name: str = "era_config_sensor"):
    """A sensor that adds an era partition and runs it for each new or changed `<era>.json` (its
    settings) in `folder` (default EVAL_ERAS_DIR, read when the sensor runs), as the planner asks."""

    @sensor(
        name=name,
        job=evolution_era_job,
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
        description="Adds and runs an era for each era configuration (<era>.json) dropped into the eras folder "
        "(EVAL_ERAS_DIR, default data/evolution/eras/).",
    )
    def _sensor(context: SensorEvaluationContext, roster: RosterResource) -> SensorResult | SkipReason:
        planner = Planner.of(context.instance, roster, eras_dir=folder)
        requests = planner.eras(json.loads(context.cursor) if context.cursor else {})
        if not requests:
            return SkipReason(f"No new or changed era configuration in {planner.eras_dir}")
        return SensorResult(run_requests=requests, cursor=json.dumps(era_digests(planner.eras_dir)))

    return _sensor


def filled_sheet_sensor(blind_eval_dir: Path | None = None, name: str = "blind_eval_filled_sheet_sensor"):
    """A sensor that requests a tally when a filled sheet appears in (or changes in) <dir>/filled
    (the blind evaluation's folder, default EVAL_BLIND_DIR, read when the sensor runs), as the
    planner asks."""

    @sensor(
        name=name,
        job=blind_evaluation_tally_job,
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
        description="Tallies the blind evaluation when a filled sheet is dropped into filled/ of its folder "
        "(EVAL_BLIND_DIR, default data/blind_eval/).",
    )
    def _sensor(context: SensorEvaluationContext, roster: RosterResource) -> RunRequest | SkipReason:
        planner = Planner.of(context.instance, roster, blind_dir=blind_eval_dir)
        requests = planner.tally(json.loads(context.cursor) if context.cursor else {})
        if not requests:
            return SkipReason(f"No new or changed filled sheet in {planner.blind_dir / 'filled'}")
        context.update_cursor(json.dumps(filled_sheets(planner.blind_dir)))
        return requests[0]

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
