"""The response cache: a chat answer asked again (the same model, messages and settings, and for a
sampled request the same sample) is the stored one, and a request under way is answered once. Its
answers are reused and kept by the platform's one mechanism for that, `Keeping` (common/keeping.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from eval_engine import Chat, Completion, Sampling
from eval_platform.common.gateway.parameters import chat, sampling_parameters
from eval_platform.common.keeping import Keeping
from eval_platform.common.models import LanguageModel


class ResponseCache(Protocol):
    """Answers of calls, by request (a sampled call's request names its sample)."""

    def lookup(self, key: str) -> Completion | None: ...

    def remember(self, key: str, model: str, request: Mapping[str, object], completion: Completion) -> None: ...


AnsweredCall = tuple[str, Mapping[str, object], Completion]  # as the cache keeps it: model, request, answer


@dataclass
class KeptResponses:
    """A response cache over a `Keeping`: the answers it holds stored (completions by request key)
    are reused; those answered since are kept through its `keep`, a chunk at a time and whenever
    its owner `flush`es it."""

    keeping: Keeping[AnsweredCall] = field(default_factory=lambda: Keeping[AnsweredCall]())

    def lookup(self, key: str) -> Completion | None:
        found = self.keeping.find(key, lambda stored: ("", {}, stored))
        return None if found is None else replace(found[2], cached=True, cost_usd=0.0, attempts=0, duration_ms=0)

    def remember(self, key: str, model: str, request: Mapping[str, object], completion: Completion) -> None:
        self.keeping.add(key, (model, request, completion))


def request_key(model: str, request: Mapping[str, object]) -> str:
    """The cache key of a call: its model, messages and parameters."""
    return hashlib.sha256(json.dumps([model, request], sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass
class ResponseCachedModel:
    """A model whose chat answers (`acomplete`) come from the response cache where the same request
    was answered before: a greedy request by its messages and settings at temperature 0, a sampled
    one by its sampling settings and sample index too, so neither is ever served for the other; a
    request already under way is answered once for every caller. Everything else is the wrapped model's."""

    model: LanguageModel
    cache: ResponseCache
    _in_flight: dict[str, asyncio.Future] = field(default_factory=dict, repr=False)

    def __getattr__(self, attribute: str) -> object:
        return getattr(self.model, attribute)

    async def acomplete(
        self,
        prompt: Chat,
        max_tokens: int,
        stop: Sequence[str] = (),
        top_logprobs: int | None = None,
        sampling: Sampling | None = None,
        sample: int = 0,
    ) -> Completion:
        request = {
            "messages": chat(prompt.system, prompt.user),
            "max_tokens": max_tokens,
            "top_logprobs": top_logprobs,
            "stop": list(stop) or None,
            **sampling_parameters(sampling, sample),
        }
        key = request_key(self.model.name, request)
        if (hit := self.cache.lookup(key)) is not None:
            return hit
        if key in self._in_flight:  # the same request is under way: its answer is this one's
            answer = await asyncio.shield(self._in_flight[key])
            return replace(answer, cached=True, cost_usd=0.0, attempts=0, duration_ms=0)
        future = self._in_flight[key] = asyncio.get_running_loop().create_future()
        try:
            completion = await (
                self.model.acomplete(prompt, max_tokens, stop, top_logprobs, sampling, sample)
                if sampling is not None
                else self.model.acomplete(prompt, max_tokens, stop, top_logprobs)  # as every model takes it
            )
        except BaseException as error:
            del self._in_flight[key]
            future.set_exception(error)
            future.exception()  # retrieved: no "never retrieved" warning when no one else waited
            raise
        self.cache.remember(key, self.model.name, request, completion)
        del self._in_flight[key]
        future.set_result(completion)
        return completion
