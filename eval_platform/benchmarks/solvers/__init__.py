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

from eval_platform.benchmarks.records import Evaluation
from eval_platform.benchmarks.solvers.base import (
    EvaluationJob,
    Solver,
    known_solvers,
    no_progress,
    register_solver,
)

__all__ = [
    "EvaluationJob",
    "Solver",
    "SolverError",
    "evaluate",
    "no_progress",
    "register_solver",
    "registered",
    "solver",
]


class SolverError(ValueError):
    """A solver that is unknown or cannot ask the benchmark; the message says which and why."""


def registered() -> dict[str, Solver]:
    """Every registered solver, the built-in ones first."""
    from eval_platform.benchmarks.solvers import chat, harness  # noqa: F401  (they register themselves)

    return known_solvers()


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
