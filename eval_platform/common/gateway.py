"""What wraps every call to a model behind an API: litellm at temperature 0 (or sampled, with the
request's temperature, top-p and a seed of its own per sample), with a deadline per
attempt, retries with exponential backoff (honouring a 429's Retry-After), a concurrency limit,
and each call's tokens and cost; a response cache for any model's chat answers; and redaction.

The gateway routes nothing: models are opened by name through the model registry, and the API and
served backends make their calls through it. A served model's prompt log-probabilities (the
completions endpoint, every prompt token echoed) go over plain HTTP and are read as plain JSON,
with the same deadlines, retries and concurrency limit: litellm's client builds a typed object per
token, which costs more than an engine takes to answer. Provider strings are litellm's (`openai/...`,
`anthropic/...`, `gemini/...`, or `openai/<name>` with an OpenAI-compatible `api_base`). API keys
are read by litellm from the environment; a failed call is raised as a `ModelCallError` whose text
has every secret of the environment redacted (a provider or proxy may echo the key it was sent), so
no key reaches DuckDB or a log."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import hashlib
import itertools
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

from eval_engine import Sampling, api_ending
from eval_platform.common.models import Chat, Completion, LanguageModel
from eval_platform.environment import litellm_offline, openai_api_key, secrets

MAX_RETRY_AFTER_S = 60.0  # the longest Retry-After honoured
NO_KEY = "EMPTY"  # the key sent to an OpenAI-compatible server where none is set
MAX_RESPONSE_CHARS = 200_000  # far above any max_tokens the platform asks for; more is a broken provider


BEARER = re.compile(r"(Bearer\s+)(?!\[)[^\s'\",}]+", re.IGNORECASE)  # not a placeholder already
MAX_ERROR_CHARS = 500


def redact(text: str) -> str:
    """`text` with the value of every secret-named environment variable (…_API_KEY, …TOKEN,
    …SECRET, …PASSWORD) and every bearer token replaced by a placeholder."""
    for name, value in secrets().items():
        text = text.replace(value, f"[{name} redacted]")
    return BEARER.sub(r"\1[redacted]", text)


def describe_error(error: BaseException) -> str:
    """What went wrong, as stored and logged: its type and message, secrets redacted, bounded."""
    text = str(error) if isinstance(error, ModelCallError) else f"{type(error).__name__}: {error}"
    return redact(text)[:MAX_ERROR_CHARS]


class ModelCallError(RuntimeError):
    """A call that failed after its retries: the provider's error type and message, secrets redacted
    (the original is not chained, so it is not serialised into Dagster's event log either)."""

    def __init__(self, error: BaseException):
        super().__init__(redact(f"{type(error).__name__}: {error}"))


class ResponseTooLong(ValueError):
    """A response far longer than any the request allows (`completion`: the call, paid for, without
    its text)."""

    def __init__(self, completion: Completion, length: int):
        super().__init__(f"a response of {length:,} characters (limit {MAX_RESPONSE_CHARS:,})")
        self.completion = completion


class ResponseCache(Protocol):
    """Answers of calls, by request (a sampled call's request names its sample)."""

    def lookup(self, key: str) -> Completion | None: ...

    def remember(self, key: str, model: str, request: dict[str, Any], completion: Completion) -> None: ...


@dataclass
class MemoryResponseCache:
    """A response cache held in memory: answers known beforehand, and those `remember`ed since,
    which `take_new` hands over (to be stored) once."""

    known: dict[str, Completion] = field(default_factory=dict)
    new: dict[str, tuple[str, dict[str, Any], Completion]] = field(default_factory=dict)

    def lookup(self, key: str) -> Completion | None:
        found = self.known.get(key)
        return None if found is None else replace(found, cached=True, cost_usd=0.0, attempts=0, duration_ms=0)

    def remember(self, key: str, model: str, request: dict[str, Any], completion: Completion) -> None:
        self.known[key] = completion
        self.new[key] = (model, request, completion)

    def take_new(self) -> dict[str, tuple[str, dict[str, Any], Completion]]:
        new, self.new = self.new, {}
        return new


def call_record(
    purpose: str, model: str, completion: Completion | None, error: str | None = None, judge_name: str | None = None
) -> dict[str, Any]:
    """One API call's row: what for, which model, its tokens and cost, whether the cache answered."""
    return {
        "purpose": purpose,
        "model": model,
        "judge_name": judge_name,
        "error": error,
        **{
            name: getattr(completion, name, None)
            for name in ("prompt_tokens", "completion_tokens", "cost_usd", "attempts", "duration_ms")
        },
        "cached": bool(completion and completion.cached),
    }


def sampling_parameters(sampling: Sampling | None, sample: int = 0) -> dict[str, Any]:
    """What a call sends to sample: `temperature` 0 for a greedy call; for sample `sample` of a
    sampled one, its temperature, the top-p, top-k and min-p it sets, and a seed of the sample's own
    (from the sampling seed and the index: providers that take a seed give each sample its draw)."""
    if sampling is None:
        return {"temperature": 0}
    seed = int.from_bytes(hashlib.blake2b(f"{sampling.seed}:{sample}".encode(), digest_size=4).digest(), "little")
    chosen = {"top_p": sampling.top_p, "top_k": sampling.top_k, "min_p": sampling.min_p}
    return {
        "temperature": sampling.temperature,
        **{name: value for name, value in chosen.items() if value is not None},
        "seed": seed >> 1,  # 31 bits: every provider's integer
    }


def request_key(model: str, request: dict[str, Any]) -> str:
    """The cache key of a call: its model, messages and parameters."""
    return hashlib.sha256(json.dumps([model, request], sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass(frozen=True)
class PromptLogprobs:
    """An echoed prompt's tokens and each token's log-probability (the first has none)."""

    tokens: list[str]
    token_logprobs: list[float | None]
    text_offset: list[int]


def _litellm():
    litellm_offline()  # no network fetch at import
    import litellm

    # httpx, not aiohttp: aiohttp's sessions outlive each asyncio.run and warn as unclosed.
    litellm.disable_aiohttp_transport = True
    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on every failed call
    return litellm


def retry_after_s(error: BaseException) -> float | None:
    """The wait a rate-limited response asks for, in seconds (`retry-after-ms`, or `Retry-After` as
    seconds or an HTTP date), where it gives one. litellm keeps the provider's headers on the
    error as `litellm_response_headers`; its `response` may carry none."""
    for headers in (
        getattr(error, "litellm_response_headers", None),
        getattr(getattr(error, "response", None), "headers", None),
    ):
        headers = {str(k).lower(): v for k, v in dict(headers or {}).items()}
        try:
            if "retry-after-ms" in headers:
                return min(float(headers["retry-after-ms"]) / 1000, MAX_RETRY_AFTER_S)
            if "retry-after" in headers:
                value = headers["retry-after"]
                seconds = (
                    float(value)
                    if value.strip().replace(".", "", 1).isdigit()
                    else (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
                )
                return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)
        except (TypeError, ValueError):
            continue
    return None


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
        self, model: str, attempt: Callable[[dict[str, Any]], Awaitable[Any]], errors: CallErrors | None = None
    ) -> tuple[Any, int, int]:
        """(response, attempts, milliseconds): each attempt within the model's timeout (a response that
        never ends is cut off), retried on timeouts, connection errors, 429 (after its
        Retry-After) and 5xx (`errors`: which those are; litellm's by default). Calls go to the
        replicas in turn, and a retry to the next replica, so one failing server costs a retry, not
        the call."""
        retryable, timed_out = errors or _litellm_errors()
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

    def _routing(self, model: str, turn: int) -> dict[str, Any]:
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
        parameters: dict[str, Any],
    ) -> Completion:
        litellm = _litellm()
        extra: dict[str, Any] = dict(parameters)
        if top_logprobs:
            extra.update(logprobs=True, top_logprobs=top_logprobs)
        if stop:
            extra["stop"] = stop
        response, attempts, milliseconds = await self._call(
            model,
            lambda routing: litellm.acompletion(
                model=model,
                messages=messages,
                max_tokens=max_tokens,
                timeout=self.timeout_for(model),
                num_retries=0,
                max_retries=0,
                **extra,
                **routing,
            ),
        )
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        text = choice.message.content or ""
        completion = Completion(
            text=text,
            duration_ms=milliseconds,
            attempts=attempts,
            first_token_logprobs=_first_token_logprobs(choice),
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            cost_usd=_cost(litellm, response, model),
            ended=api_ending(getattr(choice, "finish_reason", None)),
        )
        if len(text) > MAX_RESPONSE_CHARS:
            raise ResponseTooLong(replace(completion, text=""), len(text))
        return completion

    def complete(self, model: str, messages: list[dict[str, str]], **kwargs: Any) -> Completion:
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
            route, lambda routing: self._post(route, "completions", body, routing), _http_errors()
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

    @contextlib.asynccontextmanager
    async def connections(self) -> AsyncIterator[None]:
        """The block's plain HTTP calls share one client and its open connections (a client per
        call costs a connection and milliseconds of setup)."""
        import httpx

        async with httpx.AsyncClient(verify=_tls()) as client:
            token = _CLIENT.set(client)
            try:
                yield
            finally:
                _CLIENT.reset(token)

    async def _post(self, model: str, endpoint: str, body: dict[str, Any], routing: dict[str, Any]) -> dict[str, Any]:
        """One POST of `body` to an OpenAI-compatible server's `endpoint` (the replica `routing`
        names, else OpenAI's API), with the environment's OPENAI_API_KEY (or the placeholder
        `routing` gives): its JSON answer, or `ServerError` with its status and body."""
        import httpx

        base = routing.get("api_base") or OPENAI_API_BASE
        key = routing.get("api_key") or openai_api_key() or NO_KEY
        request = {
            "url": f"{base.rstrip('/')}/{endpoint}",
            "json": body,
            "headers": {"Authorization": f"Bearer {key}"},
            "timeout": self.timeout_for(model),
        }
        shared = _CLIENT.get()
        if shared is not None:
            response = await shared.post(**request)
        else:
            async with httpx.AsyncClient(verify=_tls()) as client:
                response = await client.post(**request)
        if response.status_code >= 400:
            raise (ServerBusy if response.status_code == 429 or response.status_code >= 500 else ServerError)(response)
        from pydantic_core import from_json

        return from_json(response.content)  # twice as fast as json.loads on thousands of echoed tokens


CallErrors = tuple[tuple[type[BaseException], ...], Callable[[str], BaseException]]
_CLIENT: contextvars.ContextVar[Any] = contextvars.ContextVar("gateway_http_client", default=None)
OPENAI_API_BASE = "https://api.openai.com/v1"  # where a served model's calls go without an api_base, as litellm's


class ServerError(RuntimeError):
    """An HTTP error status from a server, with its response (a 429's Retry-After)."""

    def __init__(self, response: Any) -> None:
        try:
            said = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            said = response.text
        super().__init__(f"HTTP {response.status_code} from {response.request.url}: {str(said)[:MAX_ERROR_CHARS]}")
        self.response = response


class ServerBusy(ServerError):
    """A status worth retrying: 429 (after its Retry-After) or 5xx."""


def _litellm_errors() -> CallErrors:
    """The errors of a litellm call worth retrying, and the error a call that timed out raises."""
    from litellm.exceptions import (
        APIConnectionError,
        InternalServerError,
        RateLimitError,
        ServiceUnavailableError,
        Timeout,
    )

    retryable = (Timeout, APIConnectionError, RateLimitError, InternalServerError, ServiceUnavailableError)
    return (*retryable, asyncio.TimeoutError), lambda message: Timeout(message, "", "")


def _http_errors() -> CallErrors:
    """The errors of a plain HTTP call worth retrying, and the error a call that timed out raises."""
    import httpx

    return (httpx.TimeoutException, httpx.TransportError, ServerBusy, asyncio.TimeoutError), TimeoutError


@functools.cache
def _tls() -> Any:
    """One TLS context for every client, with certifi's certificates as httpx's own (each client
    building its own costs milliseconds)."""
    import ssl

    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _cost(litellm: Any, response: Any, model: str) -> float | None:
    try:
        return float(litellm.completion_cost(completion_response=response, model=model))
    except Exception:  # litellm knows no price for this model
        return None


def _first_token_logprobs(choice: Any) -> dict[str, float] | None:
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    return {entry.token: entry.logprob for entry in content[0].top_logprobs}


def chat(system: str | None, user: str) -> list[dict[str, str]]:
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]


@dataclass
class ResponseCachedModel:
    """A model whose chat answers (`acomplete`) come from the response cache where the same request
    was answered before: a greedy request by its messages and settings at temperature 0, a sampled
    one by its sampling settings and sample index too, so neither is ever served for the other; a
    request already under way is answered once for every caller. Everything else is the wrapped model's."""

    model: LanguageModel
    cache: ResponseCache
    _in_flight: dict[str, asyncio.Future] = field(default_factory=dict, repr=False)

    def __getattr__(self, attribute: str) -> Any:
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
