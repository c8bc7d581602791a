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
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from eval_platform.benchmarks.declarations import SAMPLING_FIELDS, Benchmark, settings_key
from eval_platform.benchmarks.records import Evaluation, Sample
from eval_platform.benchmarks.scoring import group_leaves

HARNESS = "lm-evaluation-harness"
IMPORTED = "imported:"  # the start of an imported model's fingerprint
# a results file as the harness names it: results_2026-11-29T19-30-08.675009.json
RESULTS_FILE = re.compile(r"^results_(?P<time>\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(\.\d+)?)\.json$")
SAMPLE_KEYS = (
    "doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics", "doc_hash", "prompt_hash",
)  # fmt: skip
CHUNK = 500  # samples made at a time from a file


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
    sample_excerpt: str  # its first 2,000 characters of JSON


@dataclass(frozen=True)
class HarnessOutput:
    """An lm-evaluation-harness output folder, read: its newest results file's report and each of
    its tasks' samples file."""

    results_file: Path
    report: dict[str, Any]
    sample_files: dict[str, Path]

    @property
    def version(self) -> str:
        return str(self.report.get("lm_eval_version") or "unknown version")

    @property
    def config(self) -> dict[str, object]:
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

    def settings(self, tasks: Sequence[str], declared_shots: int | None) -> dict[str, Any]:
        """What the run measured on `tasks`, in the platform's terms (its settings key's fields),
        with where it came from. Its shots are the tasks' own (`default shots`, as the platform
        names them) where the benchmark declares none (`declared_shots`); each result keeps the
        shots it was measured with."""
        config = self.config
        generates = any(self.report["configs"][task].get("output_type") == "generate_until" for task in tasks)
        generation = config.get("gen_kwargs") if generates else None  # as the platform: a generation's only
        generation = generation if isinstance(generation, Mapping) else {}
        shots = {self.report.get("n-shot", {}).get(task) for task in tasks} - {None}
        limit = config.get("limit")
        return {
            "num_fewshot": shots.pop() if declared_shots is not None and len(shots) == 1 else None,
            "limit": int(limit) if isinstance(limit, int | float) and limit >= 1 and limit == int(limit) else limit,
            "max_gen_toks": generation.get("max_gen_toks"),
            **{key: generation[key] for key in SAMPLING_FIELDS if key in generation},
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
    """The output folder of one model's lm-evaluation-harness runs with `--log_samples` (the
    `--output_path` folder, or the model's folder in it): its newest results file (by the time in
    its name) and each of its tasks' samples file. Refused, naming the folder or file, where it
    holds no results file, runs of several models, a results file that is no harness report, or a
    task without its samples file."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ImportRefused(f"{folder}: no such folder (an lm-evaluation-harness --output_path folder)")
    files = {path: match["time"] for path in folder.rglob("results_*.json") if (match := RESULTS_FILE.match(path.name))}
    if not files:
        raise ImportRefused(f"{folder}: holds no results_<time>.json (lm-evaluation-harness --output_path output)")
    if len({path.parent for path in files}) > 1:
        models = sorted(str(path.parent.relative_to(folder)) for path in files)
        raise ImportRefused(f"{folder}: holds runs of several models ({', '.join(dict.fromkeys(models))}): "
                            "point the import at one model's folder")  # fmt: skip
    newest, stamp = max(files.items(), key=lambda item: item[1])
    report = _read_json(newest)
    if not isinstance(report, dict) or not isinstance(report.get("results"), dict) or "configs" not in report:
        raise ImportRefused(f"{newest}: not an lm-evaluation-harness results file (no 'results' and 'configs')")
    sample_files = {}
    for task, config in report["configs"].items():
        if not isinstance(config, dict) or "output_type" not in config:
            raise ImportRefused(f"{newest}: configs.{task} names no output_type")
        path = newest.parent / f"samples_{task}_{stamp}.jsonl"
        if not path.is_file():
            raise ImportRefused(f"{newest}: task {task} has no samples file {path.name} (run with --log_samples)")
        sample_files[task] = path
    return HarnessOutput(newest, report, sample_files)


def source_stamp(source: Path) -> str:
    """An import's source as it is now: an output folder's files (names, sizes, modification
    times), or a log file's size and modification time."""
    if not source.exists():
        return "missing"
    stamps = []
    for path in sorted(source.rglob("*")) if source.is_dir() else [source]:
        try:
            stat = path.stat()
        except OSError:  # removed since it was listed
            continue
        stamps.append(f"{path.relative_to(source) if path != source else path.name}:{stat.st_size}:{stat.st_mtime_ns}")
    return ";".join(stamps)


def benchmark_tasks(output: HarnessOutput, benchmark: Benchmark, known: Collection[str] | None = None) -> list[str]:
    """The output's tasks (those with samples) that are the benchmark's: its task, the tasks of its
    group (as the report's `group_subtasks` lists them, at any depth), or those its task's template
    names (`mmlu_{subject}`), of those the warehouse knows where `known` is given (a template's
    pattern also fits another family's tasks, such as `mmlu_pro_law`)."""
    own = benchmark.task or benchmark.name
    pattern = re.compile(re.sub(r"\\{\w+\\}", ".+", re.escape(own)) + "$")
    members = set(group_leaves(own, _groups(output)))
    return [
        task
        for task in output.sample_files
        if (task == own or task in members or pattern.match(task)) and (known is None or task in known)
    ]


def _groups(output: HarnessOutput) -> dict[str, list[str]]:
    groups = output.report.get("group_subtasks") or {}
    if not isinstance(groups, dict) or not all(isinstance(members, list) for members in groups.values()):
        raise ImportRefused(f"{output.results_file}: group_subtasks is not a mapping of groups to their tasks")
    return groups


def imported_benchmarks(output: HarnessOutput, benchmarks: Mapping[str, Benchmark]) -> list[str]:
    """The declared benchmarks the output holds tasks of."""
    return [name for name, benchmark in benchmarks.items() if benchmark_tasks(output, benchmark)]


def _number(value: object) -> object:
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


def _arguments(logged: Any) -> list[list[object]]:
    """A sample's requests' arguments as lists: the harness's files write each request as
    {"gen_args_<i>": {"arg_<j>": ...}}; its in-memory samples as lists."""
    if isinstance(logged, Mapping):
        return [
            [request[key] for key in sorted(request, key=lambda k: int(k.rsplit("_", 1)[1]))]
            for request in (logged[key] for key in sorted(logged, key=lambda k: int(k.rsplit("_", 1)[1])))
        ]
    return [list(request) for request in logged]


def _metric_fault(name: str, value: object) -> str | None:
    """Why a logged metric is not one: a number, or a list of them (IFEval's per instruction), or
    a corpus metric's items (BLEU's reference and prediction)."""
    if isinstance(value, bool | int | float):
        return None
    if isinstance(value, list) and all(isinstance(v, bool | int | float | str) for v in value):
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
    if not isinstance(sample["resps"], list) or len(sample["resps"]) != len(arguments):
        raise ImportRefused(f"{where}: {len(arguments)} requests but not as many responses")
    responses = {key: _number(sample[key]) if numeric else sample[key] for key in ("resps", "filtered_resps")}
    return {**sample, "arguments": arguments, **responses}


def content_key(doc: object) -> str:
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


@dataclass(frozen=True)
class Match:
    """A logged sample's document, and its content when it was matched."""

    document: KnownDocument
    content: str


@dataclass(frozen=True)
class ImportedSamples(Collection[Sample]):
    """An import's matched samples, read again from its files each time they are iterated, a chunk
    at a time (never all in memory), each renumbered as the warehouse numbers its document."""

    report: Mapping[str, Any]
    files: Mapping[str, Path]  # each task's samples file
    matches: Mapping[tuple[str, int], Match]  # by (task, line)
    seed: int
    max_gen_toks: int | None

    def __len__(self) -> int:
        return len(self.matches)

    def __contains__(self, item: object) -> bool:
        return any(sample == item for sample in self)

    def __iter__(self) -> Iterator[Sample]:
        from eval_platform.benchmarks.harness import request_type_of

        for task, path in self.files.items():
            request_type = request_type_of(str(self.report["configs"][task].get("output_type", "")))
            chunk: list[dict[str, Any]] = []
            for line, sample in logged_samples(path, task, request_type):
                if (match := self.matches.get((task, line))) is None:
                    continue
                if content_key(sample["doc"]) != match.content:
                    raise ImportRefused(f"{path} line {line}: changed since it was read; import it again")
                chunk.append({**sample, "doc_id": match.document.doc_id, "document_id": match.document.document_id})
                if len(chunk) == CHUNK:
                    yield from self._samples(task, chunk)
                    chunk = []
            yield from self._samples(task, chunk)

    def _samples(self, task: str, chunk: list[dict[str, Any]]) -> list[Sample]:
        from eval_platform.benchmarks.harness import HarnessOutcome, outcome_samples

        named = outcome_samples(HarnessOutcome(dict(self.report), {task: chunk}), self.seed, (), self.max_gen_toks)
        return [replace(s, document_id=logged["document_id"]) for s, logged in zip(named, chunk, strict=True)]


@dataclass
class ImportedEvaluation:
    """An import's evaluation of one benchmark (its samples read from its files as they are
    stored), where each of its samples came from, and the imported model: its source in words,
    fingerprint and settings."""

    evaluation: Evaluation
    source: str
    fingerprint: str
    settings: dict[str, Any]
    lineage: dict[tuple[str, int, str], SampleSource] = field(default_factory=dict)
    rejections: list[ImportRejection] = field(default_factory=list)


def _scored(task: str, doc_id: int, sample: Mapping[str, Any]) -> tuple[Sample, dict[str, object]]:
    """What the results need of a sample, and no more: its metrics (for its interval) and its
    requests' shape (for a multiple-choice task's chance accuracy)."""
    metrics = {name: sample[name] for name in sample["metrics"]}
    shape = [[None, ""] if len(a) == 2 and isinstance(a[1], str) else [None] for a in sample["arguments"]]
    light = Sample(
        task=task, doc_id=doc_id, filter=str(sample["filter"]), prompt="", arguments=[], request_keys=[],
        target=None, responses=None, filtered_responses=None, metrics=metrics, doc=None,
    )  # fmt: skip
    return light, {"filter": sample["filter"], "arguments": shape}


def _matched(
    candidates: Sequence[KnownDocument], sample: Mapping[str, object], taken: Collection[tuple[str, int, str]]
) -> KnownDocument | str:
    """The known document a logged sample is of (of several alike: its own doc_id's, else the first
    not yet taken under its filter), or why none is."""
    free = [d for d in candidates if (d.task, d.doc_id, str(sample["filter"])) not in taken]
    document = next((d for d in free if d.doc_id == sample["doc_id"]), free[0] if free else None)
    if document is None:
        return "its document matches none of the warehouse's documents of its task" + (
            " not already matched by another line" if candidates else ""
        )
    if document.target is not None and document.target != str(sample["target"]):
        return f"its reference {str(sample['target'])[:80]!r} is not the warehouse's {document.target[:80]!r}"
    return document


def imported_evaluation(
    output: HarnessOutput, benchmark: Benchmark, known: Mapping[tuple[str, str], Sequence[KnownDocument]], seed: int
) -> ImportedEvaluation:
    """The output's evaluation of `benchmark` by the harness's own scoring (solver `harness`): each
    logged sample matched to a known document by (task, content key), renumbered as the warehouse
    numbers it, with the file and line it came from; a sample that matches none (or whose
    reference differs) rejected with its reason. Results are the tool's own, each with the interval
    of its matched items (a group's only where the output holds every task under it). The whole
    file is read (and refused at a fault, or where nothing matches) before anything is kept; its
    samples are read again as they are stored (`ImportedSamples`)."""
    from eval_platform.benchmarks.harness import HarnessOutcome, outcome_results, request_type_of
    from eval_platform.benchmarks.scoring import with_intervals

    tasks = benchmark_tasks(output, benchmark, {task for task, _ in known})
    if not tasks:
        raise ImportRefused(
            f"{output.results_file}: holds no task of {benchmark.name} whose documents the warehouse holds "
            f"(materialise its inputs, or evaluate a roster model on it, first)"
        )
    matches: dict[tuple[str, int], Match] = {}
    scored: list[Sample] = []
    shapes: dict[str, list[dict[str, object]]] = {}
    lineage: dict[tuple[str, int, str], SampleSource] = {}
    rejections: list[ImportRejection] = []
    for task in tasks:
        path = output.sample_files[task]
        for line, sample in logged_samples(path, task, request_type_of(output.report["configs"][task]["output_type"])):
            content = content_key(sample["doc"])
            found = _matched(known.get((task, content), ()), sample, lineage)
            if isinstance(found, str):
                excerpt = json.dumps(sample, ensure_ascii=False, default=str)[:2000]
                rejections.append(ImportRejection(str(path), line, task, sample["doc_id"], str(sample["filter"]),
                                                  found, excerpt))  # fmt: skip
                continue
            lineage[task, found.doc_id, str(sample["filter"])] = SampleSource(str(path), line, sample["doc_id"])
            matches[task, line] = Match(found, content)
            light, shape = _scored(task, found.doc_id, sample)
            scored.append(light)
            shapes.setdefault(task, []).append(shape)
    if not matches:
        first = f" (the first: {rejections[0].file} line {rejections[0].line})" if rejections else ""
        raise ImportRefused(
            f"{output.results_file}: none of its {benchmark.name} samples matches a document of the warehouse{first}"
        )
    groups = _groups(output)
    covered = {name for name in groups if group_leaves(name, groups) <= set(tasks)}
    reported = outcome_results(HarnessOutcome(output.report, shapes))
    results = with_intervals([r for r in reported if r.task in set(tasks) | covered], scored, groups)
    settings = output.settings(tasks, benchmark.num_fewshot)
    samples = ImportedSamples(
        output.report, {task: output.sample_files[task] for task in tasks}, matches, seed, settings.get("max_gen_toks")
    )
    return ImportedEvaluation(
        Evaluation("harness", settings_key(settings), samples, results),
        output.source(), output.fingerprint(tasks), settings, lineage, rejections,
    )  # fmt: skip
