"""The gateway: every call to a model behind an API, through litellm (or plain HTTP for prompt
log-probabilities), with a deadline per attempt, retries with exponential backoff, routing to a
server's replicas in turn and a concurrency limit per server."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack, cast

from eval_engine import Completion, Sampling, api_ending
from eval_platform.common.gateway.http import NO_KEY, PromptLogprobs, post, shared_client
from eval_platform.common.gateway.parameters import sampling_parameters
from eval_platform.common.gateway.redaction import ModelCallError
from eval_platform.common.gateway.retries import CallErrors, http_errors, litellm_errors, retry_after_s
from eval_platform.common.gateway.usage import cost, first_token_logprobs
from eval_platform.environment import litellm_offline, openai_api_key

if TYPE_CHECKING:
    from litellm.types.utils import ModelResponse

R = TypeVar("R")  # what an attempt at a call answers
MAX_RESPONSE_CHARS = 200_000  # far above any max_tokens the platform asks for; more is a broken provider


class ResponseTooLong(ValueError):
    """A response far longer than any the request allows (`completion`: the call, paid for, without
    its text)."""

    def __init__(self, completion: Completion, length: int):
        super().__init__(f"a response of {length:,} characters (limit {MAX_RESPONSE_CHARS:,})")
        self.completion = completion


def _litellm():
    litellm_offline()  # no network fetch at import
    import litellm

    # httpx, not aiohttp: aiohttp's sessions outlive each asyncio.run and warn as unclosed.
    litellm.disable_aiohttp_transport = True
    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on every failed call
    return litellm


class CompletionOptions(TypedDict, total=False):
    """`ModelGateway.acomplete`'s keyword arguments after the model and messages."""

    max_tokens: int
    top_logprobs: int | None
    stop: list[str] | None
    sampling: Sampling | None
    sample: int


@dataclass
class ModelGateway:
    api_base: str | None = None  # one server, or several replicas of it separated by commas
    timeout_s: float = 60.0
    model_timeouts_s: dict[str, float] = field(default_factory=dict)  # a model's own, e.g. a slow reasoning model's
    max_retries: int = 3
    backoff_s: float = 0.5
    max_concurrency: int = 8  # calls in flight at once, per server
    # One semaphore per event loop (a semaphore is bound to the loop it is first used in); the
    # entries of closed loops are dropped, so repeated asyncio.run calls do not accumulate them.
    _semaphores: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = field(default_factory=dict, repr=False)
    _calls: Iterator[int] = field(default_factory=itertools.count, repr=False)

    @property
    def replicas(self) -> list[str]:
        """The servers `api_base` names (replicas of one model, as users run several vLLM engines)."""
        return [base.strip() for base in (self.api_base or "").split(",") if base.strip()]

    def timeout_for(self, model: str) -> float:
        """The seconds an attempt at `model` may take (its litellm string, with or without the
        route prefix the gateway adds for completions)."""
        return self.model_timeouts_s.get(model.removeprefix("text-completion-openai/"), self.timeout_s)

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        for closed in [other for other in self._semaphores if other.is_closed()]:
            del self._semaphores[closed]
        if loop not in self._semaphores:
            self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency * max(1, len(self.replicas)))
        return self._semaphores[loop]

    async def _call(
        self, model: str, attempt: Callable[[dict[str, str]], Awaitable[R]], errors: CallErrors | None = None
    ) -> tuple[R, int, int]:
        """(response, attempts, milliseconds): each attempt within the model's timeout (a response that
        never ends is cut off), retried on timeouts, connection errors, 429 (after its
        Retry-After) and 5xx (`errors`: which those are; litellm's by default). Calls go to the
        replicas in turn, and a retry to the next replica, so one failing server costs a retry, not
        the call."""
        retryable, timed_out = errors or litellm_errors()
        first, timeout_s = next(self._calls), self.timeout_for(model)
        async with self._semaphore():
            start = time.perf_counter()
            for number in range(1, self.max_retries + 2):
                try:
                    response = await asyncio.wait_for(
                        attempt(self._routing(model, first + number - 1)), timeout=timeout_s + 1
                    )
                    return response, number, round((time.perf_counter() - start) * 1000)
                except retryable as error:
                    if number > self.max_retries:
                        if isinstance(error, asyncio.TimeoutError):
                            error = timed_out(f"no complete response within {timeout_s} s")
                        raise ModelCallError(error) from None
                    delay = self.backoff_s * 2 ** (number - 1)
                    await asyncio.sleep(max(delay, retry_after_s(error) or 0.0))
                except Exception as error:  # not worth retrying: a bad request, a refused key, ...
                    raise ModelCallError(error) from None
        raise AssertionError("unreachable")

    def _routing(self, model: str, turn: int) -> dict[str, str]:
        """Where a call goes: the replica whose turn it is; an OpenAI-compatible server gets a
        placeholder key where OPENAI_API_KEY is not set, as lm-evaluation-harness sends one, since
        a local vLLM or llama.cpp server needs none but the client refuses to send a request without one."""
        replicas = self.replicas
        if not replicas:
            return {}
        no_key = model.startswith(("openai/", "text-completion-openai/")) and not openai_api_key()
        return {"api_base": replicas[turn % len(replicas)], **({"api_key": NO_KEY} if no_key else {})}

    async def acomplete(
        self,
        model: str,
        messages: list[dict[str, str]],
        max_tokens: int = 512,
        top_logprobs: int | None = None,
        stop: list[str] | None = None,
        sampling: Sampling | None = None,
        sample: int = 0,
    ) -> Completion:
        """One chat completion at temperature 0, or sample `sample` drawn with `sampling`
        (`sampling_parameters`), with its usage and cost."""
        return await self._complete(
            model, messages, max_tokens, top_logprobs, stop, sampling_parameters(sampling, sample)
        )

    async def _complete(
        self,
        model: str,
        messages: list[dict[str, str]],
        max_tokens: int,
        top_logprobs: int | None,
        stop: list[str] | None,
        parameters: Mapping[str, float],
    ) -> Completion:
        litellm = _litellm()
        extra: dict[str, Any] = dict(parameters)
        if top_logprobs:
            extra.update(logprobs=True, top_logprobs=top_logprobs)
        if stop:
            extra["stop"] = stop
        response, attempts, milliseconds = await self._call(
            model,
            lambda routing: cast(  # litellm's result type has the stream wrapper a call without `stream` never gets
                "Awaitable[ModelResponse]",
                litellm.acompletion(
                    model=model,
                    messages=messages,
                    max_tokens=max_tokens,
                    timeout=self.timeout_for(model),
                    num_retries=0,
                    max_retries=0,
                    **extra,
                    **routing,
                ),
            ),
        )
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        text = choice.message.content or ""
        completion = Completion(
            text=text,
            duration_ms=milliseconds,
            attempts=attempts,
            first_token_logprobs=first_token_logprobs(choice),
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            cost_usd=cost(litellm, response, model),
            ended=api_ending(getattr(choice, "finish_reason", None)),
        )
        if len(text) > MAX_RESPONSE_CHARS:
            raise ResponseTooLong(replace(completion, text=""), len(text))
        return completion

    def complete(self, model: str, messages: list[dict[str, str]], **kwargs: Unpack[CompletionOptions]) -> Completion:
        return asyncio.run(self.acomplete(model, messages, **kwargs))

    async def aprompt_logprobs(self, model: str, prompts: Sequence[list[int] | str]) -> list[PromptLogprobs]:
        """The log-probability of every token of each prompt, from an OpenAI-compatible completions
        endpoint, several prompts per request, asked as lm-evaluation-harness's `local-completions`
        asks: `echo`, `logprobs` 1 and `max_tokens` 1 (some servers refuse 0; the generated token
        follows the prompt's and is never counted). The request goes over plain HTTP and its answer
        is read as plain JSON: the OpenAI client behind litellm builds a typed object for every
        token of every prompt, milliseconds per prompt, more than an engine takes to answer it."""
        body = {
            "model": model,
            "prompt": list(prompts),
            "echo": True,
            "logprobs": 1,
            "max_tokens": 1,
            "temperature": 0,
        }
        route = f"text-completion-openai/{model}"
        response, _, _ = await self._call(
            route, lambda routing: post("completions", body, routing, self.timeout_for(route)), http_errors()
        )
        choices = sorted(response.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != len(prompts):
            raise ValueError(f"{model} answered {len(choices)} choices for {len(prompts)} prompts")
        return [
            PromptLogprobs(
                logprobs.get("tokens") or [], logprobs.get("token_logprobs") or [], logprobs.get("text_offset") or []
            )
            for logprobs in (c.get("logprobs") or {} for c in choices)
        ]

    def connections(self) -> contextlib.AbstractAsyncContextManager[None]:
        """The block's plain HTTP calls share one client and its open connections (http.py)."""
        return shared_client()
