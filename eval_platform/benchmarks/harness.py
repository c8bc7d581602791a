"""lm-evaluation-harness behind one door: its registry, task building and `simple_evaluate`.

The harness (0.4.13) is a library here. Its task registry (`TaskManager`, every YAML under
`lm_eval/tasks` plus any `include_path` folder) builds each task with its own templates, few-shot
samplers and seed, chat template handling, filters, `process_results` and aggregation (groups
included), through its own `evaluate()`. The model it is handed is `EngineLM` (engine_lm.py).

Local data: `data_files` points a task (or each task of a group) at local files, which become its
`dataset_path: json` with those files as its splits (a split the task names but the files do not
provide is dropped). Every other key of a task's config can be overridden per task (`overrides`).

Every use of the harness's private API is in this module, listed in `PRIVATE_API`, which
tests/benchmarks/test_harness_door.py checks against the installed harness, so an upgrade that moves one fails
there by name. lm_eval is imported inside functions: importing this module costs nothing.
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from eval_engine import DEFAULT_SEED
from eval_platform.benchmarks.code_sandbox import CodeEvalInSandbox
from eval_platform.benchmarks.declarations import FEWSHOT_SEED, HARNESS_VERSION, DeclarationError, EvaluationSettings
from eval_platform.benchmarks.records import Result, Sample, request_key, sampled_arguments, with_budget
from eval_platform.common.ingestion import Rejection, jsonl_records, not_an_object
from eval_platform.environment import (
    CODE_EXECUTION_VARIABLE,
    DATA_DIR,
    HARNESS_INDEX,
    add_nltk_data,
    code_execution_allowed,
)

if TYPE_CHECKING:
    from jinja2 import Template
    from lm_eval.api.group import Group
    from lm_eval.api.model import LM
    from lm_eval.api.task import Task
    from lm_eval.tasks import TaskManager
    from lm_eval.tasks._index import Entry

    Built: TypeAlias = "Task | Group | list[Task | Group]"  # what the registry builds of a name (a tag: a list)

NLTK_DATA = DATA_DIR / "nltk_data"  # punkt_tab for IFEval, which NLTK would otherwise download at import
SPLIT_KEYS = ("training_split", "validation_split", "test_split", "fewshot_split")
log = logging.getLogger(__name__)

# The harness's private names this platform uses (module, attribute), all of them in this module.
PRIVATE_API = (
    ("lm_eval.tasks._index", "TaskIndex"),  # the registry's index: built from a cache of its own tasks
    ("lm_eval.tasks._index", "Kind"),  # an index entry's kind: task, group or tag
    ("lm_eval.tasks._index", "Entry"),  # an index entry (in annotations only)
    ("lm_eval.tasks.manager", "TaskIndex"),  # where TaskManager looks the index class up
    ("lm_eval.tasks._factory", "GROUP_FIELD_NAMES"),  # a group's own config keys, not passed to its tasks
    ("lm_eval.evaluator", "add_env_info"),  # simple_evaluate's environment report, done without collect_env
    ("lm_eval.loggers.utils", "get_commit_from_path"),
    ("lm_eval.utils", "env"),  # the Jinja environment the harness renders its templates in
    ("lm_eval.utils", "apply_template"),  # replaced by one that compiles each template once
    ("lm_eval.tasks._yaml_loader", "load_yaml"),  # a task's YAML read without importing its code
)
PRIVATE_METHODS = (("_factory", "_load_full_config"), ("_factory", "_build_group"), ("_factory", "build"))
# a built task's filter pipelines and its metrics' options (each_answer_scored)
PRIVATE_TASK_ATTRIBUTES = ("_filters", "_metric_fn_kwargs")


class HarnessTaskError(ValueError):
    """A task that cannot be built or run as configured; the message names the task and what to fix."""


@dataclass(frozen=True)
class HarnessRun:
    """Harness tasks or groups as they are evaluated: their names, the settings, whether the
    harness's own tasks are indexed (False: only `include_path`'s, a registry built in no time), and
    where the index of its own tasks is cached (`cached_task_index`)."""

    tasks: tuple[str, ...]
    settings: EvaluationSettings
    include_defaults: bool = True
    index_dir: Path = HARNESS_INDEX

    def registry(self) -> TaskManager:
        """The harness's task registry this run's tasks are looked up in."""
        return task_manager(tuple(self.settings.include_path), self.include_defaults, self.index_dir)


def prepare_environment() -> None:
    """What the harness's tasks need before they are imported: NLTK's punkt_tab from data/ (IFEval
    downloads it at import otherwise), and a seeded langdetect (IFEval's language checks are
    otherwise random between runs). NLTK itself is not imported here: it reads NLTK_DATA when
    IFEval imports it, and only an NLTK imported before is told the path."""
    if NLTK_DATA.is_dir():
        add_nltk_data(NLTK_DATA)
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


def cached_task_index(folder: Path, index_dir: Path) -> dict[str, Entry]:
    """The harness's index of a folder of task YAML files (`TaskIndex.build`; its own tasks folder
    is about 14,000 files, over 5 s to parse), built once per state of the folder's files (their
    paths, sizes and modification times, and the harness's version) and then read from a pickle
    under `index_dir` (under 1 s for its own tasks)."""
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
    cached = Path(index_dir) / f"{key}.pickle"
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


def _index_with_own_tasks_cached(
    paths: Iterable[Path], *, resolve_includes: bool = True, index_dir: Path = HARNESS_INDEX
) -> dict[str, Entry]:
    """`TaskIndex.build`, with the harness's own tasks folder read through `cached_task_index`
    (cached under `index_dir`); later paths override earlier ones, as in the harness."""
    import lm_eval
    from lm_eval.tasks._index import TaskIndex

    own = Path(lm_eval.__file__).parent / "tasks"
    paths = [Path(path) for path in paths]
    cached = paths[:1] == [own] and resolve_includes
    index = dict(cached_task_index(own, index_dir)) if cached else {}
    for name, entry in TaskIndex.build(paths[1:] if cached else paths, resolve_includes=resolve_includes).items():
        if name in index:
            log.warning(
                "Task '%s' from %s overrides existing task from %s", name, entry.yaml_path, index[name].yaml_path
            )
        index[name] = entry
    return index


def _versions_only(storage: dict[str, object]) -> None:
    """The harness's environment report (`add_env_info`) without torch's `collect_env` report."""
    from importlib.metadata import version

    from lm_eval.loggers.utils import get_commit_from_path

    storage.update(
        {
            "pretty_env_info": "not collected: the platform records where answers were computed (evaluation_runs)",
            "transformers_version": version("transformers"),
            "lm_eval_version": version("lm_eval"),
            "upper_git_hash": get_commit_from_path(Path(os.getcwd(), "..")),
        }
    )


@functools.lru_cache(maxsize=1024)
def _compiled_template(template: str) -> Template:
    from lm_eval.utils import env

    return env.from_string(template)


def _apply_template(template: str, doc: dict) -> str:
    """`lm_eval.utils.apply_template`, its template compiled once, not for every document and shot."""
    return _compiled_template(template).render(**doc)


def adapt_harness(index_dir: Path) -> None:
    """Three of the harness's steps that cost seconds per process or per evaluation, done the
    platform's way (the same results): its registry reads the index of its own tasks from a cache
    (under `index_dir`) instead of parsing 14,000 YAML files in every process; `simple_evaluate` reports its
    environment without torch's `collect_env` (pip list and a dozen commands, half a second to a
    second per evaluation) for a report no result keeps; and a task's Jinja templates (`doc_to_text`,
    `doc_to_target`, ...) are compiled once, where the harness compiles them again for every
    document and every few-shot example (a third of the platform's time per BBH document)."""
    import lm_eval.evaluator
    import lm_eval.tasks.manager
    import lm_eval.utils
    from lm_eval.tasks._index import TaskIndex

    class IndexWithOwnTasksCached(TaskIndex):
        build = staticmethod(functools.partial(_index_with_own_tasks_cached, index_dir=index_dir))

    lm_eval.tasks.manager.TaskIndex = IndexWithOwnTasksCached
    lm_eval.evaluator.add_env_info = _versions_only
    lm_eval.utils.apply_template = _apply_template


@functools.lru_cache(maxsize=16)
def task_manager(
    include_path: tuple[str, ...] = (), include_defaults: bool = True, index_dir: Path = HARNESS_INDEX
) -> TaskManager:
    """The harness's registry (its own tasks, unless `include_defaults` is false, their index cached
    under `index_dir`, and any `include_path` folders), built once per process and registry."""
    prepare_environment()
    adapt_harness(index_dir)
    from lm_eval.tasks import TaskManager

    missing = [path for path in include_path if not Path(path).is_dir()]
    if missing:
        raise HarnessTaskError(f"include_path {missing[0]} is not a folder of task YAML files")
    return TaskManager(include_path=list(include_path) or None, include_defaults=include_defaults)


def own_task_folder(folder: str) -> str:
    """A folder of the harness's own tasks (`arc`, `mmlu/default`)."""
    import lm_eval

    return str(Path(lm_eval.__file__).parent / "tasks" / folder)


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


def local_data(files: Mapping[str, str], base: Mapping[str, object]) -> dict[str, object]:
    """A task's overrides reading `files` (split -> local JSON/JSONL file, checked first): the
    task's splits that the files do not provide are dropped, so its few-shot examples come from its
    YAML or a given split only."""
    task = str(base.get("task"))
    missing = [path for path in files.values() if not Path(path).is_file()]
    if missing:
        raise HarnessTaskError(f"{task}: data file {missing[0]} does not exist")
    for path in files.values():
        check_json_records(Path(path), task)
    overrides: dict[str, object] = {
        "dataset_path": "json",
        "dataset_name": None,
        "dataset_kwargs": {"data_files": {split: str(path) for split, path in files.items()}},
    }
    for key in SPLIT_KEYS:
        if base.get(key) and base[key] not in files:
            overrides[key] = None
    evaluated = base.get("test_split") or base.get("validation_split")
    if evaluated not in files:
        raise HarnessTaskError(
            f"{task}: data_files give splits {sorted(files)}, but the task evaluates the split {evaluated!r}"
        )
    return overrides


def _member_name(member: str | Mapping[str, object]) -> tuple[str, dict[str, object]]:
    if isinstance(member, str):
        return member, {}
    name = str(member.get("task") or member.get("group"))
    return name, {k: v for k, v in member.items() if k not in ("task", "group")}


def registered_config(
    name: str, include_path: tuple[str, ...] = (), include_defaults: bool = True, index_dir: Path = HARNESS_INDEX
) -> dict[str, Any]:
    """A task's config as the registry holds it (its YAML, includes resolved), before any override."""
    manager = task_manager(include_path, include_defaults, index_dir)
    entry = manager.task_index.get(name)
    if entry is None:
        raise HarnessTaskError(f"{name!r} is not a task, group or tag of lm-evaluation-harness {HARNESS_VERSION}")
    return unresolved_config(manager, entry)


def unresolved_config(manager: TaskManager, entry: Entry) -> dict[str, Any]:
    """An index entry's config, includes resolved, its `!function`s left as their names: read
    without importing a task's code (humaneval's imports `code_eval` from the hub)."""
    if entry.yaml_path is None:
        return manager._factory._load_full_config(entry, None)
    from lm_eval.tasks._yaml_loader import load_yaml

    return load_yaml(entry.yaml_path, resolve_func=False)


def generates(
    task: str, include_path: tuple[str, ...] = (), include_defaults: bool = True, index_dir: Path = HARNESS_INDEX
) -> bool:
    """Whether a registered task, or a task of a registered group, asks for generated text (a task
    name with row fields in it, a dataset's, is looked up by the harness per document: False)."""
    try:
        config = registered_config(task, include_path, include_defaults, index_dir)
    except HarnessTaskError:
        return False
    if "output_type" in config:
        return config["output_type"] == "generate_until"
    members = [_member_name(member)[0] for member in config.get("task") or []]
    return any(generates(member, include_path, include_defaults, index_dir) for member in members)


def _built(name: str, build: Callable[[str, Mapping[str, object]], Built]) -> list[Task | Group]:
    """The tasks `build` makes of a name the run asks for; the harness's own error (e.g. a dataset it
    cannot load offline) said as the name's."""
    try:
        task = build(name, {})
    except (HarnessTaskError, DeclarationError):
        raise
    except Exception as error:
        offline = "Hub" in str(error) or "offline" in str(error).lower()
        hint = " (offline: point it at local files with data_files, {task: {split: file}})" if offline else ""
        raise HarnessTaskError(
            f"{name}: the harness could not build it: {type(error).__name__}: {error}{hint}"
        ) from error
    return task if isinstance(task, list) else [task]


def build_tasks(run: HarnessRun) -> list[Task | Group]:
    """The run's tasks or groups as the harness's objects (a tag: its tasks), each leaf task's
    config merged with its data files and overrides (over the registered YAML, and over what its
    group sets for it)."""
    manager = run.registry()
    index = manager.task_index
    factory = manager._factory  # the registry's own builder: overrides merge onto the registered YAML
    from lm_eval.tasks._factory import GROUP_FIELD_NAMES
    from lm_eval.tasks._index import Kind

    settings, used = run.settings, set()

    def build(name: str, inherited: Mapping[str, object]) -> Built:
        entry = index.get(name)
        if entry is None:
            where = f" or of include_path {list(settings.include_path)}" if settings.include_path else ""
            raise HarnessTaskError(
                f"{name!r} is not a task, group or tag of lm-evaluation-harness {HARNESS_VERSION}{where}"
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
            return cast("list[Task | Group]", [build(member, inherited) for member in sorted(entry.tags)])
        used.add(name)
        overrides = {**inherited, **settings.overrides.get(name, {})}
        runs_code = bool({**unresolved_config(manager, entry), **overrides}.get("unsafe_code"))
        if runs_code and (refusal := unsafe_code_refusal(name, settings.confirm_run_unsafe_code)):
            raise HarnessTaskError(refusal)
        with code_eval_in_sandbox() if runs_code else nullcontext():
            if name in settings.data_files or settings.sets_sampling:
                base = {**factory._load_full_config(entry, None), **overrides}
                overrides.update(settings.sampling_overrides(base))
                if name in settings.data_files:
                    overrides.update(local_data(settings.data_files[name], base))
            task = cast("Task", factory.build(entry, overrides={"task": name, **overrides}, registry=index))
        if runs_code and not executes_in_sandbox(task):
            raise HarnessTaskError(
                f"{name} executes the model's code with an executor of its own (not code_eval), which the platform "
                "cannot confine to its sandbox: refused"
            )
        return task

    built = [task for name in run.tasks for task in _built(name, build)]
    unknown = sorted((set(settings.data_files) | set(settings.overrides)) - used)
    if unknown:
        raise HarnessTaskError(
            f"{', '.join(run.tasks)}: data_files or overrides name {unknown}, which are not among its tasks"
        )
    return built


def unsafe_code_refusal(task: str, confirmed: bool) -> str | None:
    """Why a task whose metric executes the model's code (`unsafe_code`) may not run, None where the
    user opted in as the harness requires: `confirm_run_unsafe_code` and HF_ALLOW_CODE_EVAL=1."""
    missing = [
        wanted
        for wanted, given in (
            ("confirm_run_unsafe_code: true (in the declaration or the launchpad)", confirmed),
            (f"{CODE_EXECUTION_VARIABLE}=1 in the environment", code_execution_allowed()),
        )
        if not given
    ]
    if not missing:
        return None
    return (
        f"{task} scores an answer by executing the model's code (the task sets unsafe_code): it runs only where you "
        f"opt in as lm-evaluation-harness requires, with {' and '.join(missing)}; the code then runs in the "
        "platform's sandbox (a process of its own, time and memory limits, no network)"
    )


@contextmanager
def code_eval_in_sandbox() -> Iterator[None]:
    """While a task is built: `evaluate.load("code_eval")`, which humaneval's and mbpp's code calls
    when imported, gives the sandbox's `CodeEvalInSandbox`; any other module loads as evaluate loads it."""
    import evaluate

    load = evaluate.load

    def sandboxed(path: str, *args: Any, **kwargs: Any) -> Any:
        return CodeEvalInSandbox() if path == "code_eval" else load(path, *args, **kwargs)

    evaluate.load = sandboxed
    try:
        yield
    finally:
        evaluate.load = load


def executes_in_sandbox(task: Task) -> bool:
    """Whether a built task's metric code holds the sandbox's `code_eval` (a metric function's
    module does), so the code its metric executes runs there."""
    functions = [metric.get("metric") for metric in task.config.metric_list or []] + [task.config.process_results]
    return any(
        isinstance(value, CodeEvalInSandbox)
        for function in functions
        if callable(function)
        for value in getattr(function, "__globals__", {}).values()
    )


def record_fewshot_draws(task: Task) -> Callable[[], list[list[int]]]:
    """Records the examples the task's sampler draws, one list per document as its requests are
    built; returns what gives each draw as positions in the task's few-shot split."""
    draws: list[list[object]] = []
    sampler = getattr(task, "sampler", None)
    if sampler is None:
        return lambda: []
    sample = sampler.sample

    def recording(*args: Any, **kwargs: Any) -> Any:
        drawn = sample(*args, **kwargs)
        draws.append(list(drawn))
        return drawn

    sampler.sample = recording

    def positions() -> list[list[int]]:
        examples = {id(doc): index for index, doc in enumerate(sampler.fewshot_docs())}
        return [[examples[id(doc)] for doc in drawn if id(doc) in examples] for drawn in draws]

    return positions


@dataclass
class HarnessOutcome:
    """What one evaluation produced: the harness's results (tasks and groups), its per-document
    samples, and its config of each task."""

    results: dict[str, Any]
    samples: dict[str, list[dict[str, Any]]]


def evaluate(run: HarnessRun, tasks: Sequence[Task | Group], lm: LM) -> HarnessOutcome:
    """The harness's own `simple_evaluate` on built tasks, answered by `lm`: its num_fewshot rule,
    few-shot seed and global seeds, so results equal a harness run on its own (IFEval's checkers draw
    any argument a row leaves out from Python's global generator, whose state the harness's own
    steps advance). The process's global generators are restored afterwards."""
    from lm_eval.evaluator import simple_evaluate

    settings = run.settings
    with preserved_global_generators():
        results = simple_evaluate(
            model=lm,
            tasks=list(tasks),  # pyright: ignore[reportArgumentType]  # lm_eval's annotation omits Group, which it takes
            task_manager=run.registry(),
            num_fewshot=settings.num_fewshot,
            limit=settings.limit,
            bootstrap_iters=settings.bootstrap_iters,
            log_samples=True,
            system_instruction=settings.system_instruction,
            apply_chat_template=settings.apply_chat_template,
            fewshot_as_multiturn=settings.fewshot_as_multiturn,
            fewshot_random_seed=FEWSHOT_SEED,
            confirm_run_unsafe_code=settings.confirm_run_unsafe_code,
        )
    assert results is not None  # None only on a process of rank > 0
    outcome: dict[str, Any] = dict(results)
    return HarnessOutcome(outcome, outcome.pop("samples"))


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


def plain(value: object) -> Any:
    """A harness value as plain JSON data (numpy numbers as numbers, anything else as text)."""
    from lm_eval.utils import handle_non_serializable

    return json.loads(json.dumps(value, ensure_ascii=False, default=handle_non_serializable))


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


def outcome_results(outcome: HarnessOutcome) -> list[Result]:
    """One result per task or group, metric and filter: its value, standard error, documents,
    shots, whether higher is better, and a multiple-choice task's random baseline (its interval,
    from its items: scoring.with_intervals)."""
    results = outcome.results
    groups = set(results.get("group_subtasks", {})) - set(outcome.samples)  # names with no documents of their own
    rows = []
    for name, metrics in results["results"].items():
        baseline = random_baseline(outcome.samples.get(name, []))
        for key, value in metrics.items():
            if "," not in key or "_stderr," in key:
                continue
            metric, filter_name = key.split(",", 1)
            n = results.get("n-samples", {}).get(name, {}).get("effective")
            rows.append(
                Result(
                    task=name,
                    alias=str(metrics.get("alias", name)).strip(" -"),
                    is_group=name in groups,
                    metric=metric,
                    filter=filter_name,
                    value=_number(value),
                    stderr=_number(metrics.get(f"{metric}_stderr,{filter_name}")),
                    n=n,
                    num_fewshot=results.get("n-shot", {}).get(name),
                    higher_is_better=results.get("higher_is_better", {}).get(name, {}).get(metric),
                    random_baseline=baseline,
                )
            )
    return rows


def request_type_of(output_type: str) -> str:
    """The request type a task's output type asks the model (multiple choice: log-likelihoods)."""
    return "loglikelihood" if output_type == "multiple_choice" else output_type


def answer_keys(
    request_type: str,
    arguments: Sequence[Sequence[Any]],
    responses: Sequence[Sized],
    seed: int,
    max_gen_toks: int | None = None,
) -> list[str]:
    """The keys of a document's answers: one per request, or per sample of a sampled request (a
    task's `repeats`), as `EngineLM` keys them (a generation within the run's budget `max_gen_toks`)."""
    from eval_platform.benchmarks.engine_lm import sampling_of

    keys = []
    for request, answers in zip(arguments, responses, strict=True):
        if request_type == "generate_until":
            request = [request[0], with_budget(request[1], max_gen_toks)]
        if request_type == "generate_until" and sampling_of(request[1], seed) is not None:
            keys += [request_key(request_type, sampled_arguments(request, seed, i)) for i in range(len(answers))]
        else:
            keys.append(request_key(request_type, request))
    return keys


def leaf_tasks(tasks: Sequence[Task | Group]) -> dict[str | None, Task]:
    """The harness's task objects among built tasks and groups, by task name."""
    from lm_eval.api.group import Group

    leaves = [leaf for task in tasks for leaf in (task.get_all_tasks() if isinstance(task, Group) else [task])]
    return {leaf.config.task: leaf for leaf in leaves}


def each_answer_scored(
    task: Task, doc: dict[str, object], filter_name: str, answers: Sequence[str]
) -> tuple[list[str], list[dict[str, float]]]:
    """Each of a request's answers (a sampled request's k) scored alone, as the harness scores a
    document: the filter's steps on that answer (a majority over one answer is that answer; taking
    the first k answers is skipped), then the task's `process_results`. What the filter took out of
    each, and each one's numeric metrics."""
    from lm_eval.filters.selection import TakeKFilter

    ensemble = next(each for each in task._filters if each.name == filter_name)
    steps = [step for step in (make() for make in ensemble.filters) if not isinstance(step, TakeKFilter)]
    taken, scored = [], []
    for answer in answers:
        responses: Any = [[answer]]
        for step in steps:
            responses = step.apply(responses, [doc])
        filtered = list(responses)[0]
        metrics = _scored_alone(task, doc, filtered)
        one = isinstance(filtered, list) and len(filtered) == 1  # a code task's filter: the answer's program
        taken.append(str(filtered[0] if one else filtered))
        scored.append({name: float(value) for name, value in metrics.items() if _number(value) is not None})
    return taken, scored


def _scored_alone(task: Task, doc: dict[str, object], filtered: object) -> dict[str, Any]:
    """One answer's metrics by the task's `process_results`; a code task's pass@k (its metric's
    sizes k) asked at k = 1, the only size one answer has: whether it passed."""
    if not executes_in_sandbox(task):
        return cast("dict[str, Any]", task.process_results(doc, [filtered]))
    options = task._metric_fn_kwargs
    sized = {metric: kwargs for metric, kwargs in options.items() if "k" in kwargs}
    options.update({metric: {**kwargs, "k": [1]} for metric, kwargs in sized.items()})
    try:
        return cast("dict[str, Any]", task.process_results(doc, [filtered]))
    finally:
        options.update(sized)


def outcome_samples(
    outcome: HarnessOutcome,
    seed: int = DEFAULT_SEED,
    tasks: Sequence[Task | Group] = (),
    max_gen_toks: int | None = None,
) -> list[Sample]:
    """One sample per task, document and filter: the document, the exact prompt (its first request's
    context, few-shot examples and chat template included), every request's arguments and the keys
    of its answers (a sampled request's: one per sample under `seed`; a generation's within the run's
    budget `max_gen_toks`), the reference, the answers
    before and after the filter, and the per-document metrics; a document of one sampled request
    answered several times (a task's `repeats`, where its task is among `tasks`) with each answer's
    own metrics (`each_answer_scored`)."""
    samples = []
    leaves = leaf_tasks(tasks)
    for task, logged in outcome.samples.items():
        request_type = request_type_of(outcome.results["configs"][task]["output_type"])
        for sample in logged:
            resps = sample["resps"]
            several = request_type == "generate_until" and len(resps) == 1 and len(resps[0]) > 1 and task in leaves
            answers, scored = (
                each_answer_scored(leaves[task], sample["doc"], sample["filter"], resps[0]) if several else (None, None)
            )
            # texts as they are (a five-shot context, shared by each choice's request, is not copied per request)
            arguments = [[a if isinstance(a, str) else plain(a) for a in request] for request in sample["arguments"]]
            samples.append(
                Sample(
                    task=task,
                    doc_id=int(sample["doc_id"]),
                    filter=sample["filter"],
                    prompt=str(arguments[0][0]) if arguments else "",
                    arguments=arguments,
                    request_keys=answer_keys(request_type, arguments, resps, seed, max_gen_toks),
                    target=str(sample["target"]),
                    responses=plain(resps),
                    filtered_responses=plain(sample["filtered_resps"]),
                    metrics=plain({m: sample[m] for m in sample["metrics"]}),
                    doc=plain(sample["doc"]),
                    doc_hash=sample["doc_hash"],
                    prompt_hash=sample["prompt_hash"],
                    sample_answers=answers,
                    sample_metrics=scored,
                )
            )
    return samples
