"""A model behind an API (any litellm provider string) answering benchmark prompts via the gateway.

Letter mode reads the first answer token's `top_logprobs` when the provider returns them, keeping
the labels' probabilities renormalised to sum to 1; otherwise the label is parsed from the reply
text (probability 1), and a reply naming no label gives no distribution (counted as wrong).
Log-likelihood scoring needs prompt log-probabilities that chat APIs do not give.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass, field
from typing import Sequence

from evaluation_logic.gateway import ModelGateway, chat


def label_distribution(top_logprobs: dict[str, float] | None, text: str,
                       labels: Sequence[str]) -> dict[str, float] | None:
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
    api_base: str | None = None
    gateway: ModelGateway = field(init=False)

    def __post_init__(self) -> None:
        self.gateway = ModelGateway(api_base=self.api_base)

    @property
    def fingerprint(self) -> str:
        return self.name  # providers expose no weights hash; the model string identifies the model

    def label_probabilities(self, chats: Sequence[tuple[str, str]], labels: Sequence[Sequence[str]],
                            batch_size: int = 8) -> list[dict[str, float] | None]:
        async def one(system: str, user: str, item_labels: Sequence[str]):
            completion = await self.gateway.acomplete(self.name, chat(system, user), max_tokens=5, top_logprobs=20)
            return label_distribution(completion.first_token_logprobs, completion.text, item_labels)

        async def every():
            return await asyncio.gather(*(one(s, u, item) for (s, u), item in zip(chats, labels)))

        return asyncio.run(every())

    def generate(self, chats: Sequence[tuple[str, str]], max_new_tokens: int = 256, batch_size: int = 8) -> list[str]:
        async def every():
            replies = await asyncio.gather(*(self.gateway.acomplete(self.name, chat(s, u), max_tokens=max_new_tokens)
                                             for s, u in chats))
            return [reply.text for reply in replies]

        return asyncio.run(every())

    def _no_prompt_logprobs(self) -> ValueError:
        return ValueError(f"{self.name} is served through a chat API without prompt log-probabilities: "
                          "use the letter mode (or a local model) for log-likelihood scoring")

    def loglikelihoods(self, items, batch_size: int = 8):
        raise self._no_prompt_logprobs()

    def render_chat(self, system_prompt: str, user_prompt: str) -> str:
        raise self._no_prompt_logprobs()  # a chat API's template is not ours to render
