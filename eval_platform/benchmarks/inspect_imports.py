"""inspect_ai logs (`.eval` files) read in as evaluations of an imported model, as lm-evaluation-harness
output folders are (`imports.py`): declared in the imports folder (`source: run.eval`), matched to the
warehouse's documents by content, kept with lineage back to the file and sample, refused whole where
the file is not what it claims.

A log is of a benchmark where its task is the benchmark's (its name, or its task's, after any
`<package>/`). Each logged sample (all its epochs) is matched to a document:
- by its document, where its metadata holds it (`doc`, as the platform's own export and the harness
  keep it) and the warehouse knows it on its task (`task` in its metadata, else the benchmark's);
- else by its prompt and reference, against the prompts the warehouse's own evaluations of the
  benchmark gave (a chat solver's, whose document is not the harness's).

Its scores become the sample's metrics (a score whose value is a mapping: each of its values): a
score named `<metric>,<filter>` (the harness's and the platform's names) is that metric under that
filter, any other name a metric under the filter `none`; inspect_ai's letters (C, I, P, N) count as
1, 0, 0.5 and 0. A sample answered over several epochs keeps each epoch's scores and answer
(`sample_scores`) and, as its value, the log's reduction (else the epochs' mean). Results are the
platform's own means and intervals of the matched samples. The file is read twice: checked and
matched, then read again as it is stored (never all in memory).
"""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_platform.benchmarks.declarations import SAMPLING_FIELDS, Benchmark, settings_key
from eval_platform.benchmarks.imports import (
    IMPORTED,
    ImportedEvaluation,
    ImportRefused,
    ImportRejection,
    KnownDocument,
    SampleSource,
    content_key,
)
from eval_platform.benchmarks.inspect_logs import LOG_SCHEMA_VERSION
from eval_platform.benchmarks.records import Evaluation, Sample

INSPECT_AI = "inspect_ai"
PLATFORM = "lm-eval-platform"  # the platform's own export names itself among the log's packages
SECRET = re.compile(r"key|token|secret|password", re.IGNORECASE)  # a model argument never kept
SAMPLE_MEMBER = re.compile(r"^samples/(?P<id>.+)_epoch_(?P<epoch>\d+)\.json$")
LETTERS = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}  # inspect_ai's value_to_float
SAMPLE_KEYS = ("id", "epoch", "input", "target", "scores")


def _open(path: Path) -> zipfile.ZipFile:
    import zipfile_zstd  # noqa: F401  (zstandard members, as inspect_ai writes them)

    try:
        return zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as error:
        raise ImportRefused(f"{path}: not an inspect_ai log (a .eval zip file): {error}") from error


def _member(log: zipfile.ZipFile, path: Path, name: str) -> Any:
    try:
        return json.loads(log.read(name))
    except (OSError, zipfile.BadZipFile, EOFError, NotImplementedError, ValueError, KeyError) as error:
        raise ImportRefused(f"{path}: {name} is not readable JSON ({error}); is the file cut short?") from error


@dataclass(frozen=True)
class InspectLog:
    """An inspect_ai log file, opened: its header and each logged sample's members (its epochs in
    order), samples in the log's order."""

    path: Path
    header: dict[str, Any]
    members: dict[str, list[str]]

    @property
    def spec(self) -> dict[str, Any]:
        """The header's `eval`: the task, the model and the run's configuration."""
        return self.header["eval"]

    @property
    def tool(self) -> str:
        """The platform (its own export) or inspect_ai (any other log, an inspect_evals task's too)."""
        return PLATFORM if PLATFORM in (self.spec.get("packages") or {}) else INSPECT_AI

    @property
    def version(self) -> str:
        return str((self.spec.get("packages") or {}).get(self.tool) or "unknown version")

    @property
    def exported(self) -> dict[str, Any]:
        """What the platform's own export says of the evaluation (empty for another tool's log)."""
        metadata = self.spec.get("metadata") or {}
        return metadata if self.tool == PLATFORM and {"solver", "settings_key"} <= set(metadata) else {}

    def model_description(self) -> str:
        """The model and its arguments, a secret's value among them (`api_key=...`) redacted."""
        args = self.spec.get("model_args") or {}
        described = ",".join(f"{key}={'[redacted]' if SECRET.search(key) else value}" for key, value in args.items())
        return " ".join(part for part in (str(self.spec.get("model")), described) if part)

    def source(self) -> str:
        return f"{self.tool} {self.version}: {self.model_description()} ({self.path})"

    def fingerprint(self) -> str:
        """The imported model's fingerprint: what the log says of the model, the tool and its version,
        and the task with its version and configuration."""
        said = {
            "tool": self.tool,
            "version": self.version,
            "model": self.model_description(),
            **{key: self.spec.get(key) for key in ("model_generate_config", "revision", "task", "task_version",
                                                   "task_args", "config", "dataset")},
            "model_fingerprint": self.exported.get("model_fingerprint"),
        }  # fmt: skip
        digest = hashlib.sha256(json.dumps(said, sort_keys=True, default=str).encode()).hexdigest()
        return f"{IMPORTED}{digest[:16]}"

    def settings(self) -> dict[str, Any]:
        """What the run measured, in the platform's terms: the export's own settings where the log is
        one, else its generation settings and epochs; with where it came from."""
        generation = self.spec.get("model_generate_config") or {}
        measured = dict(self.exported.get("settings") or {}) or {
            "num_fewshot": None, "limit": None, "max_gen_toks": generation.get("max_tokens"),
            **{key: generation[key] for key in SAMPLING_FIELDS if key in generation},
            "repeats": (self.spec.get("config") or {}).get("epochs"),
        }  # fmt: skip
        return {**measured, "tool": self.tool, "tool_version": self.version, "model": self.model_description(),
                "results_file": str(self.path)}  # fmt: skip

    def is_of(self, benchmark: Benchmark) -> bool:
        task = str(self.spec.get("task", "")).rsplit("/", 1)[-1]
        return task in {benchmark.name, benchmark.task}


def read_inspect_log(path: Path) -> InspectLog:
    """An inspect_ai log's header and sample members; refused, naming the file, where it is no zip
    (or one cut short), has no header (an unfinished run), another log schema, or a run that did
    not succeed."""
    path = Path(path)
    with _open(path) as log:
        names = log.namelist()
        if "header.json" not in names:
            raise ImportRefused(f"{path}: no header.json: not a finished inspect_ai log")
        header = _member(log, path, "header.json")
    if not isinstance(header, dict) or not isinstance(header.get("eval"), dict) or "task" not in header["eval"]:
        raise ImportRefused(f"{path}: header.json is not an inspect_ai log header (no eval.task)")
    if header.get("version") != LOG_SCHEMA_VERSION:
        raise ImportRefused(f"{path}: log schema version {header.get('version')}; this reads {LOG_SCHEMA_VERSION}")
    if header.get("status") != "success":
        raise ImportRefused(f"{path}: its run ended with status {header.get('status')!r}, not 'success'")
    members: dict[str, list[tuple[int, str]]] = {}
    for name in names:
        if match := SAMPLE_MEMBER.match(name):
            members.setdefault(match["id"], []).append((int(match["epoch"]), name))
    return InspectLog(path, header, {sid: [name for _, name in sorted(epochs)] for sid, epochs in members.items()})


def source_benchmarks(log: InspectLog, benchmarks: Mapping[str, Benchmark]) -> list[str]:
    return [name for name, benchmark in benchmarks.items() if log.is_of(benchmark)]


def _as_text(value: object) -> str:
    """A sample's input or target as text: a chat's turns as `[role]` and content."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(turn, dict) for turn in value):
        return "\n\n".join(f"[{turn.get('role')}]\n{_as_text(turn.get('content', ''))}" for turn in value)
    if isinstance(value, list):
        return "\n".join(_as_text(part) if not isinstance(part, dict) else str(part.get("text", "")) for part in value)
    return json.dumps(value)


def _value(value: object, where: str, name: str) -> float | list[object]:
    """A score's value as a metric's: a number, a letter inspect_ai counts, or a list of scalars."""
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, str) and value in LETTERS:
        return LETTERS[value]
    if isinstance(value, list) and all(isinstance(v, bool | int | float | str) for v in value):
        return value  # IFEval's per-instruction results, a corpus metric's items
    raise ImportRefused(f"{where}: score {name} is not a number: {json.dumps(value)[:80]}")


def _split(name: str) -> tuple[str, str]:
    metric, _, filter_name = name.rpartition(",")
    return (metric, filter_name) if metric else (name, "none")


def _logged(log: zipfile.ZipFile, path: Path, name: str) -> dict[str, Any]:
    """One sample member, checked: refused naming the file and member where it is no sample."""
    where = f"{path} {name}"
    sample = _member(log, path, name)
    missing = [key for key in SAMPLE_KEYS if key not in sample] if isinstance(sample, dict) else list(SAMPLE_KEYS)
    if missing or not isinstance(sample["scores"], dict | None):
        raise ImportRefused(f"{where}: not an inspect_ai sample (it lacks {missing or ['scores as a mapping']})")
    if sample["scores"] is None:  # a sample its run could not score (its `error` says why): a rejection
        return {**sample, "scores": {}}
    scores = {}
    for score_name, score in sample["scores"].items():
        if not isinstance(score, dict) or "value" not in score:
            raise ImportRefused(f"{where}: score {score_name} has no value")
        value = score["value"]  # a scorer's several values (a mapping): each its own score
        for name, each in value.items() if isinstance(value, dict) else [(score_name, value)]:
            scores[name] = {"value": _value(each, where, name), "answer": score.get("answer")}
    return {**sample, "scores": scores}


def _reductions(log: zipfile.ZipFile, path: Path) -> dict[str, dict[str, float | list[object]]]:
    """The log's reductions over epochs, by sample id and score name: of several reducers of one
    scorer, its `mean` (inspect_ai's default), else its first."""
    if "reductions.json" not in log.namelist():
        return {}
    reduced: dict[str, dict[str, float | list[object]]] = {}
    try:
        for reduction in sorted(_member(log, path, "reductions.json"), key=lambda r: r.get("reducer") != "mean"):
            for sample in reduction["samples"]:
                where, value = f"{path} reductions.json (sample {sample['sample_id']})", sample["value"]
                for name, each in value.items() if isinstance(value, dict) else [(reduction["scorer"], value)]:
                    reduced.setdefault(str(sample["sample_id"]), {}).setdefault(name, _value(each, where, name))
    except (AttributeError, KeyError, TypeError) as error:
        raise ImportRefused(f"{path}: reductions.json is not inspect_ai's reductions ({error!r})") from error
    return reduced


def prompt_key(prompt: str, target: str | None) -> str:
    """A document by the prompt it was given and its reference."""
    return hashlib.sha256(f"{prompt}\x00{target or ''}".encode()).hexdigest()


@dataclass(frozen=True)
class Logged:
    """A logged sample's document, and its match keys when it was matched (`<content key>:<prompt key>`)."""

    document: KnownDocument
    key: str


def _keys(first: Mapping[str, Any]) -> tuple[str | None, str]:
    """A logged sample's match keys: its document's content key (where its metadata holds it), and
    its prompt's and reference's."""
    doc = (first.get("metadata") or {}).get("doc")
    return content_key(doc) if doc is not None else None, prompt_key(
        _as_text(first["input"]), _as_text(first["target"])
    )


DERIVED = re.compile(r" (pass@1|mean@\d+)$")  # an item's mean over its answers: the platform derives it again


def _samples(
    epochs: Sequence[Mapping[str, Any]], found: KnownDocument, reduced: Mapping[str, float | list[object]]
) -> list[Sample]:
    """A logged document's samples, one per filter its scores (or its reductions, `reduced`) name:
    its value the reduction, else its one epoch's, else its epochs' mean; each epoch's values and
    answer kept where it has several."""
    first = epochs[0]
    names = list(dict.fromkeys([*first["scores"], *(n for n in reduced if not DERIVED.search(_split(n)[0]))]))
    filters: dict[str, list[str]] = {}
    for name in names:
        filters.setdefault(_split(name)[1], []).append(name)
    completions = [str((e.get("output") or {}).get("completion", "")) for e in epochs]
    samples = []
    for filter_name, named in filters.items():
        per_epoch = [{_split(n)[0]: e["scores"][n]["value"] for n in named if n in e["scores"]} for e in epochs]
        answers = [next((e["scores"][n]["answer"] for n in named if n in e["scores"]), None) for e in epochs]
        metrics = {}
        for name in named:
            values = [m[_split(name)[0]] for m in per_epoch if _split(name)[0] in m]
            if name in reduced:
                metrics[_split(name)[0]] = reduced[name]
            elif len(values) == 1 or (values and not all(isinstance(v, int | float) for v in values)):
                metrics[_split(name)[0]] = values[0]
            elif values:
                metrics[_split(name)[0]] = sum(values) / len(values)
        samples.append(
            Sample(
                task=found.task, doc_id=found.doc_id, filter=filter_name, prompt=_as_text(first["input"]),
                arguments=[], request_keys=[], target=_as_text(first["target"]), responses=[completions],
                filtered_responses=[answers[0] if answers[0] is not None else completions[0]], metrics=metrics,
                doc=(first.get("metadata") or {}).get("doc"), document_id=found.document_id,
                sample_answers=[str(a) if a is not None else c for a, c in zip(answers, completions, strict=True)]
                if len(epochs) > 1 else None,
                sample_metrics=[{k: v for k, v in m.items() if isinstance(v, int | float)} for m in per_epoch]
                if len(epochs) > 1 else None,
            )
        )  # fmt: skip
    return samples


@dataclass(frozen=True)
class InspectSamples(Collection[Sample]):
    """An inspect_ai import's matched samples, read again from the log each time they are iterated,
    a document at a time, each checked against what was matched."""

    log: InspectLog
    matches: Mapping[str, Logged]  # by logged sample id
    count: int

    def __len__(self) -> int:
        return self.count

    def __contains__(self, item: object) -> bool:
        return any(sample == item for sample in self)

    def __iter__(self) -> Iterator[Sample]:
        with _open(self.log.path) as log:
            reductions = _reductions(log, self.log.path)
            for sample_id, names in self.log.members.items():
                if (match := self.matches.get(sample_id)) is None:
                    continue
                epochs = [_logged(log, self.log.path, name) for name in names]
                if ":".join(map(str, _keys(epochs[0]))) != match.key:
                    raise ImportRefused(f"{self.log.path} {names[0]}: changed since it was read; import it again")
                yield from _samples(epochs, match.document, reductions.get(str(epochs[0]["id"]), {}))


def _found(
    candidates: Sequence[KnownDocument], first: Mapping[str, Any], taken: Collection[tuple[str, int]]
) -> KnownDocument | str:
    """The known document a logged sample is of (of several alike: its own doc_id's, else the first
    not yet taken), or why none is."""
    free = [d for d in candidates if (d.task, d.doc_id) not in taken]
    own = (first.get("metadata") or {}).get("doc_id")
    document = next((d for d in free if d.doc_id == own), free[0] if free else None)
    if document is None:
        return "its document matches none of the warehouse's documents" + (
            " not already matched by another sample" if candidates else ""
        )
    target = _as_text(first["target"])
    if document.target is not None and document.target != target:
        return f"its reference {target[:80]!r} is not the warehouse's {document.target[:80]!r}"
    return document


def _matched(
    first: Mapping[str, Any],
    task: str,
    known: Mapping[tuple[str, str], Sequence[KnownDocument]],
    prompts: Mapping[str, Sequence[KnownDocument]],
    taken: set[tuple[str, int]],
    reduced: Mapping[str, float | list[object]],
) -> tuple[KnownDocument | str, str]:
    """A logged sample's document (by its document's content key, else, as another solver's, by its
    prompt and reference), or why it has none; and its match keys (`<content key>:<prompt key>`)."""
    by_document, by_prompt = _keys(first)
    found = _found(known.get((task, by_document), ()) if by_document else (), first, taken)
    if isinstance(found, str) and prompts.get(by_prompt):  # e.g. a chat solver's own reference
        found = _found(prompts[by_prompt], first, taken)
    if not first["scores"] and not reduced:
        found = f"it has no scores (its run's error: {str(first.get('error'))[:200]})"
    return found, f"{by_document}:{by_prompt}"


def inspect_evaluation(
    log: InspectLog,
    benchmark: Benchmark,
    known: Mapping[tuple[str, str], Sequence[KnownDocument]],
    prompts: Mapping[str, Sequence[KnownDocument]],
) -> ImportedEvaluation:
    """The log's evaluation of `benchmark`: each logged sample matched to a known document by its
    document's content key (`known`, by task) or its prompt and reference (`prompts`), with the file
    and member it came from; one that matches none (or has no scores: its run failed on it) rejected
    with its reason; results the platform's
    means and intervals of the matched samples. Refused at the first fault, or where nothing matches."""
    from eval_platform.benchmarks.scoring import results_by_task, sampled_results

    if not log.is_of(benchmark):
        raise ImportRefused(f"{log.path}: its task {log.spec.get('task')!r} is not {benchmark.name}")
    own_task = benchmark.task or benchmark.name
    matches: dict[str, Logged] = {}
    lineage: dict[tuple[str, int, str], SampleSource] = {}
    rejections: list[ImportRejection] = []
    scored: list[Sample] = []
    taken: set[tuple[str, int]] = set()
    with _open(log.path) as opened:
        reductions = _reductions(opened, log.path)
        for position, (sample_id, names) in enumerate(log.members.items(), start=1):
            epochs = [_logged(opened, log.path, name) for name in names]
            first = epochs[0]
            task = str((first.get("metadata") or {}).get("task") or own_task)
            reduced = reductions.get(str(first["id"]), {})
            found, keys = _matched(first, task, known, prompts, taken, reduced)
            source = f"{log.path}!{names[0]}"
            own = [(first.get("metadata") or {}).get("doc_id"), first["id"], position]
            number = next(n for n in own if isinstance(n, int) and not isinstance(n, bool))  # its doc_id there
            if isinstance(found, str):
                excerpt = json.dumps(first, ensure_ascii=False, default=str)[:2000]
                rejections.append(ImportRejection(source, position, task, number, "none", found, excerpt))
                continue
            matches[sample_id] = Logged(found, keys)
            taken.add((found.task, found.doc_id))
            for sample in _samples(epochs, found, reduced):
                lineage[sample.task, sample.doc_id, sample.filter] = SampleSource(source, position, number)
                scored.append(Sample(
                    task=sample.task, doc_id=sample.doc_id, filter=sample.filter, prompt="", arguments=[],
                    request_keys=[], target=None, responses=None, filtered_responses=None, metrics=sample.metrics,
                    doc=None, sample_answers=sample.sample_answers, sample_metrics=sample.sample_metrics,
                ))  # fmt: skip
    if not matches:
        first = f" (the first: {rejections[0].file})" if rejections else ""
        raise ImportRefused(f"{log.path}: none of its samples matches a document of the warehouse{first}")
    results = results_by_task(scored, benchmark.name, None) + sampled_results(scored, {}, {})
    settings = log.settings()
    exported = log.exported
    solver = str(exported.get("solver") or INSPECT_AI)
    key = str(exported.get("settings_key") or settings_key(settings))
    samples = InspectSamples(log, matches, len(scored))
    return ImportedEvaluation(
        Evaluation(solver, key, samples, results), log.source(), log.fingerprint(), settings, lineage, rejections
    )


def is_inspect_log(source: Path) -> bool:
    """An import's source is an inspect_ai log (a `.eval` file), else an lm-evaluation-harness output."""
    return Path(source).suffix == ".eval"


def held_benchmarks(source: Path, benchmarks: Mapping[str, Benchmark]) -> list[str]:
    """The declared benchmarks an import's source holds: an inspect_ai log's task's, or those an
    lm-evaluation-harness output holds tasks of."""
    from eval_platform.benchmarks.imports import imported_benchmarks, read_harness_output

    if is_inspect_log(source):
        return source_benchmarks(read_inspect_log(source), benchmarks)
    return imported_benchmarks(read_harness_output(source), benchmarks)
