"""The requests the engine answers, and what it answers with: the model protocol's vocabulary.

A model scores continuations (`LoglikelihoodRequest`), generates text (`GenerationRequest`, greedy or
sampled) and answers one chat with its usage (`Completion`); a prompt is a `Chat` (rendered by the
model's chat template) or plain text. The platform's model protocol (its `LanguageModel`) and every
one of its backends speak these.
"""

from __future__ import annotations

from dataclasses import dataclass

from eval_engine.sampling import Sampling


@dataclass(frozen=True)
class Chat:
    """A system and a user turn, ready for the assistant's reply (no system message when empty)."""

    system: str
    user: str


@dataclass(frozen=True)
class LoglikelihoodRequest:
    """log P(continuation | context); a Chat context is rendered by the model's chat template."""

    context: Chat | str
    continuation: str


@dataclass(frozen=True)
class GenerationRequest:
    """Text after a prompt, cut at the first stop sequence: greedy, or sample `sample` of the
    prompt's drawn with `sampling` (each sample index its own draw, sampling.py)."""

    prompt: Chat | str
    max_new_tokens: int
    stop: tuple[str, ...] = ()
    sampling: Sampling | None = None
    sample: int = 0


@dataclass(frozen=True)
class Completion:
    """One chat answer, with what it took and cost."""

    text: str
    duration_ms: int
    attempts: int
    first_token_logprobs: dict[str, float] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None  # what the call cost: None where no price is known, 0 from the cache
    cached: bool = False  # answered from the response cache, not the model
    ended: str | None = None  # why it ended (endings.py), where the backend says
