"""A model behind an OpenAI-compatible server (vLLM, llama.cpp's server, TGI, ...), through the gateway.

Log-likelihoods come from the completions endpoint the way lm-evaluation-harness's
`local-completions` gets them: the prompt is context + continuation, sent with `echo`, `logprobs`
and `max_tokens` 0, and the continuation's token log-probabilities are summed. With the served
model's tokenizer (`tokenizer`, a `local/...` name) the prompt is sent as token ids split exactly as
the harness splits context and continuation; without it, as text, the continuation's tokens found by
their text offsets. Requests go `batch_size` prompts to an HTTP request, the requests concurrently
(the gateway's concurrency limit, retries and timeouts). Chats (letter probabilities, generation)
go to the chat endpoint of the same server.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Sequence

from eval_platform.common.gateway import ModelGateway, PromptLogprobs, redact
from eval_platform.common.models import (
    SERVED_PREFIX, Chat, Completion, GenerationRequest, LoglikelihoodRequest, ModelSettings, UnsupportedRequest,
)
from eval_platform.common.models.api_chat import ApiChatModel


@dataclass
class ServedCompletionsModel:
    name: str  # served/<the model's name on the server>
    gateway: ModelGateway
    tokenizer: Any = None  # the served model's tokenizer (a LocalCausalLM's encode rules), or None
    chat: ApiChatModel = field(init=False)
    rubric_judging: str = "json"

    def __post_init__(self) -> None:
        self.chat = ApiChatModel(f"openai/{self.served_name}", self.gateway)

    @property
    def served_name(self) -> str:
        return self.name.removeprefix(SERVED_PREFIX)

    @property
    def fingerprint(self) -> str:
        return self.name  # the server holds the weights; its model name identifies them

    def _prompt(self, request: LoglikelihoodRequest) -> tuple[list[int] | str, range]:
        """The prompt to send and the span of its continuation (token indices, or text offsets)."""
        if isinstance(request.context, Chat):
            raise UnsupportedRequest(f"{self.name}: log-likelihoods need a text context (the harness format); "
                                     "a chat would need the server's chat template")
        if self.tokenizer is not None:
            context, continuation = self.tokenizer.encode_pair(request.context, request.continuation)
            return context + continuation, range(len(context), len(context) + len(continuation))
        text = request.context + request.continuation
        return text, range(len(request.context.rstrip()), len(text))

    def loglikelihoods(self, requests: Sequence[LoglikelihoodRequest], batch_size: int = 8) -> list[float]:
        prompts = [self._prompt(request) for request in requests]

        async def every():
            batches = [prompts[start: start + batch_size] for start in range(0, len(prompts), batch_size)]
            answers = await asyncio.gather(*(self.gateway.aprompt_logprobs(self.served_name, [p for p, _ in batch])
                                             for batch in batches))
            return [answer for batch in answers for answer in batch]

        return [_continuation_logprob(answer, span, self.tokenizer is not None)
                for answer, (_, span) in zip(asyncio.run(every()), prompts)]

    def describe_placement(self) -> dict[str, Any]:
        return {"device": "served", "device_name": redact(self.gateway.api_base or "the provider's default endpoint")}

    def label_probabilities(self, chats: Sequence[Chat], labels: Sequence[Sequence[str]],
                            batch_size: int = 8) -> list[dict[str, float] | None]:
        return self.chat.label_probabilities(chats, labels, batch_size)

    def generate(self, requests: Sequence[GenerationRequest], batch_size: int = 8) -> list[str]:
        return self.chat.generate(requests, batch_size)

    async def acomplete(self, prompt: Chat, max_tokens: int, stop: Sequence[str] = (),
                        top_logprobs: int | None = None) -> Completion:
        return await self.chat.acomplete(prompt, max_tokens, stop, top_logprobs)


def open_served_model(name: str, settings: ModelSettings) -> ServedCompletionsModel:
    """A served model; with `served_tokenizer`, its prompts go as token ids of that local tokenizer."""
    from eval_platform.common.models.local import Placement, load_local_model

    tokenizer = load_local_model(settings.served_tokenizer, settings.cache_dir, Placement()) \
        if settings.served_tokenizer else None
    return ServedCompletionsModel(name, settings.gateway or ModelGateway(), tokenizer)


def _continuation_logprob(answer: PromptLogprobs, span: range, by_token: bool) -> float:
    """The summed log-probabilities of the continuation's tokens: those at the token indices of
    `span`, or whose text offsets fall in it (a generated token after the prompt never counts)."""
    positions = span if by_token else [i for i, offset in enumerate(answer.text_offset) if offset in span]
    values = [answer.token_logprobs[i] for i in positions]
    if not values or any(value is None for value in values):
        raise ValueError("the server returned no log-probability for a continuation token")
    return float(sum(values))
