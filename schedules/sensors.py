"""The sensors: a benchmark's refreshed inputs -> every roster model on it; a new or changed roster
entry -> its evaluations; a new checkpoint directory -> a roster entry compared with the checkpoint
before it; a dropped era configuration -> an era run; a filled blind-evaluation sheet -> a tally."""

import hashlib
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

from eval_platform.benchmarks.roster import RosterEntry, missing_partitions, new_checkpoint_entries, write_entry
from eval_platform.environment import environment
from eval_platform.evolution.eras import era_files, era_run_config
from evaluation_assets.partitions import ERAS, ROSTER_MODELS, era_partitions, roster_partitions
from jobs import benchmark_inputs_job, blind_evaluation_tally_job, evolution_era_job, model_evaluation_job
from resources import RosterResource
from schedules import evaluation_run_requests


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
    benchmark = context.dagster_run.tags["dagster/partition"]
    return evaluation_run_requests(
        context.instance, roster.entries(), [benchmark], roster.protocols(), context.dagster_run.run_id
    )


def every_benchmark_run_requests(
    context: SensorEvaluationContext, roster: RosterResource, entries: dict[str, RosterEntry], run_key: str
) -> list[RunRequest]:
    """The entries on every declared benchmark each is evaluated on."""
    return evaluation_run_requests(context.instance, entries, list(roster.benchmarks()), roster.protocols(), run_key)


def entry_digests(roster: dict[str, RosterEntry]) -> dict[str, str]:
    return {name: hashlib.sha256(entry.model_dump_json().encode()).hexdigest()[:16] for name, entry in roster.items()}


@sensor(
    name="roster_sensor",
    jobs=[model_evaluation_job],
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description="Makes each roster entry a key of the model dimension and each declared benchmark a key of the "
    "benchmark dimension (so they can be launched from the UI), and evaluates an entry added or changed since the "
    "sensor's last tick on its benchmarks. Its first tick only takes note of the roster.",
)
def roster_sensor(context: SensorEvaluationContext, roster: RosterResource) -> SensorResult:
    entries = roster.entries()
    digests = entry_digests(entries)
    seen = json.loads(context.cursor) if context.cursor else None
    changed = {} if seen is None else {name: e for name, e in entries.items() if seen.get(name) != digests[name]}
    existing = context.instance.get_dynamic_partitions(ROSTER_MODELS)
    roster_digest = hashlib.sha256(json.dumps(digests).encode()).hexdigest()[:16]
    return SensorResult(
        run_requests=every_benchmark_run_requests(context, roster, changed, f"roster-{roster_digest}"),
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
            path = write_entry(roster.directory, entry)
            context.log.info(f"Checkpoint {entry.name}: roster entry {path}")
        return SensorResult(
            run_requests=every_benchmark_run_requests(context, roster, {e.name: e for e in new}, "checkpoint")
        )

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
        seen = json.loads(context.cursor) if context.cursor else {}
        paths = era_files(folder)
        files = {era: hashlib.sha256(path.read_bytes()).hexdigest()[:16] for era, path in paths.items()}
        changed = [era for era, digest in files.items() if seen.get(era) != digest]
        if not changed:
            return SkipReason(f"No new or changed era configuration in {folder}")
        existing = set(context.instance.get_dynamic_partitions(ERAS))
        requests = [
            RunRequest(run_key=f"{era}:{files[era]}", partition_key=era, run_config=era_run_config(paths[era]))
            for era in changed
        ]
        return SensorResult(
            run_requests=requests,
            cursor=json.dumps(files),
            dynamic_partitions_requests=[era_partitions.build_add_request([e for e in changed if e not in existing])],
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
        sheets = {p.name: p.stat().st_mtime for p in sorted(folder.glob("*.xls*")) if not p.name.startswith("~$")}
        seen = json.loads(context.cursor) if context.cursor else {}
        changed = sorted(name for name, mtime in sheets.items() if seen.get(name) != mtime)
        if not changed:
            return SkipReason(f"No new or changed filled sheet in {folder}")
        context.update_cursor(json.dumps(sheets))
        return RunRequest(
            run_key=hashlib.sha256(json.dumps(sheets, sort_keys=True).encode()).hexdigest()[:16],
            run_config={"ops": {"blind_eval_scores": {"config": {"folder": str(blind_dir)}}}},
            tags={"filled_sheets": ",".join(changed)},
        )

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
