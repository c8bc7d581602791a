"""Requests answered once, and kept as they are computed.

A request whose answer is stored for the model fingerprint is not asked again. The others are
computed in slices, and the computed answers are kept (handed to `keep`, which stores them) in
chunks: a chunk is kept once it holds `chunk_answers` answers or `chunk_seconds` have passed since
the previous one, whichever comes first, and at the end of every call. So a run killed at any
point loses at most the chunk under way, and its rerun reuses every answer kept before.

A slice is what one engine call computes: as many requests as the measured rate fits in the
chunk's time left (at least `smallest`, the batch size; at most what completes the chunk's
count). After each chunk, the progress (answers stored of answers needed so far) is reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eval_platform.benchmarks.records import Answer, request_key


@dataclass(frozen=True)
class AnswerProgress:
    """An evaluation's answers after a chunk was kept: those stored (reused, or kept by this run) of
    those needed so far, the ones this run computed, the chunks kept and the seconds since it began."""

    stored: int
    needed: int
    computed: int
    chunks: int
    seconds: float

    @property
    def rate(self) -> float:
        """Answers computed per second."""
        return self.computed / self.seconds if self.seconds > 0 else 0.0


def keep_nothing(chunk: Sequence[tuple[str, Answer]]) -> None:
    pass


def no_progress(progress: AnswerProgress) -> None:
    pass


@dataclass
class Answering:
    """The answers of one evaluation, by request key: reused from `stored`, or computed and kept in
    chunks through `keep`, `progress` reported after each."""

    stored: Mapping[str, Any] = field(default_factory=dict)
    keep: Callable[[Sequence[tuple[str, Answer]]], None] = keep_nothing
    progress: Callable[[AnswerProgress], None] = no_progress
    chunk_answers: int = 1000
    chunk_seconds: float = 60.0
    smallest: int = 8  # the fewest requests an engine call is given (the batch size)
    clock: Callable[[], float] = time.perf_counter
    answers: dict[str, Answer] = field(default_factory=dict)
    model_seconds: float = 0.0  # time in the engine alone
    reused: int = 0
    computed: int = 0
    kept: int = 0
    chunks: int = 0
    needed: int = 0
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def answer(
        self, request_type: str, arguments: Sequence[Sequence[Any]], compute: Callable[[list[Any]], list[Any]]
    ) -> list[Any]:
        """Each request's answer, in order: stored, answered earlier in this evaluation, or computed
        (`compute` answers a list of requests' arguments) and kept in chunks."""
        keys = [request_key(request_type, args) for args in arguments]
        todo: dict[str, Sequence[Any]] = {}
        for key, args in zip(keys, arguments, strict=True):
            if key in self.answers or key in todo:
                continue
            if key in self.stored:
                self.answers[key] = Answer(request_type, list(args), self.stored[key], False)
                self.reused += 1
            else:
                todo[key] = args
        self.needed = self.reused + self.computed + len(todo)
        self._compute(request_type, list(todo.items()), compute)
        return [self.answers[key].response for key in keys]

    def _compute(
        self, request_type: str, todo: list[tuple[str, Sequence[Any]]], compute: Callable[[list[Any]], list[Any]]
    ) -> None:
        done, chunk, chunk_started = 0, [], self.clock()
        try:
            while done < len(todo):
                batch = todo[done : done + self._slice(len(chunk), self.clock() - chunk_started)]
                start = self.clock()
                responses = compute([args for _, args in batch])
                self.model_seconds += self.clock() - start
                for (key, args), response in zip(batch, responses, strict=True):
                    self.answers[key] = Answer(request_type, list(args), response, True)
                    chunk.append((key, self.answers[key]))
                done += len(batch)
                self.computed += len(batch)
                if len(chunk) >= self.chunk_answers or self.clock() - chunk_started >= self.chunk_seconds:
                    full, chunk = chunk, []
                    self._keep(full)
                    chunk_started = self.clock()
        finally:  # the answers computed, however the call ends (an engine's error included)
            if chunk:
                self._keep(chunk)

    def _slice(self, in_chunk: int, chunk_elapsed: float) -> int:
        """How many requests the next engine call gets: what the rate measured so far fits in the
        chunk's time left, within [smallest, what completes the chunk]."""
        rate = self.computed / self.model_seconds if self.computed and self.model_seconds > 0 else 0.0
        fits = int(rate * (self.chunk_seconds - chunk_elapsed))
        return max(1, min(self.chunk_answers - in_chunk, max(self.smallest, fits)))

    def _keep(self, chunk: list[tuple[str, Answer]]) -> None:
        self.keep(chunk)
        self.kept += len(chunk)
        self.chunks += 1
        self.progress(
            AnswerProgress(self.reused + self.kept, self.needed, self.kept, self.chunks, self.clock() - self.started)
        )
