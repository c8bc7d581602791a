"""Plain HTTP calls to an OpenAI-compatible server: a served model's prompt log-probabilities (every
prompt token echoed) are read as plain JSON, since litellm's client builds a typed object per token,
which costs more than an engine takes to answer."""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eval_platform.common.gateway.redaction import MAX_ERROR_CHARS
from eval_platform.environment import openai_api_key

if TYPE_CHECKING:
    import ssl

    import httpx

NO_KEY = "EMPTY"  # the key sent to an OpenAI-compatible server where none is set
OPENAI_API_BASE = "https://api.openai.com/v1"  # where a served model's calls go without an api_base, as litellm's
_CLIENT: contextvars.ContextVar[httpx.AsyncClient | None] = contextvars.ContextVar("gateway_http_client", default=None)


@dataclass(frozen=True)
class PromptLogprobs:
    """An echoed prompt's tokens and each token's log-probability (the first has none)."""

    tokens: list[str]
    token_logprobs: list[float | None]
    text_offset: list[int]


class ServerError(RuntimeError):
    """An HTTP error status from a server, with its response (a 429's Retry-After)."""

    def __init__(self, response: httpx.Response) -> None:
        try:
            said = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            said = response.text
        super().__init__(f"HTTP {response.status_code} from {response.request.url}: {str(said)[:MAX_ERROR_CHARS]}")
        self.response = response


class ServerBusy(ServerError):
    """A status worth retrying: 429 (after its Retry-After) or 5xx."""


@contextlib.asynccontextmanager
async def shared_client() -> AsyncIterator[None]:
    """The block's plain HTTP calls share one client and its open connections (a client per
    call costs a connection and milliseconds of setup)."""
    import httpx

    async with httpx.AsyncClient(verify=tls()) as client:
        token = _CLIENT.set(client)
        try:
            yield
        finally:
            _CLIENT.reset(token)


async def post(
    endpoint: str, body: Mapping[str, object], routing: Mapping[str, str], timeout_s: float
) -> dict[str, Any]:
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
        "timeout": timeout_s,
    }
    shared = _CLIENT.get()
    if shared is not None:
        response = await shared.post(**request)
    else:
        async with httpx.AsyncClient(verify=tls()) as client:
            response = await client.post(**request)
    if response.status_code >= 400:
        raise (ServerBusy if response.status_code == 429 or response.status_code >= 500 else ServerError)(response)
    from pydantic_core import from_json

    return from_json(response.content)  # twice as fast as json.loads on thousands of echoed tokens


@functools.cache
def tls() -> ssl.SSLContext:
    """One TLS context for every client, with certifi's certificates as httpx's own (each client
    building its own costs milliseconds)."""
    import ssl

    import certifi

    return ssl.create_default_context(cafile=certifi.where())
