"""Requests answered once, and kept as they are computed (the shared `Keeping`, common/keeping.py).

A request whose answer is stored for the model fingerprint is not asked again. The others are
computed in slices, and the computed answers are kept (handed to `keep`, which stores them) in
chunks: a chunk is kept once it holds `chunk_size` answers or `chunk_seconds` have passed since
the previous one, whichever comes first, and at the end of every call. So a run killed at any
point loses at most the chunk under way, and its rerun reuses every answer kept before.

A slice is what one engine call computes: as many requests as the measured rate fits in the
chunk's time left (at least `smallest`, the batch size; at most what completes the chunk's
count). After each chunk, the progress (answers stored of answers needed so far) is reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eval_engine import ended_of
from eval_platform.benchmarks.records import Answer, request_key
from eval_platform.common.keeping import Keeping, KeptProgress, keep_nothing, no_progress

AnswerProgress = KeptProgress  # an evaluation's answers after a chunk was kept

__all__ = ["AnswerProgress", "Answering", "keep_nothing", "no_progress"]


@dataclass
class Answering(Keeping[Answer]):
    """The answers of one evaluation, by request key: reused from `stored`, or computed and kept in
    chunks through `keep`, `progress` reported after each."""

    @property
    def answers(self) -> dict[str, Answer]:
        return self.results

    def answer(
        self, request_type: str, arguments: Sequence[Sequence[Any]], compute: Callable[[list[Any]], list[Any]]
    ) -> list[Any]:
        """Each request's answer, in order: stored, answered earlier in this evaluation, or computed
        (`compute` answers a list of requests' arguments) and kept in chunks."""
        answers = self.resolve(
            [(request_key(request_type, args), args) for args in arguments],
            compute,
            lambda args, response: Answer(request_type, list(args), response, True, ended_of(response)),
            lambda args, stored: Answer(request_type, list(args), stored, False, ended_of(stored)),
        )
        return [answer.response for answer in answers]
