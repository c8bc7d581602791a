"""What an evaluation runs: the benchmark (declared, or a harness task named from the launchpad),
the settings it is evaluated with, and its progress.

The settings are the declaration's, with the roster entry's over them, and the run's config over
those; a named protocol sets its solver and shots for the benchmark. A requested solver that
cannot ask the benchmark (the letter solver on a generative benchmark) is skipped, saying so; where
none of them can, the benchmark's own solvers ask it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eval_platform.benchmarks.answering import AnswerProgress
from eval_platform.benchmarks.declarations import Benchmark, EvaluationSettings, merged
from eval_platform.benchmarks.harness import generates
from eval_platform.benchmarks.protocols import Protocol
from eval_platform.benchmarks.solvers import solver


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
    entry: Mapping[str, Any],
    launchpad: Mapping[str, Any],
    protocol: Protocol | None = None,
) -> Plan:
    """The benchmark's settings with the roster entry's (`entry`: the fields it sets) and the
    run's (`launchpad`) over them, and a protocol's solver and shots for the benchmark over all; a
    generation budget only for a benchmark whose task generates."""
    layers = [entry, launchpad]
    if protocol is not None:
        task = protocol.task_for(benchmark.name)
        layers.append({"solvers": (task.solver,), "num_fewshot": task.num_fewshot})
    settings = merged(benchmark.evaluation_settings(), *layers)
    if not settings.task:
        settings = settings.model_copy(update={"task": benchmark.task})
    if settings.max_gen_toks is not None and not generates(settings.task, benchmark.include_path):
        settings = settings.model_copy(update={"max_gen_toks": None})  # no generation: the budget measures nothing
    refusals = {name: solver(name).refusal(benchmark) for name in settings.solvers}
    usable = tuple(name for name, reason in refusals.items() if reason is None)
    skipped = {name: str(reason) for name, reason in refusals.items() if reason is not None}
    return Plan(settings.model_copy(update={"solvers": usable or benchmark.solvers}), skipped)


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
