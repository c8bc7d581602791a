"""A model behind a chat API (any litellm provider string), answering through the model gateway.

Labels come from the first answer token's `top_logprobs` when the provider returns them (the
labels' probabilities renormalised to sum to 1); otherwise the label is parsed from the reply
text (probability 1), and a reply naming no label gives no distribution (counted as wrong).
Chat APIs give no prompt log-probabilities, so `loglikelihoods` is refused.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from eval_engine import Generation, Sampling
from eval_platform.common.gateway import ModelGateway, chat, redact
from eval_platform.common.models import (
    Chat,
    Completion,
    GenerationRequest,
    LoglikelihoodRequest,
    ModelSettings,
    UnsupportedRequest,
)


def label_distribution(
    top_logprobs: dict[str, float] | None, text: str, labels: Sequence[str]
) -> dict[str, float] | None:
    """Label probabilities from first-token log-probabilities, else from the text, else None."""
    if top_logprobs:
        best: dict[str, float] = {}
        for token, logprob in top_logprobs.items():
            label = token.strip().rstrip(".):").upper() if token.strip().isalpha() else token.strip().rstrip(".):")
            if label in labels:
                best[label] = max(best.get(label, -math.inf), logprob)
        if best:
            total = sum(math.exp(v) for v in best.values())
            return {label: math.exp(best[label]) / total if label in best else 0.0 for label in labels}
    for match in re.finditer(r"\b(\w)\b", text):
        if match.group(1) in labels:
            return {label: float(label == match.group(1)) for label in labels}
    return None


@dataclass
class ApiChatModel:
    name: str
    gateway: ModelGateway
    rubric_judging: str = "json"

    @property
    def fingerprint(self) -> str:
        return self.name  # providers expose no weights hash; the model string identifies the model

    def label_probabilities(
        self, chats: Sequence[Chat], labels: Sequence[Sequence[str]], batch_size: int = 8
    ) -> list[dict[str, float] | None]:
        async def one(prompt: Chat, item_labels: Sequence[str]):
            completion = await self.acomplete(prompt, max_tokens=5, top_logprobs=20)
            return label_distribution(completion.first_token_logprobs, completion.text, item_labels)

        async def every():
            return await asyncio.gather(*(one(prompt, item) for prompt, item in zip(chats, labels, strict=False)))

        return asyncio.run(every())

    def generate(self, requests: Sequence[GenerationRequest], batch_size: int = 8) -> list[Generation]:
        async def one(request: GenerationRequest) -> Generation:
            if not isinstance(request.prompt, Chat):
                raise UnsupportedRequest(f"{self.name} is a chat API: it answers chats, not raw text prompts")
            reply = await self.acomplete(
                request.prompt, request.max_new_tokens, request.stop, sampling=request.sampling, sample=request.sample
            )
            return Generation(reply.text, reply.ended)

        async def every():
            return await asyncio.gather(*(one(request) for request in requests))

        return asyncio.run(every())

    async def acomplete(
        self,
        prompt: Chat,
        max_tokens: int,
        stop: Sequence[str] = (),
        top_logprobs: int | None = None,
        sampling: Sampling | None = None,
        sample: int = 0,
    ) -> Completion:
        return await self.gateway.acomplete(
            self.name,
            chat(prompt.system, prompt.user),
            max_tokens=max_tokens,
            top_logprobs=top_logprobs,
            stop=list(stop) or None,
            sampling=sampling,
            sample=sample,
        )

    def describe_placement(self) -> dict[str, str]:
        return {"device": "api", "device_name": redact(self.gateway.api_base or self.name.split("/")[0])}

    def loglikelihoods(self, requests: Sequence[LoglikelihoodRequest], batch_size: int = 8) -> list[float]:
        raise UnsupportedRequest(
            f"{self.name} is served through a chat API without prompt log-probabilities: use the letter mode, "
            "a local model, or a completions endpoint (served/...) for log-likelihood scoring"
        )


def open_api_model(name: str, settings: ModelSettings, gateway: ModelGateway | None = None) -> ApiChatModel:
    return ApiChatModel(name, gateway or ModelGateway())
