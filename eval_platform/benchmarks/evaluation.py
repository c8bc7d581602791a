"""What an evaluation runs: the benchmark (declared, or a harness task named from the launchpad),
the settings it is evaluated with, and its progress.

The settings are the declaration's, with the roster entry's over them, and the run's config over
those; a named protocol sets its solver and shots for the benchmark. A requested solver that
cannot ask the benchmark (the letter solver on a generative benchmark) is skipped, saying so; where
none of them can, the benchmark's own solvers ask it. Its solvers then ask the benchmark in turn,
each evaluation kept as it ends and summed up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

from eval_platform.benchmarks.answering import AnswerProgress
from eval_platform.benchmarks.declarations import Benchmark, EvaluationSettings, merged
from eval_platform.benchmarks.harness import generates
from eval_platform.benchmarks.protocols import Protocol
from eval_platform.benchmarks.records import Evaluation
from eval_platform.benchmarks.scoring import aggregate, item_scores
from eval_platform.benchmarks.solvers import EvaluationJob, evaluate, solver
from eval_platform.environment import HARNESS_INDEX

REPORT_ITEMS = 100  # items of the specification's per-item report in the run's debug log


def benchmark_named(name: str, declared: Mapping[str, Benchmark], task: str | None = None) -> Benchmark:
    """The benchmark declared under `name`, else the harness task (or group) of that name (or
    `task`), run on its own data or on what the run's config points it at."""
    if name in declared:
        return declared[name]
    return Benchmark(name=name, title=task or name, task=task or name)


@dataclass(frozen=True)
class Plan:
    """The settings an evaluation runs with, its solvers, and the ones it skipped (and why)."""

    settings: EvaluationSettings
    skipped: dict[str, str] = field(default_factory=dict)


def evaluation_plan(
    benchmark: Benchmark,
    entry: Mapping[str, object],
    launchpad: Mapping[str, object],
    protocol: Protocol | None = None,
    index_dir: Path = HARNESS_INDEX,
) -> Plan:
    """The benchmark's settings with the roster entry's (`entry`: the fields it sets) and the
    run's (`launchpad`) over them, and a protocol's solver and shots for the benchmark over all; a
    generation budget only for a benchmark whose task generates (looked up in the harness's
    registry, its index cached under `index_dir`)."""
    layers = [entry, launchpad]
    if protocol is not None:
        task = protocol.task_for(benchmark.name)
        layers.append({"solvers": (task.solver,), "num_fewshot": task.num_fewshot})
    settings = merged(benchmark.evaluation_settings(), *layers)
    if not settings.task:
        settings = settings.model_copy(update={"task": benchmark.task})
    if settings.max_gen_toks is not None and not generates(settings.task, benchmark.include_path, index_dir=index_dir):
        settings = settings.model_copy(update={"max_gen_toks": None})  # no generation: the budget measures nothing
    refusals = {name: solver(name).refusal(benchmark) for name in settings.solvers}
    usable = tuple(name for name, reason in refusals.items() if reason is None)
    skipped = {name: str(reason) for name, reason in refusals.items() if reason is not None}
    return Plan(settings.model_copy(update={"solvers": usable or benchmark.solvers}), skipped)


class SolverSummary(TypedDict):
    """One solver's evaluation summed up."""

    documents: int
    answers: int
    computed: int
    model_seconds: float
    forward_passes: int


@dataclass
class SolverEvaluations:
    """An evaluation's solvers summed up: each one's documents, answers (computed ones among them),
    seconds in the model and forward passes, by `solver (settings key)`; and every result, with its
    solver and settings key."""

    summary: dict[str, SolverSummary] = field(default_factory=dict)
    results: list[dict[str, Any]] = field(default_factory=list)  # a Result's fields, its solver and key

    @property
    def documents(self) -> int:
        return sum(solver["documents"] for solver in self.summary.values())


def evaluate_solvers(
    job: EvaluationJob,
    progress: Callable[[str], Callable[[AnswerProgress], None]],
    save: Callable[[Evaluation], None],
    log: logging.Logger,
    label: str,
) -> SolverEvaluations:
    """The job's benchmark asked by each solver of its settings in turn, each reporting its progress
    to `progress(solver)`; each evaluation handed to `save` as it ends, then its notes, summary and
    per-item report logged (under `label`)."""
    evaluations = SolverEvaluations()
    for name in job.settings.solvers:
        passes = getattr(job.model, "forward_passes", 0)
        evaluation = evaluate(name, replace(job, progress=progress(name)))
        save(evaluation)
        summary = evaluations.summary[f"{name} ({evaluation.settings_key})"] = {
            "documents": len({(s.task, s.doc_id) for s in evaluation.samples}),
            "answers": len(evaluation.answers),
            "computed": evaluation.computed,
            "model_seconds": round(evaluation.model_seconds, 2),
            "forward_passes": getattr(job.model, "forward_passes", 0) - passes,
        }
        for note in evaluation.notes:
            log.warning(f"{label} {name}: {note}")
        evaluations.results += [
            {"solver": name, "settings_key": evaluation.settings_key, **r.__dict__} for r in evaluation.results
        ]
        log.info(f"{label} {name}: {summary}")
        log.debug(item_report(evaluation))
    return evaluations


def item_report(evaluation: Evaluation, items: int = REPORT_ITEMS) -> str:
    """The specification's per-item report of each metric and filter (`0. Output: A, Reference: A :: O`),
    its first `items` items and its score (every item is in the warehouse)."""
    keys = dict.fromkeys((metric, s.filter) for s in evaluation.samples for metric in s.numeric_metrics())
    reports = []
    for metric, filter_name in keys:
        *lines, score = aggregate(item_scores(evaluation.samples, metric, filter_name)).report.split("\n")
        more = (
            [f"[{len(lines) - items} more items: every one is in the warehouse's samples]"]
            if len(lines) > items
            else []
        )
        reports.append("\n".join([f"{evaluation.solver} {metric},{filter_name}", *lines[:items], *more, score]))
    return "\n\n".join(reports)


@dataclass(frozen=True)
class ProgressLog:
    """Reports an evaluation's answers stored of those needed so far, the answers computed per
    second and the time left for the rest."""

    log: Callable[[str], None]
    label: str

    def __call__(self, progress: AnswerProgress) -> None:
        rate = progress.rate
        left = (progress.needed - progress.stored) / rate if rate else float("inf")
        self.log(
            f"{self.label}: chunk {progress.chunks} kept, {progress.stored:,} of {progress.needed:,} answers stored "
            f"({progress.computed:,} computed by this run), {rate:.2f} answers/s, about {duration(left)} left"
        )


def duration(seconds: float) -> str:
    if seconds == float("inf"):
        return "unknown time"
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
