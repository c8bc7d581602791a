"""The one model protocol every backend implements, and the requests it answers.

Like lm-evaluation-harness's `LM`: a model scores continuations (`loglikelihoods`), gives the
probabilities of answer labels after a chat (`label_probabilities`), and generates text
(`generate`). Its `fingerprint` identifies the exact weights (or served model) and precision, so
stored results of different models never mix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

if TYPE_CHECKING:
    from eval_platform.core.gateway import ModelGateway
    from eval_platform.core.models.local import Placement


@dataclass(frozen=True)
class Chat:
    """A system and a user turn, ready for the assistant's reply."""

    system: str
    user: str


@dataclass(frozen=True)
class LoglikelihoodRequest:
    """log P(continuation | context); a Chat context is rendered by the model's chat template."""

    context: Chat | str
    continuation: str


@dataclass(frozen=True)
class GenerationRequest:
    """Greedy text after a prompt, cut at the first stop sequence."""

    prompt: Chat | str
    max_new_tokens: int
    stop: tuple[str, ...] = ()


class LanguageModel(Protocol):
    name: str
    fingerprint: str

    def loglikelihoods(self, requests: Sequence[LoglikelihoodRequest], batch_size: int) -> list[float]:
        """log P(continuation | context) for each request."""

    def label_probabilities(self, chats: Sequence[Chat], labels: Sequence[Sequence[str]],
                            batch_size: int) -> list[dict[str, float] | None]:
        """For each chat, the first answer token's distribution over its labels (sums to 1), or
        None where the model's reply names no label."""

    def generate(self, requests: Sequence[GenerationRequest], batch_size: int) -> list[str]:
        """Greedy completions, cut at the first stop sequence."""

    def describe_placement(self) -> dict[str, Any]:
        """Where the model computes: `device`, `device_name`, `dtype` and (in this process) torch's
        `threads`, for the run's environment record."""


class UnsupportedRequest(ValueError):
    """A request this backend cannot answer (e.g. prompt log-probabilities from a chat API)."""


LOCAL_PREFIX = "local/"
SERVED_PREFIX = "served/"


def open_model(name: str, gateway: "ModelGateway", cache_dir: str | None = None,
               placement: "Placement | None" = None, served_tokenizer: str | None = None) -> LanguageModel:
    """The model behind a name: `local/<name, path or hub id>` runs in this process (on
    `placement`, default the best this machine has); `served/<name>` is a model on the
    OpenAI-compatible server at the gateway's api_base, with log-likelihoods from its completions
    endpoint (`served_tokenizer`: a local model with the same tokenizer); any other litellm
    provider string (`openai/gpt-4o-mini`, ...) is a chat API through the gateway."""
    if name.startswith(LOCAL_PREFIX):
        from eval_platform.core.models.local import DEFAULT_CACHE_DIR, load_local_model

        return load_local_model(name, cache_dir or DEFAULT_CACHE_DIR, placement)
    if name.startswith(SERVED_PREFIX):
        from eval_platform.core.models.local import DEFAULT_CACHE_DIR, Placement, load_local_model
        from eval_platform.core.models.served import ServedCompletionsModel

        tokenizer = load_local_model(served_tokenizer, cache_dir or DEFAULT_CACHE_DIR, Placement()) \
            if served_tokenizer else None
        return ServedCompletionsModel(name, gateway, tokenizer)
    from eval_platform.core.models.api_chat import ApiChatModel

    return ApiChatModel(name, gateway)
