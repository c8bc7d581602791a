"""Answers kept as they are computed (eval_platform/benchmarks/answering.py, over common/keeping.py):
in chunks of a count or of a time, whichever comes first; answers stored before are reused and never
asked; the answers computed before an engine's error are kept; progress is reported after each
chunk; results computed one at a time (an era's API answers) kept the same way."""

import pytest

from eval_platform.benchmarks.answering import Answering
from eval_platform.benchmarks.records import request_key
from eval_platform.common.keeping import Keeping


class Clock:
    """Seconds that pass only when the engine computes: `per_request` seconds per request."""

    def __init__(self, per_request: float = 0.0) -> None:
        self.now, self.per_request = 0.0, per_request

    def __call__(self) -> float:
        return self.now


def engine(clock: Clock, asked: list[list[str]], fail_at: int | None = None):
    """An engine answering each request with its text's length, `clock.per_request` seconds each;
    it raises on the request numbered `fail_at` (counting every request it was asked)."""

    def compute(arguments: list[list[str]]) -> list[int]:
        done = sum(map(len, asked))
        if fail_at is not None and done <= fail_at < done + len(arguments):
            raise RuntimeError("the engine failed")
        asked.append([text for (text,) in arguments])
        clock.now += clock.per_request * len(arguments)
        return [len(text) for (text,) in arguments]

    return compute


def answering(clock: Clock, chunk_answers: int, chunk_seconds: float, stored=None, smallest: int = 2):
    kept, reports = [], []
    run = Answering(
        stored or {},
        keep=lambda chunk: kept.append([key for key, _ in chunk]),
        progress=reports.append,
        chunk_size=chunk_answers,
        chunk_seconds=chunk_seconds,
        smallest=smallest,
        clock=clock,
    )
    return run, kept, reports


REQUESTS = [[f"request {n:02d}"] for n in range(12)]


def test_a_chunk_is_kept_each_time_it_holds_the_count():
    clock, asked = Clock(), []
    run, kept, reports = answering(clock, chunk_answers=5, chunk_seconds=3600)
    assert run.answer("loglikelihood", REQUESTS, engine(clock, asked)) == [10] * 12
    assert [len(chunk) for chunk in kept] == [5, 5, 2]  # the last at the call's end
    assert [key for chunk in kept for key in chunk] == [request_key("loglikelihood", r) for r in REQUESTS]
    assert [(r.stored, r.needed, r.computed, r.chunks) for r in reports] == [
        (5, 12, 5, 1),
        (10, 12, 10, 2),
        (12, 12, 12, 3),
    ]
    assert all(len(call) <= 5 for call in asked)  # no engine call crosses a chunk's count


def test_a_chunk_is_kept_once_its_time_is_up_before_its_count():
    clock, asked = Clock(per_request=1.0), []
    run, kept, _ = answering(clock, chunk_answers=1000, chunk_seconds=4.0, smallest=2)
    run.answer("loglikelihood", REQUESTS, engine(clock, asked))
    # 1 s a request: a first call of 2 (the smallest) measures the rate; the next is given what
    # fits in the 2 s left (2 requests), and the chunk is kept at 4 s, 4 answers in
    assert [len(chunk) for chunk in kept] == [4, 4, 4]
    assert [len(call) for call in asked] == [2, 2, 4, 4]


def test_stored_answers_are_reused_and_never_asked():
    stored = {request_key("loglikelihood", r): -1 for r in REQUESTS[:7]}
    clock, asked = Clock(), []
    run, kept, reports = answering(clock, chunk_answers=5, chunk_seconds=3600, stored=stored)
    answers = run.answer("loglikelihood", REQUESTS + REQUESTS[:3], engine(clock, asked))
    assert answers == [-1] * 7 + [10] * 5 + [-1] * 3
    assert [text for call in asked for text in call] == [text for (text,) in REQUESTS[7:]]
    assert [len(chunk) for chunk in kept] == [5]
    assert (reports[-1].stored, reports[-1].needed, reports[-1].computed) == (12, 12, 5)
    assert run.reused == 7 and run.computed == 5


def test_the_answers_computed_before_an_engine_error_are_kept():
    clock, asked = Clock(), []
    run, kept, _ = answering(clock, chunk_answers=5, chunk_seconds=3600)
    with pytest.raises(RuntimeError, match="the engine failed"):
        run.answer("loglikelihood", REQUESTS, engine(clock, asked, fail_at=8))
    # chunk 1 (5 answers) was full; of chunk 2, the call of 2 before the failing one is kept too
    assert [len(chunk) for chunk in kept] == [5, 2]


def test_results_added_one_at_a_time_are_kept_by_count_by_time_and_when_flushed():
    """The same keeping for a caller that computes one result at a time (an era's API answers)."""
    clock = Clock()
    kept, reports = [], []
    run = Keeping({"stored": 7}, keep=lambda chunk: kept.append(dict(chunk)), progress=reports.append,
                  chunk_size=3, chunk_seconds=10.0, clock=clock)  # fmt: skip
    assert run.find("stored", lambda value: value * 10) == 70 and run.reused == 1
    assert run.find("new", lambda value: value) is None
    for n in range(4):
        run.add(f"a{n}", n)
    assert kept == [{"a0": 0, "a1": 1, "a2": 2}]  # full at 3; a3 waits in the chunk under way
    assert run.find("a3", lambda value: value) == 3  # found before it is kept
    clock.now = 10.0
    run.add("a4", 4)  # the chunk's time is up
    assert kept[-1] == {"a3": 3, "a4": 4}
    run.add("a5", 5)
    run.flush()
    run.flush()  # nothing under way: nothing kept
    assert kept[-1] == {"a5": 5} and len(kept) == 3
    assert "stored" not in {key for chunk in kept for key in chunk}  # a stored result is never kept again
    assert [(r.stored, r.needed, r.computed) for r in reports] == [(4, 4, 3), (6, 6, 5), (7, 7, 6)]
