"""What every solver shares: the job it is given, the protocol it follows, and its registration."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from eval_platform.benchmarks.answering import Answering, AnswerProgress, keep_nothing, no_progress
from eval_platform.benchmarks.declarations import Benchmark, EvaluationSettings
from eval_platform.benchmarks.documents import Document
from eval_platform.benchmarks.records import Answer, Evaluation
from eval_platform.common.models import LanguageModel
from eval_platform.environment import Environment
from eval_platform.registry import Registry


@dataclass(frozen=True)
class EvaluationJob:
    """What a solver is given: the benchmark and its settings, the model and how to run it, a
    dataset's documents (in order) and few-shot pool, the model fingerprint's stored answers, where
    the answers it computes are kept as they come (`keep`, a chunk at a time), whom to tell, and the
    platform's settings (`environment`: the chunks' size, the harness's folders)."""

    benchmark: Benchmark
    settings: EvaluationSettings
    model: LanguageModel
    batch_size: int = 8
    max_new_tokens: int = 256  # a chat generation's budget
    documents: Sequence[Document] = ()
    pool: Sequence[tuple[str, Mapping[str, object]]] = ()
    stored: Mapping[str, object] = field(default_factory=dict)
    keep: Callable[[Sequence[tuple[str, Answer]]], None] = keep_nothing
    progress: Callable[[AnswerProgress], None] = no_progress
    environment: Environment = field(default_factory=Environment)

    def answering(self) -> Answering:
        """Its answers: the stored ones reused, the others computed and kept in chunks of the
        environment's size (EVAL_ANSWER_CHUNK answers or EVAL_ANSWER_CHUNK_S seconds)."""
        settings = self.environment
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


# Solvers by name (in declarations, roster entries and run configs): the built-in ones register
# themselves (`SOLVERS.add`); another package's is added where it is imported, or named `module:Class`.
SOLVERS: Registry[Solver] = Registry(
    "solver",
    made=lambda found: found() if isinstance(found, type) else found,
    name_of=lambda solver: solver.name,
    builtins=("eval_platform.benchmarks.solvers.chat", "eval_platform.benchmarks.solvers.harness"),
    error=SolverError,
)
