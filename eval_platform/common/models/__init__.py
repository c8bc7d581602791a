"""The one model protocol every backend implements, and the registry that opens a model by its
name's prefix. The requests it answers (`Chat`, `LoglikelihoodRequest`, `GenerationRequest`,
`Completion`, `Generation`, `Sampling`) are the local engine's (the `eval_engine` package), which
the `local/` backend is.

Like lm-evaluation-harness's `LM`: a model scores continuations (`loglikelihoods`), gives the
probabilities of answer labels after a chat (`label_probabilities`) and generates text
(`generate`); like a chat API, it answers one chat with its usage and cost (`acomplete`), which
is what compression, mutation, JSON judges and blind-evaluation answers ask. Its `fingerprint`
identifies the exact weights (or served model) and precision, so stored results of different
models never mix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from eval_engine import (
    DEFAULT_LOCAL_MODEL,
    Chat,
    Completion,
    Generation,
    GenerationRequest,
    LoglikelihoodRequest,
    Sampling,
)
from eval_platform.environment import MODEL_CACHE
from eval_platform.registry import Registry


class LanguageModel(Protocol):
    name: str
    fingerprint: str
    # The judge it is asked by where none is named (common/judges.py): "written" ("json", its older
    # name: it writes its answer) or "probabilities" (a small local model: next-token distributions).
    rubric_judging: str

    def loglikelihoods(self, requests: Sequence[LoglikelihoodRequest], batch_size: int) -> list[float]:
        """log P(continuation | context) for each request."""
        ...

    def label_probabilities(
        self, chats: Sequence[Chat], labels: Sequence[Sequence[str]], batch_size: int
    ) -> list[dict[str, float] | None]:
        """For each chat, the first answer token's distribution over its labels (sums to 1), or
        None where the model's reply names no label."""
        ...

    def generate(self, requests: Sequence[GenerationRequest], batch_size: int) -> list[Generation]:
        """Completions, cut at the first stop sequence (greedy or sampled, as each request asks),
        each with why it ended."""
        ...

    async def acomplete(
        self,
        chat: Chat,
        max_tokens: int,
        stop: Sequence[str] = (),
        top_logprobs: int | None = None,
        sampling: Sampling | None = None,
        sample: int = 0,
    ) -> Completion:
        """One chat answer with its tokens and cost: greedy, or sample `sample` drawn with `sampling`."""
        ...

    def describe_placement(self) -> Mapping[str, object]:
        """Where the model computes: `device`, `device_name`, `dtype` and (in this process) torch's
        `threads` and the engine's path for it (`engine`), for the run's environment record."""
        ...


class UnsupportedRequest(ValueError):
    """A request this backend cannot answer (e.g. prompt log-probabilities from a chat API)."""


class ModelSettings(BaseModel):
    """A model's settings, declared once: the `evaluation_model` resource's config fields, a roster
    entry's model fields (each optional there, the resource's value where unset) and what a backend
    opens a model with are all this class's fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(
        default=DEFAULT_LOCAL_MODEL,
        description="local/<name, path or hub id>, served/<name on the "
        "gateway's server>, or a litellm chat model string.",
    )
    served_tokenizer: str | None = Field(
        default=None,
        description="served/ models: a local model with the same tokenizer, to send token ids as the harness does.",
    )
    device: str = Field(
        default="auto", description="Local models: auto (CUDA, then Apple MPS, then CPU), cpu, cuda, cuda:N or mps."
    )
    dtype: str = Field(
        default="auto",
        description="Local models: auto (bfloat16 on a GPU that supports it, float32 "
        "on the CPU), float32, bfloat16 or float16.",
    )
    device_map: str | None = Field(
        default=None,
        description='Local models: "auto" spreads a model larger than one GPU over the GPUs (and the CPU).',
    )
    batch_size: int = Field(default=8, gt=0, description="Items per forward pass.")
    max_new_tokens: int = Field(default=160, gt=0, description="Generation budget per answer (GSM8K, chat format).")
    model_cache_dir: str = Field(default=str(MODEL_CACHE), description="Where converted weights are kept.")
    torch_threads: int | None = Field(
        default=None, description="Local models: torch's intra-op threads (unset: torch's default)."
    )
    skip_logprob_check: bool = Field(
        default=False,
        description="served/ models: score without first checking "
        "the server's prompt log-probabilities (recorded "
        "with the run). Only for a server known to be right.",
    )


# Backends by the prefix of a model's name, each "module:function(name, settings, gateway)" imported
# when a model of its prefix is first opened, so registering one costs nothing at import time; the
# longest prefix a name starts with is its backend's. Any other name (the empty prefix) is a litellm
# provider string (openai/..., anthropic/..., gemini/...).
BACKENDS: Registry[Callable[..., LanguageModel]] = Registry("model backend")
BACKENDS.register("local/", "eval_platform.common.models:open_local_model")
BACKENDS.register("served/", "eval_platform.common.models.served:open_served_model")
BACKENDS.register("", "eval_platform.common.models.api_chat:open_api_model")
LOCAL_PREFIX, SERVED_PREFIX = "local/", "served/"
# A backend's `gateway` is the gateway's ModelGateway, which imports this module: not named here.


def open_model(
    name: str, settings: ModelSettings | None = None, gateway: Any = None
) -> LanguageModel:  # (the gateway builds on models)
    """The model behind a name: `local/<name, path or hub id>` runs in this process (on the
    settings' device and dtype, default the best this machine has); `served/<name>` is a model on
    the OpenAI-compatible server at the gateway's api_base; any other litellm provider string
    (`openai/gpt-4o-mini`, ...) is a chat API through the gateway (a `ModelGateway`; a default one
    where None)."""
    settings = settings or ModelSettings()
    prefix = max((prefix for prefix in BACKENDS.names() if name.startswith(prefix)), key=len)
    return BACKENDS.get(prefix)(name, settings, gateway)


def open_local_model(
    name: str, settings: ModelSettings, gateway: Any = None
) -> LanguageModel:  # (the gateway builds on models)
    """A model of the local engine on the settings' device and precision (`auto`: the best this
    machine has), its converted weights under the settings' model cache."""
    from eval_engine import detect_placement, load_local_model

    placement = detect_placement(settings.device, settings.dtype, settings.device_map)
    return load_local_model(name, settings.model_cache_dir, placement, settings.torch_threads)
