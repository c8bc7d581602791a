"""The `harness` solver: a benchmark's harness task asked and scored by lm-evaluation-harness itself.

The harness builds the requests (its templates, few-shot sampler and seed, chat template), the
platform's engine answers them through `EngineLM`, and the harness's filters, `process_results` and
aggregation score them (`simple_evaluate`).

A dataset's documents reach the harness the way any local data does: each task's documents (in
the task's layout, in order) and its few-shot pool become the task's local files, its registry
only the task's own folder of the harness's YAML files. So the harness renders each document as it
would from its own copy of the data, and a later document draws its examples as the harness would
on the file without the rows this platform rejected. Each sample names its document, and the
few-shot rows drawn into its prompt.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from eval_engine import DEFAULT_SEED
from eval_platform.benchmarks.declarations import Benchmark, EvaluationSettings, settings_key
from eval_platform.benchmarks.documents import Document, build_documents, task_of
from eval_platform.benchmarks.harness import (
    HarnessRun,
    build_tasks,
    evaluate,
    outcome_results,
    outcome_samples,
    own_task_folder,
    record_fewshot_draws,
    registered_config,
    write_whole,
)
from eval_platform.benchmarks.records import Evaluation, Sample
from eval_platform.benchmarks.scoring import mean_results, sampled_results, with_budget_shares, with_intervals
from eval_platform.benchmarks.solvers.base import SOLVERS, EvaluationJob

if TYPE_CHECKING:
    from lm_eval.api.instance import Instance
    from lm_eval.api.task import Task

    from eval_platform.common.models import LanguageModel


def jsonl_file(folder: Path, name: str, rows: Sequence[Mapping[str, object]]) -> str:
    """The rows as a JSONL file in `folder` named by its content, written once: the same rows keep
    one path and modification time, so `datasets` finds them in its cache instead of caching a copy
    per run."""
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path = folder / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:20]}.jsonl"
    if not path.exists():
        write_whole(path, text.encode("utf-8"))
    return str(path)


def task_files(
    task: str,
    registry: tuple[str, ...],
    documents: Sequence[Document],
    pool: Sequence[Mapping[str, object]],
    folder: Path,
) -> dict[str, str]:
    """A task's splits as local files in `folder`: the split it evaluates, and its few-shot (or
    training) split where a pool is given, with the documents' columns only (`datasets` reads the
    files as one dataset, of one schema)."""
    config = registered_config(task, registry, include_defaults=False)
    evaluated = config.get("test_split") or config.get("validation_split")
    if not evaluated:
        raise ValueError(f"harness task {task} names no test_split or validation_split to evaluate")
    files = {evaluated: jsonl_file(folder, f"{task}-{evaluated}", [d.doc for d in documents])}
    fewshot_split = config.get("fewshot_split") or config.get("training_split")
    if pool and fewshot_split and fewshot_split != evaluated:
        columns = set(documents[0].doc)
        rows = [{k: v for k, v in row.items() if k in columns} for row in pool]
        files[fewshot_split] = jsonl_file(folder, f"{task}-{fewshot_split}", rows)
    return files


class DatasetRun:
    """A dataset's documents as harness tasks over local files: each task's documents and pool."""

    def __init__(self, job: EvaluationJob) -> None:
        folder = job.benchmark.task_folder
        self.registry = (own_task_folder(folder),) if folder else tuple(job.settings.include_path)
        by_task: dict[str | None, list[Document]] = defaultdict(list)
        for document in job.documents:
            by_task[document.task].append(document)
        self.unnamed = by_task.pop(None, [])  # a row lacking the field that names its task
        self.documents = {task: documents for task, documents in by_task.items() if task is not None}
        shots = job.settings.num_fewshot
        if shots and not job.pool:
            source = job.benchmark.fewshot.describe() if job.benchmark.fewshot else "none declared"
            raise ValueError(
                f"{job.benchmark.name}: no few-shot examples for {shots}-shot: load its few-shot split ({source}) "
                "with benchmark_fewshot_rows' source"
            )
        if not self.documents:
            raise ValueError(
                f"{job.benchmark.name}: no document names its harness task {job.benchmark.task} (the rows lack "
                f"its field): the harness cannot ask them; the chat solvers can"
            )
        self.pool: dict[str | None, list[tuple[str, Mapping[str, object]]]] = defaultdict(list)
        for row_id, row in job.pool:
            self.pool[task_of(job.benchmark.task, row)].append((row_id, row))
        data_files = {
            task: task_files(
                task, self.registry, documents, [row for _, row in self.pool[task]], job.environment.harness_data
            )
            for task, documents in self.documents.items()
        }
        settings = job.settings.model_copy(update={"include_path": self.registry, "data_files": data_files})
        self.run = HarnessRun(tuple(str(task) for task in self.documents), settings, include_defaults=False)

    def drawn_ids(self, task: str, positions: list[int]) -> list[str]:
        """The few-shot rows at `positions` of the task's few-shot split: its pool, else its own
        documents (the harness draws from the evaluated split, never a document's own row)."""
        source = [row_id for row_id, _ in self.pool[task]] or [d.source_row_id for d in self.documents[task]]
        return [source[position] for position in positions]

    def named(self, samples: list[Sample], draws: Mapping[str, list[list[int]]]) -> list[Sample]:
        """The samples with their documents and the few-shot rows drawn for them."""
        named = []
        for sample in samples:
            document = self.documents[sample.task][sample.doc_id]
            drawn = draws.get(sample.task, [])
            fewshot = self.drawn_ids(sample.task, drawn[sample.doc_id]) if sample.doc_id < len(drawn) else []
            named.append(Sample(**{**sample.__dict__, "document_id": document.document_id, "fewshot_ids": fewshot}))
        return named


class HarnessSolver:
    """The harness task's own requests, filters and metrics (`simple_evaluate`), for any benchmark."""

    name = "harness"

    def refusal(self, benchmark: Benchmark) -> str | None:
        return None

    def settings_key(self, settings: EvaluationSettings) -> str:
        return settings_key(settings.describe())

    def evaluate(self, job: EvaluationJob) -> Evaluation:
        from eval_platform.benchmarks.engine_lm import EngineLM

        settings = job.settings
        dataset = DatasetRun(job) if job.benchmark.is_dataset else None
        run = (
            dataset.run if dataset else HarnessRun((settings.task,), settings, index_dir=job.environment.harness_index)
        )
        tasks = build_tasks(run)
        leaves = cast("list[Task]", tasks)  # a dataset's documents' tasks: no group (read only for a dataset)
        recorders = {task.config.task: record_fewshot_draws(task) for task in leaves} if dataset else {}
        seed = DEFAULT_SEED if settings.seed is None else settings.seed
        lm = EngineLM(job.model, job.batch_size, job.answering(), settings.reasoning_end, settings.max_gen_toks, seed)
        outcome = evaluate(run, tasks, lm)
        samples = outcome_samples(outcome, seed, tasks, settings.max_gen_toks)
        groups = dict(outcome.results.get("group_subtasks", {}))
        results = with_intervals(outcome_results(outcome), samples, groups)
        notes = []
        if dataset:
            samples = dataset.named(samples, {task: record() for task, record in recorders.items()})
            if dataset.unnamed:
                notes.append(
                    f"{len(dataset.unnamed)} documents name no harness task (their rows lack a field of "
                    f"{job.benchmark.task}): not asked by the harness"
                )
            if len(dataset.documents) > 1:  # the benchmark's own number over all of its tasks' documents
                shots = next((r.num_fewshot for r in results if r.num_fewshot is not None), settings.num_fewshot)
                results += mean_results(samples, job.benchmark.name, shots, group=True)
                groups[job.benchmark.name] = list(dataset.documents)
        shots = {result.task: result.num_fewshot for result in results}
        results = with_budget_shares(results + sampled_results(samples, groups, shots), samples, lm.answers, groups)
        return Evaluation(self.name, self.settings_key(settings), samples, results, lm.answers, lm.model_seconds, notes)


SOLVERS.add(HarnessSolver())


def built_instances(job: EvaluationJob) -> Iterator[tuple[Task, int, list[Instance], list[str]]]:
    """Each of a dataset's documents' requests as the harness builds them, without asking them: its
    task (whose `process_results` scores the answers), its doc_id, its instances in order (each
    with its `doc` and `args`) and the few-shot rows drawn into them."""
    from eval_platform.benchmarks.declarations import FEWSHOT_SEED

    dataset = DatasetRun(job)
    for task in cast("list[Task]", build_tasks(dataset.run)):  # a dataset's documents' tasks: no group
        if job.settings.num_fewshot is not None:
            task.set_config(key="num_fewshot", value=job.settings.num_fewshot)
        task.set_fewshot_seed(seed=FEWSHOT_SEED)
        draws = record_fewshot_draws(task)
        task.build_all_requests()
        drawn = draws()
        instances: dict[int, list[Instance]] = defaultdict(list)
        for instance in sorted(task.instances, key=lambda i: (i.doc_id, i.idx)):
            instances[cast("int", instance.doc_id)].append(instance)  # set by every built instance
        for doc_id, asked in instances.items():
            fewshot = dataset.drawn_ids(task.config.task, drawn[doc_id]) if doc_id < len(drawn) else []
            yield task, doc_id, asked, fewshot


def built_requests(
    job: EvaluationJob,
) -> dict[tuple[str, int], tuple[list[tuple[str | dict[str, object], ...]], list[str]]]:
    """Each of a dataset's documents' requests as the harness builds them, and the few-shot rows
    drawn into them, by (task, doc_id): what the `harness` solver asks the model, without asking it."""
    return {
        (task.config.task, doc_id): ([tuple(instance.args) for instance in asked], fewshot)
        for task, doc_id, asked, fewshot in built_instances(job)
    }


def rows_requests(
    benchmark: Benchmark,
    rows: Sequence[tuple[str, Mapping[str, object]]],
    fewshot_rows: Sequence[tuple[str, Mapping[str, object]]] = (),
    settings: EvaluationSettings | None = None,
) -> dict[tuple[str, int], tuple[list[tuple[str | dict[str, object], ...]], list[str]]]:
    """`built_requests` of a dataset's raw rows (and few-shot rows), under `settings` (default: the
    declaration's): what the `harness` solver would ask a model about them."""
    built = build_documents(benchmark, rows, fewshot_rows)
    no_model = cast("LanguageModel", None)  # nothing is asked
    settings = settings or benchmark.evaluation_settings()
    return built_requests(EvaluationJob(benchmark, settings, no_model, documents=built.documents, pool=built.pool))
