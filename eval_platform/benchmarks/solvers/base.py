"""What every solver shares: the job it is given, the protocol it follows, and its registration."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from eval_platform.benchmarks.declarations import Benchmark, EvaluationSettings
from eval_platform.benchmarks.documents import Document
from eval_platform.benchmarks.records import Evaluation
from eval_platform.common.models import LanguageModel


def no_progress(done: int, total: int) -> None:
    pass


@dataclass(frozen=True)
class EvaluationJob:
    """What a solver is given: the benchmark and its settings, the model and how to run it, a
    dataset's documents (in order) and few-shot pool, and the model fingerprint's stored answers."""

    benchmark: Benchmark
    settings: EvaluationSettings
    model: LanguageModel
    batch_size: int = 8
    max_new_tokens: int = 256  # a chat generation's budget
    documents: Sequence[Document] = ()
    pool: Sequence[tuple[str, Mapping[str, Any]]] = ()
    stored: Mapping[str, Any] = field(default_factory=dict)
    progress: Callable[[int, int], None] = no_progress


class Solver(Protocol):
    name: str

    def refusal(self, benchmark: Benchmark) -> str | None:
        """Why it cannot ask this benchmark, or None."""
        ...

    def settings_key(self, settings: EvaluationSettings) -> str:
        """The key its results are kept under (declarations.settings_key)."""
        ...

    def evaluate(self, job: EvaluationJob) -> Evaluation: ...


_REGISTERED: dict[str, Solver] = {}


def register_solver(solver: Solver) -> Solver:
    """Make a solver known by its name (in declarations, roster entries and run configs)."""
    _REGISTERED[solver.name] = solver
    return solver


def known_solvers() -> dict[str, Solver]:
    """The solvers registered so far, by name."""
    return dict(_REGISTERED)
