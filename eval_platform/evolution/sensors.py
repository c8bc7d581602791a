"""The era sensor: each era configuration (<era>.json) dropped into data/evolution/eras/ becomes an
era partition and its run. The main command runs the same folder's eras through `era_files`."""

import hashlib
import json
from pathlib import Path

from dagster import DefaultSensorStatus, RunRequest, SensorEvaluationContext, SensorResult, SkipReason, sensor

from eval_platform.common.resources import DATA_DIR
from eval_platform.evolution.jobs import evolution_era_job
from eval_platform.evolution.partitions import era_partitions

ERA_DIR = DATA_DIR / "evolution" / "eras"


def era_files(folder: Path = ERA_DIR) -> dict[str, Path]:
    """Each era's configuration file in `folder`, by era name (the file's stem)."""
    return {path.stem: path for path in sorted(Path(folder).glob("*.json"))}


def era_run_config(path: Path) -> dict:
    """The run config of an era from its configuration file."""
    return {"ops": {"evolution_era": {"config": json.loads(path.read_text())}}}


def era_sensor(folder: Path = ERA_DIR, name: str = "era_config_sensor"):
    """A sensor that adds an era partition and runs it for each new or changed `<era>.json` (its
    configuration: the evolution_era config) in `folder`."""

    @sensor(
        name=name,
        job=evolution_era_job,
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
        description=f"Adds and runs an era for each era configuration (<era>.json) dropped into {folder}.",
    )
    def _sensor(context: SensorEvaluationContext):
        seen = json.loads(context.cursor) if context.cursor else {}
        paths = era_files(folder)
        files = {era: hashlib.sha256(path.read_bytes()).hexdigest()[:16] for era, path in paths.items()}
        changed = [era for era, digest in files.items() if seen.get(era) != digest]
        if not changed:
            return SkipReason(f"No new or changed era configuration in {folder}")
        existing = set(context.instance.get_dynamic_partitions(era_partitions.name))
        requests = [
            RunRequest(run_key=f"{era}:{files[era]}", partition_key=era, run_config=era_run_config(paths[era]))
            for era in changed
        ]
        return SensorResult(
            run_requests=requests,
            cursor=json.dumps(files),
            dynamic_partitions_requests=[
                era_partitions.build_add_request([era for era in changed if era not in existing])
            ],
        )

    return _sensor


era_config_sensor = era_sensor()
