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

A solver of another package is added to `SOLVERS` (the registry, `eval_platform.registry`), or
named `module:Class` in a declaration or a run's config.
"""

from __future__ import annotations

from eval_platform.benchmarks.records import Evaluation
from eval_platform.benchmarks.solvers.base import (
    SOLVERS,
    EvaluationJob,
    Solver,
    SolverError,
    no_progress,
)

__all__ = ["SOLVERS", "EvaluationJob", "Solver", "SolverError", "evaluate", "no_progress", "solver"]


def solver(name: str) -> Solver:
    """A registered solver, or an instance of the class named `module:Class`."""
    return SOLVERS.get(name)


def evaluate(name: str, job: EvaluationJob) -> Evaluation:
    """The benchmark asked by the named solver; a solver that cannot ask it is refused, saying why."""
    chosen = solver(name)
    reason = chosen.refusal(job.benchmark)
    if reason:
        raise SolverError(f"{job.benchmark.name}: the {name} solver cannot ask it: {reason}")
    return chosen.evaluate(job)
