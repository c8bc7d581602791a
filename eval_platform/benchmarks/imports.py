"""Evaluations made elsewhere, read in: lm-evaluation-harness output folders (`--output_path
--log_samples`: a `results_<time>.json` and a `samples_<task>_<time>.jsonl` per task).

An import is declared in the imports folder (`eval_platform/benchmarks/roster.py`) and becomes an
evaluation of an imported model on each declared benchmark its file holds: its samples, results and
fingerprint in the same tables as the platform's own. Each logged sample is matched to the
warehouse's documents by its content (the document as its task read it, and its reference), not by
its position; one that matches none is kept as a rejection with its reason. A file that is not what
it claims (cut short, another schema, a metric that is not a number) is refused whole, the error
naming the file and line: nothing of it lands.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from eval_platform.benchmarks.declarations import Benchmark, settings_key
from eval_platform.benchmarks.records import Evaluation, Sample

HARNESS = "lm-evaluation-harness"
IMPORTED = "imported:"  # the start of an imported model's fingerprint
RESULTS_FILE = re.compile(r"^results_(?P<time>.+)\.json$")
SAMPLE_KEYS = ("doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics")
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p")


class ImportRefused(ValueError):
    """A file that is not what it claims; the message names the file (and line) and the fault."""


@dataclass(frozen=True)
class SampleSource:
    """Where a logged sample came from: its file and line, and its own doc_id there."""

    file: str
    line: int
    doc_id: int


@dataclass(frozen=True)
class ImportRejection:
    """A logged sample that matches no document of the warehouse, with its reason."""

    file: str
    line: int
    task: str
    doc_id: int
    filter: str
    reason: str
    sample_json: str


@dataclass(frozen=True)
class HarnessOutput:
    """An lm-evaluation-harness output folder, read: its results file's report (the newest one
    holding each task) and each task's samples file."""

    results_file: Path
    report: dict[str, Any]
    sample_files: dict[str, Path]

    @property
    def version(self) -> str:
        return str(self.report.get("lm_eval_version") or "unknown version")

    @property
    def config(self) -> dict[str, Any]:
        return self.report.get("config") or {}

    def model_description(self) -> str:
        """The model as the report names it: `hf pretrained=...,dtype=float32`."""
        args = self.config.get("model_args")
        if isinstance(args, Mapping):
            args = ",".join(f"{key}={value}" for key, value in args.items())
        return " ".join(str(part) for part in (self.config.get("model"), args) if part)

    def source(self) -> str:
        """The tool, its version, the model and the results file, in words."""
        return f"{HARNESS} {self.version}: {self.model_description()} ({self.results_file})"

    def fingerprint(self, tasks: Sequence[str]) -> str:
        """The imported model's fingerprint on `tasks`: what the report says of the model (name,
        arguments, revision, commit, dtype), the tool and its version, and the tasks' versions,
        shots and config hashes."""
        config = self.config
        said = {
            "tool": HARNESS,
            "version": self.version,
            "model": [config.get(key) for key in ("model", "model_args", "model_revision", "model_sha", "model_dtype")],
            "name": self.report.get("model_name"),
            "tasks": {
                task: [self.report.get(key, {}).get(task) for key in ("versions", "n-shot", "task_hashes")]
                for task in sorted(tasks)
            },
        }
        digest = hashlib.sha256(json.dumps(said, sort_keys=True, default=str).encode()).hexdigest()
        return f"{IMPORTED}{digest[:16]}"

    def settings(self, tasks: Sequence[str]) -> dict[str, Any]:
        """What the run measured on `tasks`, in the platform's terms (its settings key's fields),
        with where it came from."""
        config = self.config
        generation = config.get("gen_kwargs") or {}
        generation = generation if isinstance(generation, Mapping) else {}
        shots = {self.report.get("n-shot", {}).get(task) for task in tasks} - {None}
        limit = config.get("limit")
        return {
            "num_fewshot": shots.pop() if len(shots) == 1 else None,
            "limit": int(limit) if isinstance(limit, int | float) and limit >= 1 and limit == int(limit) else limit,
            "max_gen_toks": generation.get("max_gen_toks"),
            **{key: generation[key] for key in SAMPLING_KEYS if key in generation},
            "system_instruction": self.report.get("system_instruction"),
            "apply_chat_template": bool(self.report.get("chat_template")),
            "fewshot_as_multiturn": bool(self.report.get("fewshot_as_multiturn")),
            "tool": HARNESS,
            "tool_version": self.version,
            "model": self.model_description(),
            "results_file": str(self.results_file),
            "sample_files": {task: str(self.sample_files[task]) for task in tasks},
        }


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ImportRefused(f"{path}: not readable as JSON: {error}") from error


def read_harness_output(folder: Path) -> HarnessOutput:
    """The output folder (`--output_path`, or the model's folder in it) of lm-evaluation-harness
    runs with `--log_samples`: each task from the newest results file that holds it, with its
    samples file. Refused, naming the file, where a results file is no harness report or a task
    has no samples file."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ImportRefused(f"{folder}: no such folder (an lm-evaluation-harness --output_path folder)")
    files = sorted(folder.rglob("results_*.json"), key=lambda p: p.name)
    if not files:
        raise ImportRefused(f"{folder}: holds no results_*.json (lm-evaluation-harness --output_path output)")
    newest = files[-1]
    report = _read_json(newest)
    if not isinstance(report, dict) or not isinstance(report.get("results"), dict) or "configs" not in report:
        raise ImportRefused(f"{newest}: not an lm-evaluation-harness results file (no 'results' and 'configs')")
    match = RESULTS_FILE.match(newest.name)
    assert match is not None
    stamp = match["time"]
    sample_files = {}
    for task in report["configs"]:
        path = newest.parent / f"samples_{task}_{stamp}.jsonl"
        if not path.is_file():
            raise ImportRefused(f"{newest}: task {task} has no samples file {path.name} (run with --log_samples)")
        sample_files[task] = path
    return HarnessOutput(newest, report, sample_files)


def source_stamp(folder: Path) -> str:
    """The files of an output folder as they are now (names, sizes, modification times)."""
    if not folder.is_dir():
        return "missing"
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return ";".join(f"{p.relative_to(folder)}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)


def benchmark_tasks(output: HarnessOutput, benchmark: Benchmark) -> list[str]:
    """The output's tasks (those with samples) that are the benchmark's: its task, the tasks of its
    group (as the report's `group_subtasks` lists them), or those its task's template names
    (`mmlu_{subject}`)."""
    own = benchmark.task or benchmark.name
    pattern = re.compile(re.sub(r"\\{\w+\\}", ".+", re.escape(own)) + "$")
    groups = output.report.get("group_subtasks") or {}
    members, pending = set(), [own]
    while pending:
        name = pending.pop()
        for member in groups.get(name, []):
            if member not in members:
                members.add(member)
                pending.append(member)
    return [task for task in output.sample_files if task == own or task in members or pattern.match(task)]


def imported_benchmarks(output: HarnessOutput, benchmarks: Mapping[str, Benchmark]) -> list[str]:
    """The declared benchmarks the output holds tasks of."""
    return [name for name, benchmark in benchmarks.items() if benchmark_tasks(output, benchmark)]


def _number(value: Any) -> Any:
    """A logged log-likelihood's parts as numbers (the harness's files write them as text)."""
    if isinstance(value, str):
        if value in ("True", "False"):
            return value == "True"
        try:
            return float(value)
        except ValueError:
            return value
    if isinstance(value, list):
        return [_number(v) for v in value]
    return value


def _arguments(logged: Any) -> list[list[Any]]:
    """A sample's requests' arguments as lists: the harness's files write each request as
    {"gen_args_<i>": {"arg_<j>": ...}}; its in-memory samples as lists."""
    if isinstance(logged, Mapping):
        return [
            [request[key] for key in sorted(request, key=lambda k: int(k.rsplit("_", 1)[1]))]
            for request in (logged[key] for key in sorted(logged, key=lambda k: int(k.rsplit("_", 1)[1])))
        ]
    return [list(request) for request in logged]


def _metric_fault(name: str, value: Any) -> str | None:
    numbers = value if isinstance(value, list) else [value]
    if all(isinstance(v, bool | int | float) for v in numbers):
        return None
    return f"metric {name} is not a number: {json.dumps(value)[:80]}"


def logged_samples(path: Path, task: str, request_type: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """A samples file's samples, one a line with its line number, in the harness's in-memory
    shape; refused at the first line that is not a whole sample of the harness's schema."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                yield number, _sample(line, f"{path} line {number}", task, request_type != "generate_until")


def _sample(line: str, where: str, task: str, numeric: bool) -> dict[str, Any]:
    """One line of a samples file as the harness's in-memory sample (log-likelihoods as numbers
    where `numeric`), or refused naming `where` and the fault."""
    try:
        sample = json.loads(line)
    except ValueError as error:
        raise ImportRefused(f"{where}: not a JSON object ({error}); is the file cut short?") from error
    missing = [key for key in SAMPLE_KEYS if key not in sample] if isinstance(sample, dict) else list(SAMPLE_KEYS)
    if missing:
        raise ImportRefused(f"{where}: not a sample of task {task} (it lacks {missing})")
    if not isinstance(sample["doc_id"], int) or not isinstance(sample["metrics"], list):
        raise ImportRefused(f"{where}: its doc_id is no integer or its metrics no list")
    for name in sample["metrics"]:
        if (fault := _metric_fault(name, sample.get(name))) is not None:
            raise ImportRefused(f"{where} (doc_id {sample['doc_id']}): {fault}")
    try:
        arguments = _arguments(sample["arguments"])
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        raise ImportRefused(f"{where}: its arguments are not the harness's requests ({error})") from error
    responses = {key: _number(sample[key]) if numeric else sample[key] for key in ("resps", "filtered_resps")}
    return {**sample, "arguments": arguments, **responses}


def content_key(doc: Any) -> str:
    """A document by its content: the row as its task read it, keys sorted."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class KnownDocument:
    """A document of the warehouse, as an evaluation numbers it: its task, doc_id and dataset id,
    and the harness's reference for it where one of the warehouse's harness samples gives it."""

    task: str
    doc_id: int
    document_id: str | None
    target: str | None


@dataclass
class ImportedEvaluation:
    """An import's evaluation of one benchmark, and where each of its samples came from."""

    evaluation: Evaluation
    lineage: dict[tuple[str, int, str], SampleSource] = field(default_factory=dict)
    rejections: list[ImportRejection] = field(default_factory=list)


def imported_evaluation(
    output: HarnessOutput, benchmark: Benchmark, known: Mapping[tuple[str, str], KnownDocument], seed: int
) -> ImportedEvaluation:
    """The output's evaluation of `benchmark` by the harness's own scoring (solver `harness`): each
    logged sample matched to a known document by (task, content key), renumbered as the warehouse
    numbers it, with the file and line it came from; a sample that matches none (or whose
    reference differs) rejected with its reason. Results are the tool's own, each with the interval
    of its matched items."""
    from eval_platform.benchmarks.harness import HarnessOutcome, outcome_results, outcome_samples, request_type_of
    from eval_platform.benchmarks.scoring import with_intervals

    tasks = benchmark_tasks(output, benchmark)
    if not tasks:
        raise ImportRefused(f"{output.results_file}: holds no task of {benchmark.name}")
    configs = output.report["configs"]
    matched: dict[str, list[dict[str, Any]]] = {}
    lineage: dict[tuple[str, int, str], SampleSource] = {}
    rejections: list[ImportRejection] = []
    for task in tasks:
        request_type = request_type_of(str(configs[task].get("output_type", "")))
        path = output.sample_files[task]
        for line, sample in logged_samples(path, task, request_type):
            document = known.get((task, content_key(sample["doc"])))
            reason = None
            if document is None:
                reason = f"its document matches none of {benchmark.name}'s {task} documents in the warehouse"
            elif document.target is not None and document.target != str(sample["target"]):
                reason = f"its reference {str(sample['target'])[:80]!r} is not the warehouse's {document.target[:80]!r}"
            if reason or document is None:
                rejections.append(
                    ImportRejection(str(path), line, task, sample["doc_id"], str(sample["filter"]), str(reason),
                                    json.dumps(sample, ensure_ascii=False, default=str)[:2000])
                )  # fmt: skip
                continue
            key = (task, document.doc_id, str(sample["filter"]))
            if key in lineage:
                raise ImportRefused(
                    f"{path} line {line}: the same document and filter as line {lineage[key].line} (doc_id "
                    f"{sample['doc_id']})"
                )
            lineage[key] = SampleSource(str(path), line, sample["doc_id"])
            matched.setdefault(task, []).append({**sample, "doc_id": document.doc_id})
    outcome = HarnessOutcome(output.report, matched)
    named = {(document.task, document.doc_id): document.document_id for document in known.values()}
    samples: list[Sample] = [
        replace(s, document_id=named.get((s.task, s.doc_id)))
        for s in outcome_samples(outcome, seed, (), output.settings(tasks).get("max_gen_toks"))
    ]
    groups = dict(output.report.get("group_subtasks") or {})
    wanted = set(tasks) | {name for name, members in groups.items() if set(tasks) & set(members)}
    results = with_intervals([r for r in outcome_results(outcome) if r.task in wanted], samples, groups)
    evaluation = Evaluation("harness", settings_key(output.settings(tasks)), samples, results)
    return ImportedEvaluation(evaluation, lineage, rejections)
