"""The roster: the models a team evaluates, declared as data. One YAML (or JSON) file per model in
the roster folder (default `data/roster/`, or EVAL_ROSTER_DIR, or the `roster` resource's
`directory`); each entry's name is a key of the model dimension of the evaluation partitions.

    name: smollm2-135m-instruct-bfloat16         # default: the file's stem
    model: local/smollm2-135m-instruct           # default: the evaluation_model resource's model
    dtype: bfloat16                              # and device, device_map, batch_size, max_new_tokens,
                                                 # served_tokenizer, api_base (a served model's server)
    benchmarks: [arc_easy, mmlu]                 # default: every declared benchmark (or the protocol's)
    solvers: [harness]                           # default: each benchmark's own
    protocol: open_llm_leaderboard_v1            # optional: its solver and shots on its benchmarks
    baseline: smollm2-135m-instruct-float32      # optional: the entry it is compared with
    previous: step-1000                          # optional: its predecessor (set for checkpoints)
    apply_chat_template: true                    # the harness's prompts through the chat template,
    fewshot_as_multiturn: true                   # few-shot examples as turns (default: false)
    reasoning_end: "</think>"                    # generated text up to this marker is not scored

A checkpoint directory (one with a config.json) dropped into the checkpoints folder becomes an entry
named after it (`new_checkpoint_entries`), its other fields those of `checkpoints.yaml` there.

An evaluation made elsewhere joins the roster from the imports folder (default `data/imports/`, or
EVAL_IMPORTS_DIR, or the `roster` resource's `imports_dir`), one YAML (or JSON) file per import:

    source: runs/smollm2                         # an lm-evaluation-harness --output_path folder
                                                 # (relative to this file)
    benchmarks: [arc_easy]                       # default: every declared benchmark it holds
    baseline: smollm2-135m-instruct-float32      # optional: the entry it is compared with

Its entry's evaluations are read from the source (eval_platform/benchmarks/imports.py), never computed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from eval_platform.benchmarks.declarations import Benchmark, EvaluationSettings
from eval_platform.benchmarks.protocols import Protocol
from eval_platform.common.fields import optional_fields
from eval_platform.common.models import ModelSettings

ROSTER_SUFFIXES = (".yaml", ".yml", ".json")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
CHECKPOINT_SETTINGS = "checkpoints.yaml"
# The evaluation settings an entry may set: how its model is asked (its chat template, solvers) and
# sampled (a model's recommended temperature, top-p, top-k and min-p, and the answers a request).
EVALUATION_FIELDS = (
    "solvers",
    "apply_chat_template",
    "fewshot_as_multiturn",
    "reasoning_end",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repeats",
)
# The model settings an entry may set: ModelSettings' fields (each optional: unset takes the
# evaluation_model resource's), but not where converted weights are kept nor torch's threads, the machine's.
ENTRY_SETTINGS = create_model(
    "EntrySettings",
    __config__=ConfigDict(extra="forbid", frozen=True),
    **optional_fields(ModelSettings, exclude=("model_cache_dir", "torch_threads")),
    **optional_fields(EvaluationSettings, include=EVALUATION_FIELDS),
)


class RosterError(ValueError):
    """A roster file or entry that cannot be used; the message names the file and the field."""


class RosterEntry(ENTRY_SETTINGS):  # type: ignore[misc, valid-type]
    """One model of the roster: what it is, how it runs, what it is evaluated on and compared with."""

    name: str
    api_base: str | None = None
    benchmarks: tuple[str, ...] | None = None
    protocol: str | None = None
    baseline: str | None = None
    previous: str | None = None
    # An imported evaluation's file (the imports folder's entries): read, never computed
    source: str | None = None
    # Tags on each run of this entry: a team's run queue limits by them (`eval/gpu: a100`), and on
    # Kubernetes `dagster-k8s/config` requests the run's GPUs (deploy/kubernetes/values.yaml)
    run_tags: dict[str, str] | None = None

    def evaluated_on(self, benchmarks: Iterable[str], protocols: Mapping[str, Protocol]) -> tuple[str, ...]:
        """Of `benchmarks`, those this entry is evaluated on: its list, within its protocol's."""
        candidates = [t.benchmark for t in protocols[self.protocol].tasks] if self.protocol else list(benchmarks)
        return tuple(b for b in candidates if self.benchmarks is None or b in self.benchmarks)

    def evaluates(self, benchmark: str, protocols: Mapping[str, Protocol]) -> bool:
        return benchmark in self.evaluated_on([benchmark], protocols)

    def model_settings(self) -> dict[str, Any]:
        """The model settings this entry sets (those it leaves unset come from the resources)."""
        return {
            field: getattr(self, field)
            for field in ENTRY_SETTINGS.model_fields
            if field not in EVALUATION_FIELDS and getattr(self, field) is not None
        }

    def evaluation_settings(self) -> dict[str, Any]:
        """The evaluation settings this entry sets."""
        return {field: getattr(self, field) for field in EVALUATION_FIELDS if getattr(self, field) is not None}

    def references(self) -> dict[str, str]:
        """The entries this one is compared with, by relation (baseline, previous)."""
        return {
            relation: name
            for relation, name in (("baseline", self.baseline), ("previous", self.previous))
            if name and name != self.name
        }


def parse_entry(
    path: Path, benchmarks: Mapping[str, Benchmark] | None = None, protocols: Mapping[str, Protocol] | None = None
) -> RosterEntry:
    """A roster file's entry, or a RosterError naming the file and what is wrong (a benchmark or
    protocol it names that is not among those given)."""
    try:
        entry = RosterEntry(**{"name": path.stem, **_read_declaration(path)})
    except ValidationError as error:
        raise RosterError(f"{path}: {_problems(error)}") from error
    if entry.source is not None:
        raise RosterError(f"{path}: source: an import is declared in the imports folder (EVAL_IMPORTS_DIR)")
    return _checked(path, entry, benchmarks, protocols)


class ImportDeclaration(BaseModel):
    """One import of the imports folder: its file, and how the roster treats its model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The imported model's name in the roster (default: the file's stem).")
    source: str = Field(
        description="An lm-evaluation-harness --output_path folder or an inspect_ai log (.eval), relative to this file."
    )
    benchmarks: tuple[str, ...] | None = Field(
        default=None, description="Only these of the declared benchmarks it holds (default: every one)."
    )
    baseline: str | None = Field(default=None, description="The roster entry it is compared with.")
    previous: str | None = Field(default=None, description="Its predecessor in the roster.")
    run_tags: dict[str, str] | None = Field(default=None, description="Tags on each run of this import.")


def _read_declaration(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise RosterError(f"{path}: not readable as {path.suffix[1:].upper()}: {error}") from error
    if not isinstance(data, dict):
        raise RosterError(f"{path}: a roster entry is a mapping of fields (name, model, dtype, ...)")
    return data


def _problems(error: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())


def parse_import(path: Path, benchmarks: Mapping[str, Benchmark] | None = None) -> RosterEntry:
    """An import file's roster entry: its source resolved against the file's folder, evaluated on
    the declared benchmarks the source holds tasks of (of those it names, where it names them);
    where the source cannot be read yet, on those it names, or on none."""
    from eval_platform.benchmarks.imports import ImportRefused
    from eval_platform.benchmarks.inspect_imports import held_benchmarks

    try:
        declared = ImportDeclaration(**{"name": path.stem, **_read_declaration(path)})
    except ValidationError as error:
        raise RosterError(f"{path}: {_problems(error)}") from error
    source = (path.parent / declared.source).resolve()
    entry = RosterEntry(
        **declared.model_dump(exclude_none=True, exclude={"benchmarks", "source"}),
        source=str(source),
        benchmarks=declared.benchmarks or (),
    )
    _checked(path, entry, benchmarks, None)  # the benchmarks it names, before any is left out
    if benchmarks is None or declared.benchmarks == ():
        return entry
    try:
        held = held_benchmarks(source, benchmarks)
    except (ImportRefused, OSError):  # e.g. the tool still writing it: evaluated once it is whole
        return entry
    return entry.model_copy(
        update={"benchmarks": tuple(b for b in held if declared.benchmarks is None or b in declared.benchmarks)}
    )


def _checked(
    path: Path, entry: RosterEntry, benchmarks: Mapping[str, Benchmark] | None, protocols: Mapping[str, Protocol] | None
) -> RosterEntry:
    if not NAME.match(entry.name):
        raise RosterError(f"{path}: name {entry.name!r} must be letters, digits, '.', '_' or '-'")
    unknown = [b for b in entry.benchmarks or () if benchmarks is not None and b not in benchmarks]
    if unknown:
        raise RosterError(f"{path}: benchmarks: unknown {unknown}; known: {sorted(benchmarks or ())}")
    if entry.protocol and protocols is not None and entry.protocol not in protocols:
        raise RosterError(f"{path}: protocol: unknown {entry.protocol!r}; known: {sorted(protocols)}")
    return entry


def load_roster(
    folder: Path | str,
    benchmarks: Mapping[str, Benchmark] | None = None,
    protocols: Mapping[str, Protocol] | None = None,
    imports: Path | str | None = None,
) -> dict[str, RosterEntry]:
    """Every entry of the roster folder, and of the imports folder where it exists, by name; a
    RosterError names a bad file, a name used twice, an unknown benchmark or protocol, or a baseline
    (or predecessor) that is not in the roster."""
    folder = Path(folder)
    if not folder.is_dir():
        raise RosterError(
            f"The roster folder {folder} does not exist (set EVAL_ROSTER_DIR or the roster resource's directory)"
        )
    declared = [(path, parse_entry(path, benchmarks, protocols)) for path in _declarations(folder)]
    if imports is not None and Path(imports).is_dir():
        declared += [(path, parse_import(path, benchmarks)) for path in _declarations(Path(imports))]
    roster: dict[str, RosterEntry] = {}
    files: dict[str, Path] = {}
    for path, entry in declared:
        if entry.name in roster:
            raise RosterError(f"{path}: the name {entry.name!r} is already used by {files[entry.name]}")
        roster[entry.name], files[entry.name] = entry, path
    for name, entry in roster.items():
        for relation, reference in entry.references().items():
            if reference not in roster:
                raise RosterError(f"{files[name]}: {relation}: {reference!r} is not in the roster {folder}")
    return roster


def _declarations(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in ROSTER_SUFFIXES)


def evaluation_order(roster: dict[str, RosterEntry]) -> list[str]:
    """The roster's names, each after the entries it is compared with (so that its comparison finds
    their scores), otherwise in the roster's order."""
    ordered: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in ordered or name not in roster:
            return
        if name in path:
            raise RosterError(f"The roster's baselines and predecessors form a cycle: {' -> '.join(path + (name,))}")
        for reference in roster[name].references().values():
            visit(reference, path + (name,))
        ordered.append(name)

    for name in roster:
        visit(name, ())
    return ordered


def write_entry(folder: Path | str, entry: RosterEntry) -> Path:
    """Add an entry to the roster folder as `<name>.yaml` (fields left at their default omitted)."""
    import yaml

    path = Path(folder) / f"{entry.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(entry.model_dump_json(exclude_none=True))
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def missing_partitions(names: Iterable[str], existing: Collection[str]) -> list[str]:
    """The names (roster entries, benchmarks) that are not yet keys of their dimension."""
    return [name for name in names if name not in set(existing)]


def _natural(name: str) -> list:
    """step-900 before step-1000."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def checkpoint_dirs(folder: Path) -> list[Path]:
    """The checkpoint directories in `folder` (those holding a config.json), in natural name order."""
    return sorted((p for p in Path(folder).iterdir() if (p / "config.json").is_file()), key=lambda p: _natural(p.name))


def new_checkpoint_entries(folder: Path, roster: Mapping[str, RosterEntry]) -> list[RosterEntry]:
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
            fields: dict[str, Any] = {**settings, "name": name, "model": f"local/{directory.resolve()}"}
            if previous:
                fields["previous"] = previous
            entries.append(RosterEntry(**fields))
        previous = name
    return entries
