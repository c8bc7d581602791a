"""Any lm-evaluation-harness task or group as a benchmark: the harness builds the requests, this
platform's engine answers them, the harness scores them.

The harness (0.4.13) is a library here. Its task registry (`TaskManager`, every YAML under
`lm_eval/tasks` plus any `include_path` folder) builds each task with its own templates, few-shot
samplers and seed, chat template handling (`fewshot_as_multiturn` included), filters,
`process_results` and aggregation (groups included), through its own `evaluate()`. The model it
is handed is `EngineLM` (engine_lm.py): the harness's three-method `LM` protocol over any
`LanguageModel` of this platform (local, served, or an API where the request type allows), with
the shared-prefix cache and continuous batching behind it, and answers already stored for the same
model fingerprint reused instead of computed again.

Local data: `data_files` points a task (or each task of a group) at local files, which become its
`dataset_path: json` with those files as its splits (a split the task names but the files do not
provide is dropped). Every other key of a task's config can be overridden per task (`overrides`).

lm_eval is imported inside functions: importing this module costs nothing, and the registry is
built once per process and `include_path`, the index of the harness's own 14,000 YAML files read
from a cache (`cached_task_index`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import pickle
import random
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval_platform.common.ingestion import Rejection, jsonl_records, not_an_object

HARNESS_VERSION = "0.4.13"
FEWSHOT_SEED = 1234  # the harness's default fewshot_random_seed (simple_evaluate's)
DATA_DIR = Path(__file__).resolve().parents[2] / "data"
NLTK_DATA = DATA_DIR / "nltk_data"  # punkt_tab for IFEval, which NLTK would otherwise download at import
SPLIT_KEYS = ("training_split", "validation_split", "test_split", "fewshot_split")
# where the index of the harness's own tasks is kept between processes (EVAL_HARNESS_INDEX to move it)
INDEX_CACHE = Path(os.environ.get("EVAL_HARNESS_INDEX", Path.home() / ".cache" / "eval_platform" / "harness_index"))
log = logging.getLogger(__name__)


class HarnessTaskError(ValueError):
    """A task that cannot be built or run as configured; the message names the task and what to fix."""


@dataclass(frozen=True)
class HarnessRun:
    """One harness task or group as it is evaluated: its name, where its YAML and data come from,
    and the harness's evaluation settings."""

    task: str
    include_path: tuple[str, ...] = ()
    include_defaults: bool = True  # False: only the include_path folders' tasks (a registry built in no time)
    data_files: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # task -> split -> file
    overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # task -> config keys
    num_fewshot: int | None = None  # None: each task's own
    limit: int | None = None
    apply_chat_template: bool = False
    fewshot_as_multiturn: bool = False
    system_instruction: str | None = None
    bootstrap_iters: int = 1000
    fewshot_seed: int = FEWSHOT_SEED

    def registry(self) -> Any:
        """The harness's task registry this run's task is looked up in."""
        return task_manager(tuple(self.include_path), self.include_defaults)

    def describe(self) -> dict[str, Any]:
        """The settings that make a result what it is, for the warehouse and the run's metadata."""
        return {
            "task": self.task,
            "include_path": list(self.include_path),
            "data_files": dict(self.data_files),
            "overrides": dict(self.overrides),
            "num_fewshot": self.num_fewshot,
            "limit": self.limit,
            "apply_chat_template": self.apply_chat_template,
            "fewshot_as_multiturn": self.fewshot_as_multiturn,
            "system_instruction": self.system_instruction,
            "fewshot_seed": self.fewshot_seed,
            "harness_version": HARNESS_VERSION,
        }

    def settings_key(self) -> str:
        return settings_key(self.describe())


# A task's config keys that say where its data comes from, not what is measured on it.
DATA_LOCATION_KEYS = frozenset({"dataset_path", "dataset_name", "dataset_kwargs"})


def settings_key(settings: Mapping[str, Any]) -> str:
    """What a harness run measured, beyond its task and data (a run's `describe()`): its shots,
    system instruction and any task config overridden beyond where its data comes from, e.g.
    `default shots`, `0-shot`, `5-shot, overrides 1a2b3c4d`. A benchmark's results under one key
    are replaced by the next run with that key, and kept beside those of other keys. The chat
    format is not part of it: it is how the roster entry runs its model (as its dtype is), so an
    instruct model with its chat template is compared with a base model's plain prompts."""

    def digest(value: Any) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:8]

    shots = settings.get("num_fewshot")
    parts = [f"{shots}-shot" if shots is not None else "default shots"]
    if settings.get("system_instruction"):
        parts.append(f"system instruction {digest(settings['system_instruction'])}")
    overridden = {
        task: {key: value for key, value in config.items() if key not in DATA_LOCATION_KEYS}
        for task, config in (settings.get("overrides") or {}).items()
    }
    if any(overridden.values()):
        parts.append(f"overrides {digest({task: config for task, config in overridden.items() if config})}")
    return ", ".join(parts)


def prepare_environment() -> None:
    """What the harness's tasks need before they are imported: NLTK's punkt_tab from data/ (IFEval
    downloads it at import otherwise), offline datasets, and a seeded langdetect (IFEval's
    language checks are otherwise random between runs). NLTK itself is not imported here (seconds,
    in every process that builds a task): it reads NLTK_DATA when IFEval imports it, and only an
    NLTK imported before is told the path."""
    if NLTK_DATA.is_dir():
        paths = os.environ.get("NLTK_DATA", "")
        if str(NLTK_DATA) not in paths.split(os.pathsep):
            os.environ["NLTK_DATA"] = os.pathsep.join(p for p in (str(NLTK_DATA), paths) if p)
        nltk = sys.modules.get("nltk")
        if nltk is not None and str(NLTK_DATA) not in nltk.data.path:
            nltk.data.path.insert(0, str(NLTK_DATA))
    try:
        from langdetect import DetectorFactory
    except ImportError:
        return
    DetectorFactory.seed = 0


def write_whole(path: Path, data: bytes) -> None:
    """The file written whole or not at all, whatever other processes write it at the same time: a
    reader finds the old file, no file, or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_bytes(data)
    partial.replace(path)


def cached_task_index(folder: Path) -> dict[str, Any]:
    """The harness's index of a folder of task YAML files (`TaskIndex.build`; its own tasks folder
    is about 14,000 files, over 5 s to parse), built once per state of the folder's files (their
    paths, sizes and modification times, the templates they include among them, and the
    harness's version) and then read from a pickle in INDEX_CACHE (under 1 s for its own tasks)."""
    import lm_eval
    from lm_eval.tasks._index import TaskIndex

    state = [lm_eval.__version__, str(folder.resolve())]
    for root, folders, files in os.walk(folder):
        folders[:] = sorted(name for name in folders if name != "__pycache__")
        state += [
            f"{root}/{name}:{stat.st_size}:{stat.st_mtime_ns}"
            for name in sorted(files)
            for stat in [os.stat(os.path.join(root, name))]
        ]
    key = hashlib.sha256("\n".join(state).encode()).hexdigest()[:24]
    cached = INDEX_CACHE / f"{key}.pickle"
    try:
        return pickle.loads(cached.read_bytes())
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        pass  # not built yet for this state of the files, or unreadable: built again
    index = TaskIndex.build([folder])
    try:
        write_whole(cached, pickle.dumps(index, protocol=pickle.HIGHEST_PROTOCOL))
    except OSError as error:  # a cache that cannot be written costs time, never the evaluation
        log.warning("the index of %s is not cached: %s", folder, error)
    return index


def _index_with_own_tasks_cached(paths: Sequence[Path], *, resolve_includes: bool = True) -> dict[str, Any]:
    """`TaskIndex.build`, with the harness's own tasks folder read through `cached_task_index`;
    later paths override earlier ones, as in the harness."""
    import lm_eval
    from lm_eval.tasks._index import TaskIndex

    own = Path(lm_eval.__file__).parent / "tasks"
    paths = [Path(path) for path in paths]
    cached = paths[:1] == [own] and resolve_includes
    index = dict(cached_task_index(own)) if cached else {}
    for name, entry in TaskIndex.build(paths[1:] if cached else paths, resolve_includes=resolve_includes).items():
        if name in index:
            log.warning(
                "Task '%s' from %s overrides existing task from %s", name, entry.yaml_path, index[name].yaml_path
            )
        index[name] = entry
    return index


def _versions_only(storage: dict[str, Any]) -> None:
    """The harness's environment report (`add_env_info`) without torch's `collect_env` report."""
    from importlib.metadata import version

    from lm_eval.loggers.utils import get_commit_from_path

    storage.update(
        {
            "pretty_env_info": "not collected: the platform records where answers were computed (harness_runs)",
            "transformers_version": version("transformers"),
            "lm_eval_version": version("lm_eval"),
            "upper_git_hash": get_commit_from_path(Path(os.getcwd(), "..")),
        }
    )


def adapt_harness() -> None:
    """Two of the harness's steps that cost seconds per process or per evaluation, done the
    platform's way (the same results): its registry reads the index of its own tasks from a cache
    (`cached_task_index`) instead of parsing 14,000 YAML files in every process, and
    `simple_evaluate` reports its environment without torch's `collect_env`, which runs `pip list`
    and a dozen other commands in subprocesses (half a second to a second per evaluation) for a
    report no result here keeps (`harness_runs` records where each answer was computed)."""
    import lm_eval.evaluator
    import lm_eval.tasks.manager
    from lm_eval.tasks._index import TaskIndex

    class IndexWithOwnTasksCached(TaskIndex):
        build = staticmethod(_index_with_own_tasks_cached)

    if lm_eval.tasks.manager.TaskIndex is TaskIndex:
        lm_eval.tasks.manager.TaskIndex = IndexWithOwnTasksCached
    lm_eval.evaluator.add_env_info = _versions_only


@functools.lru_cache(maxsize=16)
def task_manager(include_path: tuple[str, ...] = (), include_defaults: bool = True) -> Any:
    """The harness's registry (its own tasks, unless `include_defaults` is false, and any
    `include_path` folders), built once per process and registry: the index of the harness's own
    tasks (about 14,000 YAML files) is read from a cache, a folder of them is indexed in no time."""
    prepare_environment()
    adapt_harness()
    from lm_eval.tasks import TaskManager

    missing = [path for path in include_path if not Path(path).is_dir()]
    if missing:
        raise HarnessTaskError(f"include_path {missing[0]} is not a folder of task YAML files")
    return TaskManager(include_path=list(include_path) or None, include_defaults=include_defaults)


def check_json_records(path: Path, task: str) -> None:
    """A local data file as the harness's JSON loader reads it: JSON lines of one object each or,
    in a .json file, one array of objects. Anything else is refused naming the file and its first
    bad line (the loader itself names neither), read as the platform's own ingestion reads it."""
    problems: list[Rejection] = []
    for record, line, text in jsonl_records(path, problems):
        if problem := not_an_object(record):
            problems.append(Rejection(line, text, problem))
        if problems:
            break
    if problems and path.suffix == ".json":
        try:
            whole = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            whole = None
        if isinstance(whole, list) and not any(map(not_an_object, whole)):
            return
    if problems:
        raise HarnessTaskError(f"{task}: data file {path}, line {problems[0].line}: {problems[0].reason}")


def local_data(files: Mapping[str, str], base: Mapping[str, Any]) -> dict[str, Any]:
    """A task's overrides reading `files` (split -> local JSON/JSONL file, checked first): the
    task's splits that the files do not provide are dropped, so its few-shot examples come from its
    YAML or a given split only."""
    missing = [path for path in files.values() if not Path(path).is_file()]
    if missing:
        raise HarnessTaskError(f"{base.get('task')}: data file {missing[0]} does not exist")
    for path in files.values():
        check_json_records(Path(path), base.get("task"))
    overrides: dict[str, Any] = {
        "dataset_path": "json",
        "dataset_name": None,
        "dataset_kwargs": {"data_files": {split: str(path) for split, path in files.items()}},
    }
    for key in SPLIT_KEYS:
        if base.get(key) and base[key] not in files:
            overrides[key] = None
    if (base.get("test_split") or base.get("validation_split")) not in files:
        raise HarnessTaskError(
            f"{base.get('task')}: data_files give splits {sorted(files)}, but the task evaluates "
            f"the split {base.get('test_split') or base.get('validation_split')!r}"
        )
    return overrides


def _member_name(member: str | Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    if isinstance(member, str):
        return member, {}
    name = member.get("task") or member.get("group")
    return name, {k: v for k, v in member.items() if k not in ("task", "group")}


def registered_config(name: str, include_path: tuple[str, ...] = (), include_defaults: bool = True) -> dict[str, Any]:
    """A task's config as the registry holds it (its YAML, includes resolved), before any override."""
    manager = task_manager(include_path, include_defaults)
    entry = manager.task_index.get(name)
    if entry is None:
        raise HarnessTaskError(f"{name!r} is not a task, group or tag of lm-evaluation-harness {HARNESS_VERSION}")
    return manager._factory._load_full_config(entry, None)


def build_task_dict(run: HarnessRun) -> dict[str, Any]:
    """The harness's task dict (`tasks`, `groups`, `group_map`) for the run's task or group."""
    return run.registry().load(build_tasks(run))


def build_tasks(run: HarnessRun) -> list[Any]:
    """The run's task or group as the harness's objects (a tag: its tasks), each leaf task's config
    merged with its data files and overrides (over the registered YAML, and over what its group
    sets for it)."""
    manager = run.registry()
    index = manager.task_index
    factory = manager._factory  # the registry's own builder: overrides merge onto the registered YAML
    from lm_eval.tasks._factory import GROUP_FIELD_NAMES
    from lm_eval.tasks._index import Kind

    used: set[str] = set()

    def build(name: str, inherited: Mapping[str, Any]) -> Any:
        entry = index.get(name)
        if entry is None:
            raise HarnessTaskError(
                f"{name!r} is not a task, group or tag of lm-evaluation-harness {HARNESS_VERSION}"
                + (f" or of include_path {list(run.include_path)}" if run.include_path else "")
            )
        if entry.kind == Kind.GROUP:
            raw = factory._load_full_config(entry, None)
            group = factory._build_group(name, {**raw, "task": []}, None, index)
            defaults = {**inherited, **{k: v for k, v in raw.items() if k not in GROUP_FIELD_NAMES}}
            for member in raw.get("task") or []:
                member_name, member_overrides = _member_name(member)
                child = build(member_name, {**defaults, **member_overrides})
                for each in child if isinstance(child, list) else [child]:
                    group.add(each)
            return group
        if entry.kind == Kind.TAG:  # a tag is shorthand for its tasks, not a group
            return [build(member, inherited) for member in sorted(entry.tags)]
        used.add(name)
        overrides = {**inherited, **run.overrides.get(name, {})}
        if name in run.data_files:
            base = {**factory._load_full_config(entry, None), **overrides}
            overrides.update(local_data(run.data_files[name], base))
        return factory.build(entry, overrides={"task": name, **overrides}, registry=index)

    try:
        built = build(run.task, {})
    except HarnessTaskError:
        raise
    except Exception as error:  # the harness's own error, e.g. a dataset it cannot load offline
        hint = (
            " (offline: point it at local files with data_files, {task: {split: file}})"
            if "Hub" in str(error) or "offline" in str(error).lower()
            else ""
        )
        raise HarnessTaskError(
            f"{run.task}: the harness could not build it: {type(error).__name__}: {error}{hint}"
        ) from error
    unknown = sorted((set(run.data_files) | set(run.overrides)) - used)
    if unknown:
        raise HarnessTaskError(f"{run.task}: data_files or overrides name {unknown}, which are not among its tasks")
    return built if isinstance(built, list) else [built]


@dataclass
class HarnessOutcome:
    """What one evaluation produced: the harness's results (tasks and groups), its per-document
    samples, every request's answer, and the seconds spent in the engine alone."""

    results: dict[str, Any]
    samples: dict[str, list[dict[str, Any]]]
    answers: dict[str, Any]
    model_seconds: float


def evaluate_run(
    run: HarnessRun,
    model: Any,
    batch_size: int = 8,
    stored: Mapping[str, Any] | None = None,
    reasoning_end: str | None = None,
) -> HarnessOutcome:
    """The harness's own `simple_evaluate` on the run's tasks, answered by `model` through EngineLM:
    its num_fewshot rule, few-shot seed and global seeds, so results equal a harness run on its own
    (IFEval's checkers draw any argument a row leaves out from Python's global generator, whose state
    the harness's own steps advance). The process's global generators are restored afterwards;
    `fewshot_as_multiturn` is the run's (evaluate()'s default is False, simple_evaluate()'s True)."""
    tasks = build_tasks(run)
    from lm_eval import simple_evaluate

    from eval_platform.benchmarks.engine_lm import EngineLM

    lm = EngineLM(model, batch_size, stored, reasoning_end)
    with preserved_global_generators():
        results = simple_evaluate(
            model=lm,
            tasks=tasks,
            task_manager=run.registry(),
            num_fewshot=run.num_fewshot,
            limit=run.limit,
            bootstrap_iters=run.bootstrap_iters,
            log_samples=True,
            system_instruction=run.system_instruction,
            apply_chat_template=run.apply_chat_template,
            fewshot_as_multiturn=run.fewshot_as_multiturn,
            fewshot_random_seed=run.fewshot_seed,
        )
    return HarnessOutcome(results, results.pop("samples"), lm.answers, lm.model_seconds)


@contextmanager
def preserved_global_generators() -> Iterator[None]:
    """Python's, numpy's and torch's global generators as they were before the block (the harness
    reseeds them)."""
    import numpy as np
    import torch

    state, numpy_state, torch_state = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(state)
        np.random.set_state(numpy_state)
        torch.set_rng_state(torch_state)


def _json(value: Any) -> str:
    from lm_eval.utils import handle_non_serializable

    return json.dumps(value, ensure_ascii=False, default=handle_non_serializable)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number


def random_baseline(samples: Sequence[Mapping[str, Any]]) -> float | None:
    """A multiple-choice task's chance accuracy: the mean over its documents of 1 / choices (one
    log-likelihood request per choice); None for other tasks."""
    counts = [
        len(s["arguments"])
        for s in samples
        if s.get("filter", "none") == "none" and all(len(a) == 2 and isinstance(a[1], str) for a in s["arguments"])
    ]
    return sum(1 / n for n in counts) / len(counts) if counts and min(counts) > 1 else None


def result_rows(outcome: HarnessOutcome) -> list[dict[str, Any]]:
    """One row per task or group, metric and filter: its value, standard error, documents,
    shots, whether higher is better, and a multiple-choice task's random baseline."""
    results = outcome.results
    groups = set(results.get("group_subtasks", {})) - set(outcome.samples)  # names with no documents of their own
    rows = []
    for name, metrics in results["results"].items():
        samples = outcome.samples.get(name, [])
        baseline = random_baseline(samples)
        for key, value in metrics.items():
            if "," not in key or "_stderr," in key:
                continue
            metric, filter_name = key.split(",", 1)
            n = results.get("n-samples", {}).get(name, {}).get("effective")
            rows.append(
                {
                    "task": name,
                    "alias": str(metrics.get("alias", name)).strip(" -"),
                    "is_group": name in groups,
                    "metric": metric,
                    "filter": filter_name,
                    "value": _number(value),
                    "stderr": _number(metrics.get(f"{metric}_stderr,{filter_name}")),
                    "n": n if n is not None else None,
                    "num_fewshot": results.get("n-shot", {}).get(name),
                    "higher_is_better": results.get("higher_is_better", {}).get(name, {}).get(metric),
                    "random_baseline": baseline,
                }
            )
    return rows


def sample_rows(outcome: HarnessOutcome) -> list[dict[str, Any]]:
    """One row per task, document and filter: the document, the exact prompt (its first request's
    context, few-shot examples and chat template included), every request's arguments and key (as
    `harness_answers` keys its answer), the reference, the answers before and after the filter,
    and the per-document metrics."""
    from eval_platform.benchmarks.engine_lm import request_key

    rows = []
    for task, samples in outcome.samples.items():
        output_type = outcome.results["configs"][task]["output_type"]
        request_type = "loglikelihood" if output_type == "multiple_choice" else output_type
        for sample in samples:
            arguments = [list(a) for a in sample["arguments"]]
            rows.append(
                {
                    "task": task,
                    "doc_id": int(sample["doc_id"]),
                    "filter": sample["filter"],
                    "doc": _json(sample["doc"]),
                    "prompt": str(arguments[0][0]) if arguments else "",
                    "arguments": _json(arguments),
                    "request_keys": [request_key(request_type, a) for a in arguments],
                    "target": str(sample["target"]),
                    "responses": _json(sample["resps"]),
                    "filtered_responses": _json(sample["filtered_resps"]),
                    "metrics": _json({m: sample[m] for m in sample["metrics"]}),
                    "doc_hash": sample["doc_hash"],
                    "prompt_hash": sample["prompt_hash"],
                }
            )
    return rows


# --- benchmarks declared as data ----------------------------------------------------------------

HARNESS_BENCHMARK_DIR = DATA_DIR / "harness"  # or EVAL_HARNESS_DIR
DECLARATION_FIELDS = {"task", "title", "include_path", "data_files", "overrides", "num_fewshot", "limit", "headline"}


@dataclass(frozen=True)
class HarnessBenchmark:
    """A harness task or group declared as one of this platform's benchmarks: a YAML file in
    data/harness/ (its name is the file's stem), with its local data and its headline metric."""

    name: str
    title: str
    run: HarnessRun
    headline_metric: str | None = None  # None: the first metric the harness reports
    headline_filter: str = "none"


def parse_declaration(path: Path) -> HarnessBenchmark:
    """A declaration file as a benchmark; paths in it are relative to its folder. A bad file is
    refused naming the file and the field."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise HarnessTaskError(f"{path}: not readable as YAML: {error}") from error
    if not isinstance(data, dict):
        raise HarnessTaskError(f"{path}: a benchmark declaration is a mapping of fields ({sorted(DECLARATION_FIELDS)})")
    unknown = sorted(set(data) - DECLARATION_FIELDS)
    if unknown:
        raise HarnessTaskError(f"{path}: unknown field(s) {unknown}; known: {sorted(DECLARATION_FIELDS)}")

    def relative(value: str) -> str:
        return str((path.parent / value).resolve()) if not Path(value).is_absolute() else value

    files = data.get("data_files") or {}
    if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
        raise HarnessTaskError(f"{path}: data_files maps each task to its splits' files ({{task: {{test: file}}}})")
    headline = data.get("headline") or {}
    if not isinstance(headline, dict) or set(headline) - {"metric", "filter"}:
        raise HarnessTaskError(f"{path}: headline is a mapping with metric and optionally filter")
    include = data.get("include_path") or []
    run = HarnessRun(
        task=str(data.get("task") or path.stem),
        include_path=tuple(relative(p) for p in ([include] if isinstance(include, str) else include)),
        data_files={task: {split: relative(f) for split, f in splits.items()} for task, splits in files.items()},
        overrides=data.get("overrides") or {},
        num_fewshot=data.get("num_fewshot"),
        limit=data.get("limit"),
    )
    return HarnessBenchmark(
        path.stem, str(data.get("title") or run.task), run, headline.get("metric"), headline.get("filter", "none")
    )


def declarations_folder() -> Path:
    """Where harness benchmarks are declared: EVAL_HARNESS_DIR, else data/harness/."""
    return Path(os.environ.get("EVAL_HARNESS_DIR", HARNESS_BENCHMARK_DIR))


def load_declarations(folder: Path | str | None = None) -> dict[str, HarnessBenchmark]:
    """Every benchmark declared in the folder (`*.yaml`; default `declarations_folder()`), by name."""
    folder = Path(folder or declarations_folder())
    return {path.stem: parse_declaration(path) for path in sorted(folder.glob("*.yaml"))} if folder.is_dir() else {}


def headline_rows(
    results: Sequence[Mapping[str, Any]], declarations: Mapping[str, HarnessBenchmark]
) -> list[dict[str, Any]]:
    """Each model's headline on each harness benchmark: the declared metric (and filter) of the
    benchmark's own task or group, else the first metric it reports, from its run with the
    declared settings (their settings key), else its latest run."""
    rows = []
    for benchmark, model in sorted({(r["benchmark"], r["model"]) for r in results}):
        declared = declarations.get(benchmark)
        run = declared.run if declared else HarnessRun(task=benchmark)
        runs = [r for r in results if r["benchmark"] == benchmark and r["model"] == model]
        chosen = max(runs, key=lambda r: (r["settings_key"] == run.settings_key(), r["computed_at"]))
        task = run.task
        own = [
            r
            for r in runs
            if r["settings_key"] == chosen["settings_key"] and r["task"] == task and r["value"] is not None
        ]
        wanted = [
            r
            for r in own
            if declared and r["metric"] == declared.headline_metric and r["filter"] == declared.headline_filter
        ] or own
        if wanted:
            best = wanted[0]
            rows.append(
                {
                    "benchmark": benchmark,
                    "model": model,
                    "model_fingerprint": best["model_fingerprint"],
                    "task": task,
                    "metric": best["metric"],
                    "filter": best["filter"],
                    "value": best["value"],
                    "stderr": best["stderr"],
                    "n": best["n"],
                    "num_fewshot": best["num_fewshot"],
                }
            )
    return rows
