"""The benchmarks in lm-evaluation-harness's format, built and scored by the harness's own task code.

A spec names its harness task (`harness_task`; MMLU's is one per subject, `mmlu_{subject}`, filled
from each row), and where the seed's layout of a row differs from the one that task reads (MMLU's
`options`, TruthfulQA's `choices` and `label`), how to give it the task's (`harness_layout`). The
prompts' raw rows, in the source's order, and the few-shot split become that
task's local data through the route every harness benchmark takes (`harness_tasks.build_tasks` with
`data_files`). So the harness renders each document's requests with its own templates, few-shot
sampler and seed, delimiters, stop sequences and token budget, and scores stored answers with its
own filters and `process_results`, the steps of its `evaluate()`. Rows this platform rejects are not
handed to the harness: a later row draws its examples as the harness would on the file without them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from eval_platform.benchmarks.harness_tasks import FEWSHOT_SEED, HarnessRun, build_tasks, registered_config, write_whole
from eval_platform.benchmarks.scoring import ItemScore

# where a benchmark's rows are handed to the harness as files (EVAL_HARNESS_DATA to move it)
DATA_FILES = Path(os.environ.get("EVAL_HARNESS_DATA", Path.home() / ".cache" / "eval_platform" / "harness_format"))


class HarnessFormatted(Protocol):
    """What this module reads of a benchmark's spec (specs.BenchmarkSpec)."""

    harness_task: str  # e.g. `arc_easy`; fields of a row fill `{subject}`
    harness_folder: str  # the task's folder under lm_eval/tasks
    harness_metric_names: Mapping[str, str]  # the harness's metric -> the platform's name for it
    harness_layout: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None  # another layout -> the task's


@dataclass(frozen=True)
class HarnessItem:
    """The harness's requests for one document: a multiple-choice document's (context, continuation)
    pairs with its choices, or a generation's context with its `generation_kwargs` (stop sequences,
    token budget); the few-shot rows in its context, by id."""

    contexts: tuple[str, ...]
    continuations: tuple[str, ...] = ()
    choice_texts: tuple[str, ...] = ()
    generation_kwargs: Mapping[str, Any] | None = None
    fewshot_ids: tuple[str, ...] = ()

    def requests(self) -> list[tuple[str, str]]:
        return list(zip(self.contexts, self.continuations, strict=True))

    @property
    def prompt(self) -> str:
        """The whole prompt of a generation item."""
        return self.contexts[0]

    def fields(self) -> dict[str, Any]:
        """Its fields as a prompt record carries them (`BenchmarkStore.load_prompts`)."""
        return {
            "contexts": list(self.contexts),
            "continuations": list(self.continuations),
            "choice_texts": list(self.choice_texts),
            "generation_kwargs": self.generation_kwargs,
            "fewshot_ids": list(self.fewshot_ids),
        }


@dataclass
class HarnessDocuments:
    """One harness task over some of a benchmark's documents: `keys[doc_id]` names each document
    (its prompt id), `fewshot_ids[doc_id]` the few-shot rows drawn for it (once requests are built)."""

    task: Any
    keys: list[str]
    fewshot_ids: list[list[str]] = field(default_factory=list)


def _jsonl_file(name: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as a JSONL file named by its content, written once: the same rows keep one path and
    modification time, so `datasets` finds them in its cache instead of caching a copy per run."""
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    path = DATA_FILES / f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:20]}.jsonl"
    if not path.exists():
        write_whole(path, text.encode("utf-8"))
    return str(path)


def _harness_run(spec: HarnessFormatted, name: str, files: Mapping[str, str] | None = None) -> HarnessRun:
    """The route's run of one task: its registry only the task's own folder of the harness's YAMLs."""
    import lm_eval

    folder = str(Path(lm_eval.__file__).parent / "tasks" / spec.harness_folder)
    return HarnessRun(name, include_path=(folder,), include_defaults=False, data_files={name: files} if files else {})


def _data_files(
    run: HarnessRun, rows: Sequence[Mapping[str, Any]], pool: Sequence[Mapping[str, Any]]
) -> dict[str, str]:
    """The task's splits as local files: the split it evaluates, and its few-shot (or training)
    split where a pool is given, with the evaluated rows' columns only (`datasets` reads the files
    as one dataset, of one schema)."""
    name = run.task
    config = registered_config(name, run.include_path, run.include_defaults)
    evaluated = config.get("test_split") or config.get("validation_split")
    files = {evaluated: _jsonl_file(f"{name}-{evaluated}", rows)}
    fewshot_split = config.get("fewshot_split") or config.get("training_split")
    if pool and fewshot_split and fewshot_split != evaluated:
        columns = set(rows[0])
        files[fewshot_split] = _jsonl_file(
            f"{name}-{fewshot_split}", [{k: v for k, v in row.items() if k in columns} for row in pool]
        )
    return files


def _recorded_draws(task: Any) -> list[list[Any]]:
    """The examples the task's sampler returns, one list per document as its requests are built."""
    draws: list[list[Any]] = []
    sampler = getattr(task, "sampler", None)
    if sampler is not None:
        sample = sampler.sample

        def recording(*args, **kwargs):
            drawn = sample(*args, **kwargs)
            draws.append(list(drawn))
            return drawn

        sampler.sample = recording
    return draws


def harness_documents(
    spec: HarnessFormatted,
    docs: Sequence[tuple[str, Mapping[str, Any]]],
    pool: Sequence[tuple[str, Mapping[str, Any]]] = (),
    shots: int = 0,
) -> list[HarnessDocuments]:
    """The spec's harness task(s) over `docs` (key, raw row), in order, with `pool` (id, raw row) as
    their few-shot split and `shots` examples each, their requests built with the harness's seed."""
    fields = re.findall(r"{(\w+)}", spec.harness_task)
    layout = spec.harness_layout or (lambda row: row)

    def task_name(row: Mapping[str, Any]) -> str | None:
        """The row's task; None where a field that names it is missing."""
        if any(not str(row.get(name) or "").strip() for name in fields):
            return None
        return spec.harness_task.format_map(row)

    grouped: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for key, row in docs:
        row = layout(row)
        name = task_name(row)
        if name is None:
            raise ValueError(f"row {key} has no field to name its harness task {spec.harness_task} with")
        grouped.setdefault(name, []).append((key, row))
    pool_by_task: dict[str | None, list[tuple[str, Mapping[str, Any]]]] = defaultdict(list)
    for row_id, row in pool:
        row = layout(row)
        pool_by_task[task_name(row)].append((row_id, row))
    built = []
    for name, members in grouped.items():
        task_pool = pool_by_task[name]
        files = _data_files(_harness_run(spec, name), [row for _, row in members], [row for _, row in task_pool])
        [task] = build_tasks(_harness_run(spec, name, files))
        task.set_config(key="num_fewshot", value=shots)
        task.set_fewshot_seed(seed=FEWSHOT_SEED)
        draws = _recorded_draws(task)
        task.build_all_requests()
        examples = {id(doc): index for index, doc in enumerate(task.sampler.fewshot_docs())} if draws else {}
        ids = [row_id for row_id, _ in task_pool]  # the pool's rows in order, as the harness holds them
        fewshot_ids = [
            [ids[examples[id(doc)]] for doc in drawn] if len(ids) == len(examples) else [] for drawn in draws
        ] or [[] for _ in members]
        built.append(HarnessDocuments(task, [key for key, _ in members], fewshot_ids))
    return built


def _instances_by_document(task: Any) -> dict[int, list[Any]]:
    by_document: dict[int, list[Any]] = defaultdict(list)
    for instance in task.instances:
        by_document[instance.doc_id].append(instance)
    return {doc_id: sorted(instances, key=lambda i: i.idx) for doc_id, instances in by_document.items()}


def harness_items(documents: Sequence[HarnessDocuments]) -> dict[str, HarnessItem]:
    """Each document's requests as the harness built them, by key."""
    items = {}
    for built in documents:
        task = built.task
        for doc_id, instances in _instances_by_document(task).items():
            first, fewshot_ids = instances[0], tuple(built.fewshot_ids[doc_id])
            if first.request_type == "generate_until":
                context, generation_kwargs = first.args
                item = HarnessItem((context,), generation_kwargs=dict(generation_kwargs), fewshot_ids=fewshot_ids)
            else:
                item = HarnessItem(
                    tuple(i.args[0] for i in instances),
                    tuple(i.args[1] for i in instances),
                    tuple(str(c) for c in task.doc_to_choice(first.doc)),
                    fewshot_ids=fewshot_ids,
                )
            items[built.keys[doc_id]] = item
    return items


def zero_shot_items(spec: HarnessFormatted, rows: Sequence[Mapping[str, Any]]) -> list[HarnessItem]:
    """The harness's zero-shot requests for raw rows, in order."""
    items = harness_items(harness_documents(spec, [(str(i), row) for i, row in enumerate(rows)]))
    return [items[str(i)] for i in range(len(rows))]


def harness_item_scores(spec: HarnessFormatted, rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, ItemScore]]:
    """The harness's per-document metrics of stored answers, by prompt id: its filters and
    `process_results` over each row's choice log-likelihoods or generated text (`rows`: prompt_id,
    row_json, choice_loglikelihoods, output_text, predicted, predicted_norm, real_answer). A
    generative task's metric is named after its filter (`strict-match`); `spec.harness_metric_names`
    renames the others."""
    by_key = {row["prompt_id"]: row for row in rows}
    documents = harness_documents(spec, [(key, json.loads(row["row_json"])) for key, row in by_key.items()])
    scores: dict[str, dict[str, ItemScore]] = {}
    for built in documents:
        task, by_document = built.task, _instances_by_document(built.task)
        for doc_id, instances in by_document.items():
            row = by_key[built.keys[doc_id]]
            if instances[0].request_type == "generate_until":
                instances[0].resps = [row["output_text"]]
            else:
                for instance, loglikelihood in zip(instances, row["choice_loglikelihoods"], strict=True):
                    instance.resps = [(loglikelihood, False)]
        task.apply_filters()
        for doc_id, instances in by_document.items():
            row, doc = by_key[built.keys[doc_id]], instances[0].doc
            scored = scores.setdefault(built.keys[doc_id], {})
            for filter_key in instances[0].filtered_resps:
                answers = [instance.filtered_resps[filter_key] for instance in instances]
                for metric, value in task.process_results(doc, answers).items():
                    if instances[0].request_type == "generate_until":
                        scored[filter_key] = ItemScore(float(value), str(answers[0]), row["real_answer"])
                    else:
                        predicted = row["predicted_norm"] if metric == "acc_norm" else row["predicted"]
                        scored[spec.harness_metric_names.get(metric, metric)] = ItemScore(
                            float(value), predicted, row["real_answer"]
                        )
    return scores
