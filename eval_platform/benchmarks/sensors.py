"""The roster evaluation sensor: a benchmark's refreshed inputs -> every roster model on it.

The roster sensor: a new or changed roster entry becomes a model partition and is evaluated on
its benchmarks of either kind (a spec's, a harness benchmark of data/harness/).

The checkpoint sensor: each checkpoint directory written into the checkpoints folder (default
data/checkpoints/, or EVAL_CHECKPOINT_DIR) becomes a roster entry named after it, is evaluated on
its benchmarks of either kind, and is compared with the checkpoint before it and with its baseline.

What every checkpoint's entry gets besides its model and predecessor (benchmarks, baseline, dtype,
...) is read from `checkpoints.yaml` in that folder, a roster entry without a name or model."""

import hashlib
import json
import os
import re
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

from eval_platform.benchmarks.harness_tasks import load_declarations
from eval_platform.benchmarks.jobs import benchmark_inputs_job, model_evaluation_job
from eval_platform.benchmarks.partitions import roster_partitions
from eval_platform.benchmarks.resources import RosterResource
from eval_platform.benchmarks.roster import RosterEntry, RosterError, missing_partitions, parse_entry, write_entry
from eval_platform.benchmarks.schedules import evaluation_run_requests
from eval_platform.benchmarks.specs import BENCHMARKS
from eval_platform.common.resources import DATA_DIR

CHECKPOINT_DIR = Path(os.environ.get("EVAL_CHECKPOINT_DIR", str(DATA_DIR / "checkpoints")))
CHECKPOINT_SETTINGS = "checkpoints.yaml"


@run_status_sensor(
    run_status=DagsterRunStatus.SUCCESS,
    monitored_jobs=[benchmark_inputs_job],
    request_job=model_evaluation_job,
    name="roster_evaluation_sensor",
    default_status=DefaultSensorStatus.RUNNING,
    description="When a benchmark's inputs are refreshed (nightly, or by hand), evaluate every roster "
    "model on it. An unchanged model reuses its stored predictions; a changed entry "
    "(settings or weights) is evaluated again.",
)
def roster_evaluation_sensor(context: RunStatusSensorContext, roster: RosterResource):
    benchmark = context.dagster_run.tags["dagster/partition"]
    return evaluation_run_requests(context.instance, roster.entries(), [benchmark], context.dagster_run.run_id)


def _natural(name: str) -> list:
    """step-900 before step-1000."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def checkpoint_dirs(folder: Path) -> list[Path]:
    """The checkpoint directories in `folder` (those holding a config.json), in natural name order."""
    return sorted((p for p in Path(folder).iterdir() if (p / "config.json").is_file()), key=lambda p: _natural(p.name))


def new_checkpoint_entries(folder: Path, roster: dict[str, RosterEntry]) -> list[RosterEntry]:
    """A roster entry for each checkpoint directory not yet in the roster: named after it, its model
    the directory, its predecessor the checkpoint before it, its other fields checkpoints.yaml's."""
    settings_file = Path(folder) / CHECKPOINT_SETTINGS
    settings = parse_entry(settings_file).model_dump(exclude_none=True) if settings_file.exists() else {}
    if {"model", "previous"} & set(settings):
        raise RosterError(f"{settings_file}: model and previous are set per checkpoint, not here")
    settings.pop("name", None)
    if settings.get("baseline") and settings["baseline"] not in roster:
        raise RosterError(f"{settings_file}: baseline: {settings['baseline']!r} is not in the roster")
    entries, previous = [], None
    for directory in checkpoint_dirs(folder):
        name = re.sub(r"[^A-Za-z0-9._-]", "-", directory.name)
        if name not in roster:
            entries.append(
                RosterEntry(
                    **{
                        **settings,
                        "name": name,
                        "model": f"local/{directory.resolve()}",
                        **({"previous": previous} if previous else {}),
                    }
                )
            )
        previous = name
    return entries


def every_kind_run_requests(instance, entries: dict[str, RosterEntry], run_key: str) -> list[RunRequest]:
    """The entries on every benchmark each is evaluated on, a spec's and a harness benchmark of
    data/harness/ (every one of them a key of the benchmark dimension, entries or none)."""
    return evaluation_run_requests(instance, entries, [*BENCHMARKS, *load_declarations()], run_key)


def entry_digests(roster: dict[str, RosterEntry]) -> dict[str, str]:
    return {name: hashlib.sha256(entry.model_dump_json().encode()).hexdigest()[:16] for name, entry in roster.items()}


@sensor(
    name="roster_sensor",
    jobs=[model_evaluation_job],
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.RUNNING,
    description="Makes each roster entry a key of the model dimension, and each spec and harness benchmark of "
    "data/harness/ a key of the benchmark dimension (so they can be launched from the UI), "
    "and evaluates an entry added or changed since the sensor's last tick on its benchmarks of "
    "either kind. Its first tick only takes note of the roster.",
)
def roster_sensor(context: SensorEvaluationContext, roster: RosterResource):
    entries = roster.entries()
    digests = entry_digests(entries)
    seen = json.loads(context.cursor) if context.cursor else None
    changed = (
        {} if seen is None else {name: entry for name, entry in entries.items() if seen.get(name) != digests[name]}
    )
    existing = context.instance.get_dynamic_partitions(roster_partitions.name)
    roster_digest = hashlib.sha256(json.dumps(digests).encode()).hexdigest()[:16]
    requests = every_kind_run_requests(context.instance, changed, f"roster-{roster_digest}")
    return SensorResult(
        run_requests=requests,
        cursor=json.dumps(digests),
        dynamic_partitions_requests=[roster_partitions.build_add_request(missing_partitions(entries, existing))],
    )


def checkpoint_sensor(folder: Path = CHECKPOINT_DIR, name: str = "checkpoint_sensor"):
    """A sensor that adds a roster entry for each new checkpoint directory in `folder` and evaluates it."""

    @sensor(
        name=name,
        jobs=[model_evaluation_job],
        minimum_interval_seconds=60,
        default_status=DefaultSensorStatus.STOPPED,
        description=f"Adds each new checkpoint directory in {folder} to the roster and evaluates it on its "
        f"benchmarks of either kind, comparing it with the checkpoint before it and its baseline.",
    )
    def _sensor(context: SensorEvaluationContext, roster: RosterResource):
        if not Path(folder).is_dir():
            return SkipReason(f"No checkpoints folder {folder}")
        entries = roster.entries()
        new = new_checkpoint_entries(Path(folder), entries)
        if not new:
            return SkipReason(f"No new checkpoint directory in {folder}")
        for entry in new:
            path = write_entry(roster.directory, entry)
            context.log.info(f"Checkpoint {entry.name}: roster entry {path}")
        return SensorResult(
            run_requests=every_kind_run_requests(context.instance, {e.name: e for e in new}, "checkpoint")
        )

    return _sensor


checkpoint_evaluation_sensor = checkpoint_sensor()
