"""Why a generation ended, carried with its text.

A backend's `generate` returns `Generation`s: each is the completion's text (a `str`, so every caller
that reads text reads it unchanged) with `ended`, one of the endings below. A result's share of answers cut
at the budget comes from these (a reasoning model's score can double when its budget grows).
"""

from __future__ import annotations

STOP_SEQUENCE = "stop_sequence"  # cut at one of the request's stop sequences
END_TOKEN = "end_token"  # the model's end-of-sequence token
BUDGET = "budget"  # the request's max_new_tokens reached
REASONING_OPEN = "reasoning_open"  # the budget reached inside the reasoning block (its end marker not written)
STOPPED = "stopped"  # an API's `stop`: its end token or a stop sequence, which it does not tell apart
CUT_AT_BUDGET = frozenset({BUDGET, REASONING_OPEN})


class Generation(str):
    """A completion's text and why it ended (`ended`: one of the endings above, a provider's own reason
    where it gives another, None where unknown, as for an answer stored before endings were)."""

    ended: str | None

    def __new__(cls, text: str, ended: str | None = None) -> Generation:
        generation = super().__new__(cls, text)
        generation.ended = ended
        return generation


def ended_of(text: str) -> str | None:
    """Why a text ended, where it is a `Generation` (None for a plain text)."""
    return getattr(text, "ended", None)


def with_reasoning_ending(text: str, reasoning_end: str | None) -> str:
    """A generation cut at the budget before it wrote `reasoning_end` (`</think>`), as one cut with
    its reasoning block left open; any other text as it is."""
    if reasoning_end and ended_of(text) == BUDGET and reasoning_end not in text:
        return Generation(text, REASONING_OPEN)
    return text


def api_ending(finish_reason: str | None) -> str | None:
    """An API's `finish_reason` as an ending: `length` is the budget, `stop` the model stopping
    (an end token or a stop sequence); another reason (`content_filter`, ...) as the provider says it."""
    return {"length": BUDGET, "stop": STOPPED, None: None}.get(finish_reason, finish_reason)
