"""Results computed once, and kept as they are computed: a benchmark's answers, a judge's verdicts,
an era's API answers (the gateway's response cache). The one way a run's results are reused and
resumed.

Each result has a key (`content_key` of what decides it). One whose key is stored is reused and not
computed again. The others are computed in slices, and the computed results are kept (handed to
`keep`, which stores them) in chunks: a chunk is kept once it holds `chunk_size` results or
`chunk_seconds` have passed since the previous one, whichever comes first, and at the end of every
call. So a run killed at any point loses at most the chunk under way, and its rerun reuses every
result kept before.

A caller that computes its results one at a time (an era's API calls, answered as its genetic
algorithm asks) `find`s each first and `add`s what it computed; its chunks are kept the same way,
and whenever it calls `flush` (an era: with each generation it saves).

A slice is what one call of `compute` computes: as many as the measured rate fits in the chunk's
time left (at least `smallest`, the batch size; at most what completes the chunk's count). After
each chunk, the progress (results stored of results needed so far) is reported.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

R = TypeVar("R")  # a result, as kept
A = TypeVar("A")  # what computes one result (its arguments)
C = TypeVar("C")  # what `compute` answers for one result, before `computed` makes it one


def content_key(value: object) -> str:
    """The identity of a JSON-able value (dict keys sorted, other objects as their text)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class KeptProgress:
    """A run's results after a chunk was kept: those stored (reused, or kept by this run) of those
    needed so far, the ones this run computed, the chunks kept and the seconds since it began."""

    stored: int
    needed: int
    computed: int
    chunks: int
    seconds: float

    @property
    def rate(self) -> float:
        """Results computed per second."""
        return self.computed / self.seconds if self.seconds > 0 else 0.0


def keep_nothing(chunk: Sequence[tuple[str, object]]) -> None:
    pass


def no_progress(progress: KeptProgress) -> None:
    pass


@dataclass
class Keeping(Generic[R]):
    """A run's results, by key: reused from `stored`, or computed and kept in chunks through `keep`,
    `progress` reported after each."""

    stored: Mapping[str, Any] = field(default_factory=dict)
    keep: Callable[[Sequence[tuple[str, R]]], None] = keep_nothing
    progress: Callable[[KeptProgress], None] = no_progress
    chunk_size: int = 1000
    chunk_seconds: float = 60.0
    smallest: int = 8  # the fewest a call of `compute` is given (the batch size)
    clock: Callable[[], float] = time.perf_counter
    results: dict[str, R] = field(default_factory=dict)
    model_seconds: float = 0.0  # time in `compute` alone
    reused: int = 0
    computed: int = 0
    kept: int = 0
    chunks: int = 0
    needed: int = 0
    chunk: list[tuple[str, R]] = field(default_factory=list)  # computed, not kept yet
    started: float = field(init=False)
    chunk_started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.chunk_started = self.clock()

    def find(self, key: str, reused: Callable[[Any], R]) -> R | None:
        """The result of `key` if this run has it or it is stored (`reused` makes what is stored a
        result); None: it is to be computed, then `add`ed."""
        if key not in self.results and key in self.stored:
            self.results[key] = reused(self.stored[key])
            self.reused += 1
            self.needed += 1
        return self.results.get(key)

    def add(self, key: str, result: R) -> None:
        """A result computed one at a time, held in the chunk under way (kept when full or due)."""
        self.results[key] = result
        self.computed += 1
        self.needed += 1
        self.chunk.append((key, result))
        if len(self.chunk) >= self.chunk_size or self.clock() - self.chunk_started >= self.chunk_seconds:
            self.flush()

    def flush(self) -> None:
        """Keep the chunk under way now."""
        if self.chunk:
            chunk, self.chunk = self.chunk, []
            self._keep(chunk)
        self.chunk_started = self.clock()

    def resolve(
        self,
        keyed: Sequence[tuple[str, A]],
        compute: Callable[[list[A]], list[C]],
        computed: Callable[[A, C], R],
        reused: Callable[[A, Any], R],
    ) -> list[R]:
        """Each key's result, in order: one this run has already, a stored one (`reused` makes it a
        result from its arguments and what is stored), or computed (`compute` answers a list of
        arguments, `computed` makes each answer a result) and kept in chunks."""
        todo: dict[str, A] = {}
        for key, args in keyed:
            if key in self.results or key in todo:
                continue
            if key in self.stored:
                self.results[key] = reused(args, self.stored[key])
                self.reused += 1
            else:
                todo[key] = args
        self.needed = self.reused + self.computed + len(todo)
        self._compute(list(todo.items()), compute, computed)
        return [self.results[key] for key, _ in keyed]

    def _compute(
        self, todo: list[tuple[str, A]], compute: Callable[[list[A]], list[C]], computed: Callable[[A, C], R]
    ) -> None:
        done = 0
        self.chunk_started = self.clock()
        try:
            while done < len(todo):
                batch = todo[done : done + self._slice(len(self.chunk), self.clock() - self.chunk_started)]
                start = self.clock()
                responses = compute([args for _, args in batch])
                self.model_seconds += self.clock() - start
                for (key, args), response in zip(batch, responses, strict=True):
                    self.results[key] = computed(args, response)
                    self.chunk.append((key, self.results[key]))
                done += len(batch)
                self.computed += len(batch)
                if len(self.chunk) >= self.chunk_size or self.clock() - self.chunk_started >= self.chunk_seconds:
                    self.flush()
        finally:  # the results computed, however the call ends (an engine's error included)
            self.flush()

    def _slice(self, in_chunk: int, chunk_elapsed: float) -> int:
        """How many the next call of `compute` gets: what the rate measured so far fits in the
        chunk's time left, within [smallest, what completes the chunk]."""
        rate = self.computed / self.model_seconds if self.computed and self.model_seconds > 0 else 0.0
        fits = int(rate * (self.chunk_seconds - chunk_elapsed))
        return max(1, min(self.chunk_size - in_chunk, max(self.smallest, fits)))

    def _keep(self, chunk: list[tuple[str, R]]) -> None:
        self.keep(chunk)
        self.kept += len(chunk)
        self.chunks += 1
        self.progress(
            KeptProgress(self.reused + self.kept, self.needed, self.kept, self.chunks, self.clock() - self.started)
        )
