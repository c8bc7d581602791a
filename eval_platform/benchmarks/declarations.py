"""Benchmarks declared as data: one YAML file per benchmark in the benchmarks folder.

Every benchmark is an lm-evaluation-harness task (or group) and the settings it is evaluated
with (`EvaluationSettings`). It comes in one of two flavours:

- a harness task on its own data: the task's YAML (the harness's own, or an `include_path`
  folder's) reads its data from the hub or from local `data_files`;
- a dataset: rows in the seed's or the Hugging Face layout (`dataset`), turned by a `parser` into
  the task's documents and into chat prompts (`chat`), with a few-shot pool (`fewshot`).

Each is asked by its `solvers` (the harness's own requests, or the chat-format `letter`,
`choices` and `generate`) and its `headline` names the number the leaderboard shows.

`EvaluationSettings` is declared once: its fields are a declaration's, the evaluation asset's
launchpad config (each one optional, the declaration's where unset), a roster entry's (some of
them) and what the solvers take.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eval_engine import DEFAULT_SEED

HARNESS_VERSION = "0.4.13"
FEWSHOT_SEED = 1234  # the harness's default fewshot_random_seed (simple_evaluate's)
# A task's config keys that say where its data comes from, not what is measured on it.
DATA_LOCATION_KEYS = frozenset({"dataset_path", "dataset_name", "dataset_kwargs"})


class DeclarationError(ValueError):
    """A declaration that cannot be used; the message names the file and the field."""


class EvaluationSettings(BaseModel):
    """How a benchmark is evaluated: its harness task, data and shots, the chat template, and the
    solvers that ask the model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    solvers: tuple[str, ...] = Field(
        default=("harness",),
        description="The ways of asking the model: harness (the task's own requests and metrics), letter, "
        "choices, generate (the chat format), or a solver registered by module:Class.",
    )
    task: str = Field(default="", description="The lm-evaluation-harness task or group (a row's fields fill {field}).")
    include_path: tuple[str, ...] = Field(default=(), description="Folders of custom task YAML files.")
    data_files: dict[str, dict[str, str]] = Field(
        default={}, description="Local data per task: {task: {split: file}} (JSON or JSONL)."
    )
    overrides: dict[str, dict[str, Any]] = Field(
        default={}, description="Task config keys per task: {task: {key: value}}."
    )
    num_fewshot: int | None = Field(default=None, description="Shots for every task; None: each task's own.")
    limit: int | None = Field(default=None, description="Only each task's first N documents.")
    apply_chat_template: bool = Field(default=False, description="Render the harness's prompts with the chat template.")
    fewshot_as_multiturn: bool = Field(default=False, description="Few-shot examples as chat turns.")
    system_instruction: str | None = Field(default=None, description="A system prompt for every harness request.")
    bootstrap_iters: int = Field(default=1000, ge=0, description="Bootstrap iterations for standard errors (0: none).")
    max_gen_toks: int | None = Field(
        default=None,
        description="Generation budget of the harness's requests and of the generate solver's answers; None: "
        "the task's own (the generate solver's: the model's max_new_tokens).",
    )
    reasoning_end: str | None = Field(
        default=None,
        min_length=1,
        description="Generated text up to the last such marker (e.g. </think>) is not scored.",
    )
    temperature: float | None = Field(
        default=None,
        ge=0,
        description="Sample generations at this temperature (0: greedy); None: each task's own.",
    )
    top_p: float | None = Field(default=None, gt=0, le=1, description="Sampling: nucleus (top-p) mass; None: off.")
    top_k: int | None = Field(default=None, ge=0, description="Sampling: the k likeliest tokens only; None or 0: off.")
    min_p: float | None = Field(default=None, ge=0, le=1, description="Sampling: min-p threshold; None: off.")
    repeats: int | None = Field(
        default=None, ge=1, description="Answers per generation request (k samples); None: each task's own."
    )
    seed: int | None = Field(
        default=None, description=f"The samples' seed (the same seed, the same samples); None: {DEFAULT_SEED}."
    )
    confirm_run_unsafe_code: bool = Field(
        default=False,
        description="Run tasks whose metric executes the model's code (humaneval, mbpp), in the sandbox; they also "
        "need HF_ALLOW_CODE_EVAL=1, as the harness does.",
    )

    @property
    def sets_sampling(self) -> bool:
        """Whether it sets any sampling setting or repeats (else each task samples as it says)."""
        return any(getattr(self, name) is not None for name in (*SAMPLING_FIELDS, "repeats"))

    def sampling_overrides(self, config: Mapping[str, Any]) -> dict[str, object]:
        """A generation task's config keys (`config`: its own) that these sampling settings change:
        its `repeats`, and its `generation_kwargs` sampled (`do_sample`, temperature, top-p, top-k,
        min-p over the task's own) or, at temperature 0, greedy."""
        overrides: dict[str, object] = {}
        if config.get("output_type") != "generate_until":
            return overrides
        if self.repeats is not None:
            for pipeline in config.get("filter_list") or []:
                taken = [
                    step.get("k", 0) for step in pipeline.get("filter", []) if step.get("function") == "take_first_k"
                ]
                if taken and max(taken) > self.repeats:
                    raise DeclarationError(
                        f"{config.get('task')}: its filter {pipeline.get('name')} takes the first {max(taken)} answers "
                        f"of each document; repeats {self.repeats} gives fewer (set repeats to {max(taken)} or more)"
                    )
            overrides["repeats"] = self.repeats
        chosen = {name: getattr(self, name) for name in SAMPLING_FIELDS if getattr(self, name) is not None}
        if chosen:
            kwargs = {**(config.get("generation_kwargs") or {}), **chosen}
            kwargs["do_sample"] = kwargs.get("temperature", 1.0) > 0
            overrides["generation_kwargs"] = kwargs
        return overrides

    def describe(self) -> dict[str, object]:
        """The settings that make a result what it is, for the warehouse and the run's metadata
        (sampling settings where set: a greedy run's are as they were before there were any)."""
        unset = {name for name in (*SAMPLING_FIELDS, "repeats", "seed") if getattr(self, name) is None}
        unset |= set() if self.confirm_run_unsafe_code else {"confirm_run_unsafe_code"}
        return {
            **self.model_dump(mode="json", exclude={"solvers", "bootstrap_iters", *unset}),
            "harness_version": HARNESS_VERSION,
        }


SAMPLING_FIELDS = ("temperature", "top_p", "top_k", "min_p")


def describe_sampling(settings: Mapping[str, object]) -> str | None:
    """The sampling a run's settings ask, in words (`4 samples at temperature 0.6, top-p 0.95`),
    None where they ask none (each task's own)."""
    if all(settings.get(name) is None for name in (*SAMPLING_FIELDS, "repeats", "seed")):
        return None
    repeats, temperature = settings.get("repeats"), settings.get("temperature")
    words = f"{repeats} sample{'s' if repeats != 1 else ''}" if repeats is not None else "the task's samples"
    if temperature == 0:
        words += " greedy"
    elif temperature is not None:
        words += f" at temperature {temperature:g}"
    labels = {"top_p": "top-p", "top_k": "top-k", "min_p": "min-p", "seed": "seed"}
    words += "".join(
        f", {label} {settings[name]:g}" for name, label in labels.items() if settings.get(name) is not None
    )
    return words


def settings_key(settings: Mapping[str, Any]) -> str:
    """What a run measured beyond its task and data (a settings' `describe()`): its shots, a limit
    on its documents, a generation budget other than its task's, its system instruction and any
    task config overridden beyond where its data comes from, e.g. `default shots`, `0-shot`,
    `5-shot, overrides 1a2b3c4d`, `0-shot, first 5 documents, 96 new tokens`. A benchmark's results
    under one key are replaced by the next run with that key, and kept beside those of other keys.
    The chat template is not part of it: it is how the roster entry runs its model (as its dtype is)."""

    def digest(value: object) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:8]

    shots = settings.get("num_fewshot")
    parts = [f"{shots}-shot" if shots is not None else "default shots"]
    if settings.get("limit") is not None:
        parts.append(f"first {settings['limit']} documents")
    if settings.get("max_gen_toks") is not None:
        parts.append(f"{settings['max_gen_toks']} new tokens")
    if sampling := describe_sampling(settings):
        parts.append(sampling)
    if settings.get("system_instruction"):
        parts.append(f"system instruction {digest(settings['system_instruction'])}")
    overridden = {
        task: {key: value for key, value in config.items() if key not in DATA_LOCATION_KEYS}
        for task, config in (settings.get("overrides") or {}).items()
    }
    if any(overridden.values()):
        parts.append(f"overrides {digest({task: config for task, config in overridden.items() if config})}")
    return ", ".join(parts)


class DataSource(BaseModel):
    """Where a dataset's rows come from: a local file (relative to the declaration) or a hub id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str | None = Field(default=None, description="A local JSONL, JSON, Parquet or CSV file.")
    hub: str | None = Field(default=None, description="The Hugging Face dataset id (needs hub access).")
    hub_name: str | None = Field(default=None, description="The dataset's configuration, for a hub id.")
    split: str = Field(default="test", description="The split, for a hub id.")

    def describe(self) -> str:
        return self.file or f"{self.hub} ({self.hub_name or 'default'}, {self.split})"


class ChatFormat(BaseModel):
    """How the chat solvers ask: the system prompt, the answer labels and the answer filters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    system_prompt: str = Field(default="", description="The system turn of every chat prompt.")
    labels: Literal["letters", "numbers"] = Field(default="letters", description="A, B, C... or 1, 2, 3...")
    choice_count: int | None = Field(default=None, description="The number of choices a row must have (None: 2 to 26).")
    answer_filters: tuple[str, ...] = Field(
        default=(), description="A generated answer's filters (generate), by registered name."
    )


class Headline(BaseModel):
    """The number the leaderboard shows for the benchmark, unless a protocol names another."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    metric: str | None = Field(default=None, description="None: the first metric the task reports.")
    filter: str = "none"
    solver: str = "harness"
    num_fewshot: int | None = Field(default=None, description="None: the declaration's shots.")


class Benchmark(EvaluationSettings):
    """One benchmark: a declaration file (its name is the file's stem)."""

    name: str
    title: str = ""
    task_folder: str | None = Field(
        default=None, description="Index only this folder of the harness's tasks (a dataset's task: faster)."
    )
    dataset: DataSource | None = Field(default=None, description="A dataset's evaluation split, parsed by `parser`.")
    parser: str | None = Field(default=None, description="The parser of the dataset's rows, by registered name.")
    fewshot: DataSource | None = Field(default=None, description="A dataset's few-shot split (the harness's pool).")
    chat: ChatFormat | None = Field(default=None, description="How the chat solvers ask (a dataset only).")
    headline: Headline = Headline()

    @property
    def is_dataset(self) -> bool:
        return self.dataset is not None

    def evaluation_settings(self) -> EvaluationSettings:
        return EvaluationSettings(**{name: getattr(self, name) for name in EvaluationSettings.model_fields})


def merged(base: EvaluationSettings, *layers: Mapping[str, object]) -> EvaluationSettings:
    """`base` with each layer's set (not None) fields over it, later layers winning."""
    values = base.model_dump()
    for layer in layers:
        values.update({name: value for name, value in layer.items() if value is not None})
    return EvaluationSettings(**values)


def _relative(folder: Path, value: str) -> str:
    return value if Path(value).is_absolute() or "://" in value else str((folder / value).resolve())


def parse_declaration(path: Path) -> Benchmark:
    """A declaration file as a benchmark, paths in it relative to its folder; a bad file is refused
    naming the file and the field."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise DeclarationError(f"{path}: not readable as YAML: {error}") from error
    if not isinstance(data, dict):
        raise DeclarationError(
            f"{path}: a benchmark declaration is a mapping of fields ({sorted(Benchmark.model_fields)})"
        )
    folder = path.parent
    data = {"name": path.stem, "task": path.stem, **data}
    if isinstance(data.get("include_path"), str):
        data["include_path"] = [data["include_path"]]
    data["include_path"] = [_relative(folder, p) for p in data.get("include_path") or []]
    if isinstance(data.get("data_files"), dict):
        data["data_files"] = {
            task: {split: _relative(folder, file) for split, file in splits.items()}
            if isinstance(splits, dict)
            else splits
            for task, splits in data["data_files"].items()
        }
    for source in ("dataset", "fewshot"):
        if isinstance(data.get(source), dict) and data[source].get("file"):
            data[source] = {**data[source], "file": _relative(folder, data[source]["file"])}
    try:
        benchmark = Benchmark(**data)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise DeclarationError(f"{path}: {problems}") from error
    if benchmark.is_dataset and not benchmark.parser:
        raise DeclarationError(f"{path}: parser: a dataset needs the parser of its rows")
    return benchmark.model_copy(update={"title": benchmark.title or benchmark.task})


def declaration_files(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """The folder's declaration files (`*.yaml`) as they are now: each one's path, size and
    modification time, by which their parsed declarations are cached (every warehouse connection
    asks for them, to check the wide leaderboard's view)."""
    return tuple((str(path), (stat := path.stat()).st_size, stat.st_mtime_ns) for path in sorted(folder.glob("*.yaml")))


@functools.lru_cache(maxsize=32)
def _parsed_benchmarks(files: tuple[tuple[str, int, int], ...]) -> dict[str, Benchmark]:
    return {Path(path).stem: parse_declaration(Path(path)) for path, _, _ in files}


def declared_benchmarks(folder: Path | str) -> dict[str, Benchmark]:
    """Every benchmark declared in the folder (`*.yaml`), by name (parsed again only when its files change)."""
    folder = Path(folder)
    return dict(_parsed_benchmarks(declaration_files(folder))) if folder.is_dir() else {}
