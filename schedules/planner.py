"""What runs after what, declared once. The nightly schedule, the sensors and the main command ask
the planner for their run requests, so the command's demo (eval_platform/cli/demo.py) runs what production runs:
the same jobs, partitions and configs, in the order production's triggers give them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterInstance, DynamicPartitionsDefinition, RunRequest

from eval_platform.benchmarks.protocols import Protocol
from eval_platform.benchmarks.roster import RosterEntry, evaluation_order, missing_partitions
from eval_platform.environment import environment
from eval_platform.evaluation_assets.partitions import (
    benchmark_partitions,
    era_partitions,
    evaluation_key,
    roster_partitions,
)
from eval_platform.evolution.eras import era_files, era_run_config
from eval_platform.jobs import benchmark_inputs_job, blind_evaluation_tally_job, evolution_era_job, model_evaluation_job
from eval_platform.resources import RosterResource


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def add_missing(instance: DagsterInstance, dimension: DynamicPartitionsDefinition, names: Sequence[str]) -> None:
    """Make the names keys of a dynamic dimension where they are not yet."""
    assert dimension.name is not None
    added = missing_partitions(list(names), instance.get_dynamic_partitions(dimension.name))
    if added:
        instance.add_dynamic_partitions(dimension.name, added)


def inputs_run_requests(instance: DagsterInstance, benchmarks: Sequence[str], run_key: str) -> list[RunRequest]:
    """benchmark_inputs runs for each of `benchmarks` (each made a key of the benchmark dimension)."""
    add_missing(instance, benchmark_partitions, benchmarks)
    return [
        RunRequest(run_key=f"{run_key}:{name}", partition_key=name, job_name=benchmark_inputs_job.name)
        for name in benchmarks
    ]


def evaluation_run_requests(
    instance: DagsterInstance,
    roster: Mapping[str, RosterEntry],
    benchmarks: Sequence[str],
    protocols: Mapping[str, Protocol],
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
        for name in evaluation_order(dict(roster))
        if roster[name].evaluates(benchmark, protocols)
    ]


def era_digests(folder: Path) -> dict[str, str]:
    """Each era configuration file of `folder` by era name, as a digest of its content."""
    return {era: digest(path.read_bytes()) for era, path in era_files(folder).items()}


def era_run_requests(folder: Path, seen: Mapping[str, str]) -> list[RunRequest]:
    """An era run for each configuration file of `folder` new or changed since `seen` (digests)."""
    paths, files = era_files(folder), era_digests(folder)
    return [
        RunRequest(
            run_key=f"{era}:{files[era]}",
            partition_key=era,
            job_name=evolution_era_job.name,
            run_config=era_run_config(paths[era]),
        )
        for era in files
        if seen.get(era) != files[era]
    ]


def filled_sheets(blind_dir: Path) -> dict[str, float]:
    """The filled scoring sheets in <blind_dir>/filled, by name, as their modification times."""
    sheets = sorted((blind_dir / "filled").glob("*.xls*"))
    return {path.name: path.stat().st_mtime for path in sheets if not path.name.startswith("~$")}


def tally_run_request(blind_dir: Path, seen: Mapping[str, float]) -> RunRequest | None:
    """A tally of the blind evaluation when a filled sheet is new or changed since `seen`."""
    sheets = filled_sheets(blind_dir)
    changed = sorted(name for name, mtime in sheets.items() if seen.get(name) != mtime)
    if not changed:
        return None
    return RunRequest(
        run_key=digest(json.dumps(sheets, sort_keys=True).encode()),
        job_name=blind_evaluation_tally_job.name,
        run_config={"ops": {"blind_eval_scores": {"config": {"folder": str(blind_dir)}}}},
        tags={"filled_sheets": ",".join(changed)},
    )


@dataclass(frozen=True)
class Planner:
    """The run requests of each trigger, for one Dagster instance and roster."""

    instance: DagsterInstance
    roster: RosterResource
    eras_dir: Path
    blind_dir: Path

    def nightly(self, run_key: str, benchmarks: Sequence[str] | None = None) -> list[RunRequest]:
        """The nightly refresh: each declared benchmark's inputs (or only `benchmarks`')."""
        return inputs_run_requests(self.instance, list(benchmarks or self.roster.benchmarks()), run_key)

    def roster_changed(self, entries: Mapping[str, RosterEntry], run_key: str) -> list[RunRequest]:
        """Entries added or changed: each on every declared benchmark it is evaluated on."""
        roster = self.roster
        return evaluation_run_requests(self.instance, entries, list(roster.benchmarks()), roster.protocols(), run_key)

    def after_success(self, job_name: str, partition: str | None, run_key: str) -> list[RunRequest]:
        """The runs a successful run leads to: a benchmark's refreshed inputs, every roster model
        on that benchmark (roster_evaluation_sensor)."""
        if job_name != benchmark_inputs_job.name or partition is None:
            return []
        roster = self.roster
        return evaluation_run_requests(self.instance, roster.entries(), [partition], roster.protocols(), run_key)

    def eras(self, seen: Mapping[str, str] | None = None) -> list[RunRequest]:
        """An era run for each era configuration new or changed since `seen` (era_config_sensor),
        its partition added."""
        requests = era_run_requests(self.eras_dir, seen or {})
        add_missing(self.instance, era_partitions, [str(request.partition_key) for request in requests])
        return requests

    def tally(self, seen: Mapping[str, float] | None = None) -> list[RunRequest]:
        """A tally when a filled sheet is new or changed (blind_eval_filled_sheet_sensor)."""
        request = tally_run_request(self.blind_dir, seen or {})
        return [request] if request else []

    @classmethod
    def of(
        cls,
        instance: DagsterInstance,
        roster: RosterResource,
        eras_dir: Path | None = None,
        blind_dir: Path | None = None,
    ) -> Planner:
        """The planner of the given folders, else of the configured ones (EVAL_ERAS_DIR, EVAL_BLIND_DIR)."""
        settings = environment()
        return cls(instance, roster, Path(eras_dir or settings.eras_dir), Path(blind_dir or settings.blind_dir))
