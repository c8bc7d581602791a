"""Solvers: the ways a benchmark's documents are asked of a model, registered by name.

A solver takes an `EvaluationJob` (the benchmark, its settings, the model, a dataset's documents
and few-shot pool, and the answers already stored for the model) and returns an `Evaluation`:
each document's samples, each task's results, and every answer it asked for, computed or reused.
It asks through the job's `Answering`, which keeps the answers it computes as they come.

- `harness`: the harness task's own requests, filters and metrics (`simple_evaluate`), for any
  benchmark;
- `letter`, `choices`, `generate`: a dataset's chat prompt, answered by the first token's label
  probabilities, by each choice's log-likelihood, or by a greedy generation scored through the
  declared answer filters.

A solver of another package is registered with `register_solver`, or named `module:Class` in a
declaration or a run's config.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from eval_platform.benchmarks.answering import Answering, AnswerProgress, keep_nothing, no_progress
from eval_platform.benchmarks.declarations import Benchmark, EvaluationSettings
from eval_platform.benchmarks.documents import Document
from eval_platform.benchmarks.records import Answer, Evaluation
from eval_platform.common.models import LanguageModel
from eval_platform.environment import environment


@dataclass(frozen=True)
class EvaluationJob:
    """What a solver is given: the benchmark and its settings, the model and how to run it, a
    dataset's documents (in order) and few-shot pool, the model fingerprint's stored answers, where
    the answers it computes are kept as they come (`keep`, a chunk at a time) and whom to tell."""

    benchmark: Benchmark
    settings: EvaluationSettings
    model: LanguageModel
    batch_size: int = 8
    max_new_tokens: int = 256  # a chat generation's budget
    documents: Sequence[Document] = ()
    pool: Sequence[tuple[str, Mapping[str, Any]]] = ()
    stored: Mapping[str, Any] = field(default_factory=dict)
    keep: Callable[[Sequence[tuple[str, Answer]]], None] = keep_nothing
    progress: Callable[[AnswerProgress], None] = no_progress

    def answering(self) -> Answering:
        """Its answers: the stored ones reused, the others computed and kept in chunks of the
        environment's size (EVAL_ANSWER_CHUNK answers or EVAL_ANSWER_CHUNK_S seconds)."""
        settings = environment()
        return Answering(
            self.stored, self.keep, self.progress, settings.answer_chunk, settings.answer_chunk_s, self.batch_size
        )


class Solver(Protocol):
    name: str

    def refusal(self, benchmark: Benchmark) -> str | None:
        """Why it cannot ask this benchmark, or None."""
        ...

    def settings_key(self, settings: EvaluationSettings) -> str:
        """The key its results are kept under (declarations.settings_key)."""
        ...

    def evaluate(self, job: EvaluationJob) -> Evaluation: ...


class SolverError(ValueError):
    """A solver that is unknown or cannot ask the benchmark; the message says which and why."""


_REGISTERED: dict[str, Solver] = {}


def register_solver(solver: Solver) -> Solver:
    """Make a solver known by its name (in declarations, roster entries and run configs)."""
    _REGISTERED[solver.name] = solver
    return solver


def registered() -> dict[str, Solver]:
    """Every registered solver, the built-in ones first."""
    from eval_platform.benchmarks.solvers import chat, harness  # noqa: F401  (they register themselves)

    return dict(_REGISTERED)


def solver(name: str) -> Solver:
    """A registered solver, or an instance of the class named `module:Class`."""
    solvers = registered()
    if name in solvers:
        return solvers[name]
    module, _, attribute = name.partition(":")
    try:
        return register_solver(getattr(importlib.import_module(module), attribute)())
    except (ImportError, AttributeError, ValueError, TypeError) as error:
        raise SolverError(f"unknown solver {name!r}: registered are {sorted(solvers)}, or name module:Class") from error


def evaluate(name: str, job: EvaluationJob) -> Evaluation:
    """The benchmark asked by the named solver; a solver that cannot ask it is refused, saying why."""
    chosen = solver(name)
    reason = chosen.refusal(job.benchmark)
    if reason:
        raise SolverError(f"{job.benchmark.name}: the {name} solver cannot ask it: {reason}")
    return chosen.evaluate(job)
