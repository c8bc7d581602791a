"""Evaluations written out as inspect_ai logs: the `.eval` file `inspect_ai.log.read_eval_log` reads
and `inspect view` opens (its log schema version 2: a zip of one JSON file per sample and epoch, the
samples' summaries and reductions, and a header of the run and its results).

inspect_ai cannot share the platform's interpreter (its pins move datasets' fsspec), so the file is
written here with the standard library, deflate-compressed as inspect_ai's own logs were before
zstandard, and proven by inspect_ai's own reader in a process of its own
(tests/benchmarks/test_exports.py). Written a sample at a time; what is kept until the end is each
sample's summary (its input shortened) and reductions, for the log's last members.

An evaluation (a benchmark, a model, a settings key and a solver) becomes one log:
- a sample per document (id `<task>:<doc_id>`) and answer: a document answered k times (a sampled
  task's repeats) is k epochs, each scored by its own answer (`sample_scores`); one answered once is
  epoch 1, scored by its sample's metrics;
- a score per metric and filter, named as the harness names them (`acc,none`), with what the
  filter took as its answer; the reductions hold each sample's own metric values and, for a
  document answered k times, the mean of its answers' (`exact_match pass@1,<filter>`, or
  `<metric> mean@k` for values other than 0 and 1), as the `document_values` view names them;
- the benchmark's results (its task's, or its group's) as the log's results, every task's in their
  metadata; the model's fingerprint, source, settings key, solver and settings in the eval's metadata.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import groupby
from pathlib import Path
from typing import Any, TypedDict

LOG_SCHEMA_VERSION = 2  # inspect_ai's log schema the files follow
SCALARS = (str, int, float)  # bool is an int
SUMMARY_CHARS = 1000  # a summary's input and target, at most (inspect_ai's own keep 5,120: memory, at scale)


class ExportedResult(TypedDict):
    """A `results` row as an export reads it (`EvaluationStore.exported_evaluations`)."""

    task: str
    is_group: bool
    metric: str
    filter: str
    value: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    n: int | None
    num_fewshot: int | None


class AnswerScore(TypedDict):
    """One answer's value of one metric, of a document answered several times (`sample_scores`)."""

    sample: int
    answer: str | None
    metric: str
    value: float


class ExportedSample(TypedDict):
    """A `samples` row as an export reads it (`EvaluationStore.exported_samples`): its JSON columns as
    text, and its answers' scores where it was answered several times."""

    task: str
    doc_id: int
    filter: str
    document_id: str | None
    prompt: str
    target: str | None
    request_keys: list[str] | None
    arguments: str
    responses: str | None
    filtered_responses: str | None
    metrics: str
    doc: str | None
    answer_scores: list[AnswerScore] | None


@dataclass(frozen=True)
class ExportedEvaluation:
    """An evaluation to export: its `evaluations` row and its `results` rows."""

    benchmark: str
    model: str
    model_source: str
    model_fingerprint: str
    settings_key: str
    solver: str
    settings: dict[str, object]
    run_id: str | None
    evaluated_at: datetime
    results: list[ExportedResult] = field(default_factory=list)

    def inspect_model(self) -> str:
        """The model as inspect_ai names one, `<provider>/<model>`: the model's source, a local
        model's (Hugging Face weights, `local/...`) under inspect_ai's `hf` provider
        (`hf/smollm2-135m-instruct`), an API model's litellm string as it is (`openai/gpt-4o-mini`)."""
        provider, _, name = self.model_source.partition("/")
        return f"hf/{name}" if provider == "local" and name else self.model_source

    def file_name(self) -> str:
        """`<benchmark>_<model>_<solver>_<settings key>.eval`, each part safe for any file system."""
        parts = (self.benchmark, self.model, self.solver, self.settings_key)
        return "_".join(re.sub(r"[^\w.-]+", "-", part) for part in parts) + ".eval"


def sample_id(task: str, doc_id: int) -> str:
    return f"{task}:{doc_id}"


def score_name(metric: str, filter_name: str) -> str:
    return f"{metric},{filter_name}"


def score_value(value: object) -> object:
    """A metric's value as inspect_ai's `Score.value` holds it: a scalar or a list of scalars as it
    is, anything else (a corpus metric's nested items, a missing value) as its JSON text."""
    if isinstance(value, SCALARS) or (isinstance(value, list) and all(isinstance(v, SCALARS) for v in value)):
        return value
    return json.dumps(value)


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _answer(filtered: object, choices: Sequence[str] | None) -> str:
    """What a filter took out of a document's answers, as text: a generation's first answer, or a
    multiple-choice document's continuation of the highest log-likelihood."""
    if isinstance(filtered, list) and len(filtered) == 1 and isinstance(filtered[0], str):
        return filtered[0]
    if choices and isinstance(filtered, list) and len(filtered) == len(choices):
        likelihoods = [f[0] if isinstance(f, list) else f for f in filtered]
        if all(isinstance(value, int | float) for value in likelihoods):
            return choices[max(range(len(choices)), key=likelihoods.__getitem__)]
    return _text(filtered)


def _choices(arguments: Sequence[Sequence[Any]]) -> list[str] | None:
    """A multiple-choice document's continuations (its requests are (context, continuation) pairs)."""
    if len(arguments) > 1 and all(len(a) == 2 and all(isinstance(p, str) for p in a) for a in arguments):
        return [a[1] for a in arguments]
    return None


def _loaded(row: Mapping[str, object], name: str) -> Any:
    value = row[name]
    return json.loads(value) if isinstance(value, str) else value


def log_samples(
    rows: Iterable[ExportedSample], model: str
) -> Iterator[tuple[dict[str, Any], dict[str, dict[str, object]]]]:
    """Each document's inspect_ai samples (one per epoch) with its reductions (score name to its
    value and answer), from its `samples` rows ordered by task and doc_id (one per filter), each
    with `answer_scores`: its `sample_scores` rows (sample, answer, metric, value), if it was answered
    several times."""
    for (task, doc_id), group in groupby(rows, key=lambda row: (row["task"], row["doc_id"])):
        filters = list(group)
        first = filters[0]
        choices = _choices(_loaded(first, "arguments"))
        reductions: dict[str, dict[str, object]] = {}
        epochs: dict[int, dict[str, dict[str, object]]] = {}
        for row in filters:
            answer = _answer(_loaded(row, "filtered_responses"), choices)
            for metric, value in _loaded(row, "metrics").items():
                reductions[score_name(metric, row["filter"])] = {"value": score_value(value), "answer": answer}
            answered: dict[str, list[float]] = {}
            for each in _loaded(row, "answer_scores") or []:
                scores = epochs.setdefault(each["sample"] + 1, {})
                scores[score_name(each["metric"], row["filter"])] = {"value": each["value"], "answer": each["answer"]}
                answered.setdefault(each["metric"], []).append(each["value"])
            for metric, values in answered.items():  # the item's mean, named as `document_values` names it
                mean = "pass@1" if all(v in (0, 1) for v in values) else f"mean@{len(values)}"
                reductions[score_name(f"{metric} {mean}", row["filter"])] = {"value": sum(values) / len(values)}
        epochs = epochs or {1: reductions}
        responses = _loaded(first, "responses")
        metadata = {
            "task": task, "doc_id": doc_id, "document_id": first["document_id"],
            "filters": [r["filter"] for r in filters], "request_keys": list(first["request_keys"] or []),
            "doc": _loaded(first, "doc"),
        }  # fmt: skip
        for epoch, scores in sorted(epochs.items()):
            completion = _epoch_completion(responses, epoch, scores)
            sample = {
                "id": sample_id(task, doc_id),
                "epoch": epoch,
                "input": first["prompt"],
                "target": first["target"] or "",
                "choices": choices,
                "messages": [
                    {"role": "user", "content": first["prompt"], "source": "input"},
                    {"role": "assistant", "content": completion, "source": "generate", "model": model},
                ],
                "output": {
                    "model": model,
                    "choices": [
                        {"message": {"role": "assistant", "content": completion, "model": model}, "stop_reason": "stop"}
                    ],  # fmt: skip
                    "completion": completion,
                },
                "scores": scores,
                "metadata": metadata,
            }
            yield sample, reductions if epoch == 1 else {}


def _epoch_completion(responses: object, epoch: int, scores: Mapping[str, Mapping[str, object]]) -> str:
    """An epoch's answer as the model gave it: a generation's k-th answer, or a log-likelihood
    request's numbers as text."""
    if isinstance(responses, list) and responses and all(isinstance(r, list) for r in responses):
        answers = responses[0]
        if len(answers) >= epoch and isinstance(answers[epoch - 1], str):
            return answers[epoch - 1]
    return next((str(s["answer"]) for s in scores.values() if s.get("answer") is not None), _text(responses))


def _summary(sample: Mapping[str, Any]) -> dict[str, Any]:
    """A sample's summary (the list inspect view shows), its input and target shortened as
    inspect_ai shortens them (the whole sample is its own member)."""
    keys = ("id", "epoch", "choices", "scores")
    short = {key: sample[key][:SUMMARY_CHARS] for key in ("input", "target")}
    return {**{key: sample[key] for key in keys}, **short, "completed": True,
            "metadata": {k: sample["metadata"][k] for k in ("task", "doc_id")},
            "message_count": len(sample["messages"])}  # fmt: skip


def _metrics(result: ExportedResult) -> dict[str, dict[str, object]]:
    """A result's value and standard error as inspect_ai's metrics (a number each: one not
    computed is left out)."""
    values = {result["metric"]: result["value"], "stderr": result.get("stderr")}
    return {name: {"name": name, "value": value} for name, value in values.items() if value is not None}


def headline(benchmark: str, results: Sequence[ExportedResult]) -> dict[str, ExportedResult]:
    """The results a log reports, by score name: the benchmark's own (its task's, or its group's,
    named after it), else those of its only task, else every task's, each named `<task>/<metric>,<filter>`."""
    tasks = {r["task"] for r in results}
    own = [r for r in results if r["task"] == benchmark] or (list(results) if len(tasks) == 1 else [])
    if own:
        return {score_name(r["metric"], r["filter"]): r for r in own}
    return {f"{r['task']}/{score_name(r['metric'], r['filter'])}": r for r in results}


def _header(
    evaluation: ExportedEvaluation, version: str, documents: int, epochs: int, score_names: Sequence[str]
) -> dict[str, object]:
    """The log's header: the run, its plan and its results (the benchmark's own task's or group's
    rows as inspect_ai's scores, every task's in their metadata)."""
    created = evaluation.evaluated_at.isoformat()
    model = evaluation.inspect_model()
    identity = "|".join((evaluation.benchmark, evaluation.model, evaluation.settings_key, evaluation.solver))
    digest = hashlib.sha256(identity.encode()).hexdigest()[:22]
    scores = [
        {
            "name": name, "scorer": name,
            "reducer": None, "scored_samples": r.get("n") or documents,
            "unscored_samples": 0, "metrics": _metrics(r), "metadata": {"task": r["task"]},
        }
        for name, r in headline(evaluation.benchmark, evaluation.results).items()
    ]  # fmt: skip
    return {
        "version": LOG_SCHEMA_VERSION,
        "status": "success",
        "eval": {
            "eval_id": digest, "run_id": evaluation.run_id or digest, "created": created,
            "task": evaluation.benchmark, "task_id": digest, "task_version": 0,
            "dataset": {"name": evaluation.benchmark, "samples": documents},
            "model": model, "config": {"epochs": epochs}, "packages": {"lm-eval-platform": version},
            "scorers": [{"name": name, "options": {}, "metrics": [], "metadata": {}} for name in score_names],
            "metadata": {
                "model": evaluation.model, "model_source": evaluation.model_source,
                "model_fingerprint": evaluation.model_fingerprint, "settings_key": evaluation.settings_key,
                "solver": evaluation.solver, "settings": evaluation.settings,
            },
        },
        "plan": {"name": "plan", "steps": [{"solver": evaluation.solver, "params": {}}], "config": {}},
        "results": {
            "total_samples": documents, "completed_samples": documents, "scores": scores,
            "metadata": {"results": evaluation.results},
        },
        "stats": {"started_at": created, "completed_at": created},
    }  # fmt: skip


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def write_inspect_log(path: Path, evaluation: ExportedEvaluation, rows: Iterable[ExportedSample], version: str) -> int:
    """The evaluation as an inspect_ai log at `path` (replaced whole: written beside it, then moved
    over it), its samples from `rows` (as `log_samples` takes them); the number of samples written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(handle)
    partial = Path(name)  # its own, beside the log: two exports of one partition never share it
    summaries: list[str] = []
    reductions: dict[str, list[str]] = {}
    documents = epochs = 0
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as log:
            start = {"version": LOG_SCHEMA_VERSION, **{k: v for k, v in _header(evaluation, version, 0, 1, []).items()
                                                       if k in ("eval", "plan")}}  # fmt: skip
            log.writestr("_journal/start.json", _dumps(start))
            for sample, reduced in log_samples(rows, evaluation.inspect_model().partition("/")[2]):
                log.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", _dumps(sample))
                summaries.append(_dumps(_summary(sample)))
                epochs = max(epochs, sample["epoch"])
                documents += sample["epoch"] == 1
                for name, score in reduced.items():
                    reductions.setdefault(name, []).append(_dumps({**score, "sample_id": sample["id"]}))
            log.writestr("summaries.json", "[" + ",".join(summaries) + "]")
            reduced_json = ",".join(
                f'{{"scorer": {_dumps(name)}, "reducer": null, "samples": [{",".join(samples)}]}}'
                for name, samples in reductions.items()
            )
            log.writestr("reductions.json", f"[{reduced_json}]")
            header = _header(evaluation, version, documents, max(epochs, 1), list(reductions))
            log.writestr("header.json", _dumps(header))
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return len(summaries)


def export_inspect_logs(
    evaluations: Sequence[ExportedEvaluation],
    samples_of: Callable[[ExportedEvaluation], Iterable[ExportedSample]],
    folder: Path,
    version: str,
) -> dict[Path, int]:
    """Each evaluation as an inspect_ai log in `folder` (`ExportedEvaluation.file_name`), its rows
    from `samples_of`; each file written and how many samples it holds."""
    return {
        (path := folder / evaluation.file_name()): write_inspect_log(path, evaluation, samples_of(evaluation), version)
        for evaluation in evaluations
    }
