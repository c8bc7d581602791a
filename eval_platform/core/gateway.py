"""One model gateway for all text generation: litellm `acompletion` at temperature 0, with a
timeout, retries with exponential backoff and a concurrency limit. Provider strings are litellm's
(`openai/...`, `anthropic/...`, `gemini/...`, or `openai/<name>` with an OpenAI-compatible
`api_base`); `local/<name>` runs a local Hugging Face model through our custom provider.
API keys are read by litellm from the environment and never pass through this module."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Completion:
    text: str
    duration_ms: int
    attempts: int
    first_token_logprobs: dict[str, float] | None = None


@dataclass
class ModelGateway:
    api_base: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 0.5
    max_concurrency: int = 8
    # One semaphore per event loop (a semaphore is bound to the loop it is first used in); the
    # entries of closed loops are dropped, so repeated asyncio.run calls do not accumulate them.
    _semaphores: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = field(default_factory=dict, repr=False)

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        for closed in [other for other in self._semaphores if other.is_closed()]:
            del self._semaphores[closed]
        if loop not in self._semaphores:
            self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency)
        return self._semaphores[loop]

    async def acomplete(self, model: str, messages: list[dict[str, str]], max_tokens: int = 512,
                        top_logprobs: int | None = None, stop: list[str] | None = None) -> Completion:
        """One chat completion; retried on timeouts, connection errors, 429 and 5xx."""
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network fetch at import
        import litellm

        from eval_platform.core import local_provider

        local_provider.register()
        retryable = (litellm.Timeout, litellm.APIConnectionError, litellm.RateLimitError,
                     litellm.InternalServerError, litellm.ServiceUnavailableError)
        extra: dict[str, Any] = {}
        if top_logprobs:
            extra.update(logprobs=True, top_logprobs=top_logprobs)
        if stop:
            extra["stop"] = stop
        if self.api_base and not model.startswith(f"{local_provider.PROVIDER}/"):
            extra["api_base"] = self.api_base
        async with self._semaphore():
            start = time.perf_counter()
            for attempt in range(1, self.max_retries + 2):
                try:
                    response = await litellm.acompletion(
                        model=model, messages=messages, temperature=0, max_tokens=max_tokens,
                        timeout=self.timeout_s, num_retries=0, max_retries=0, **extra,
                    )
                    break
                except retryable:
                    if attempt > self.max_retries:
                        raise
                    await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
        choice = response.choices[0]
        return Completion(
            text=choice.message.content or "",
            duration_ms=round((time.perf_counter() - start) * 1000),
            attempts=attempt,
            first_token_logprobs=_first_token_logprobs(choice),
        )

    def complete(self, model: str, messages: list[dict[str, str]], **kwargs: Any) -> Completion:
        return asyncio.run(self.acomplete(model, messages, **kwargs))


def _first_token_logprobs(choice: Any) -> dict[str, float] | None:
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    return {entry.token: entry.logprob for entry in content[0].top_logprobs}


def chat(system: str | None, user: str) -> list[dict[str, str]]:
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
