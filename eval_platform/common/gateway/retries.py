"""What is retried, and after how long: timeouts, connection errors, 429 (after its Retry-After)
and 5xx, of a litellm call or a plain HTTP one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from eval_platform.common.gateway.http import ServerBusy

MAX_RETRY_AFTER_S = 60.0  # the longest Retry-After honoured
CallErrors = tuple[tuple[type[BaseException], ...], Callable[[str], BaseException]]


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


def litellm_errors() -> CallErrors:
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


def http_errors() -> CallErrors:
    """The errors of a plain HTTP call worth retrying, and the error a call that timed out raises."""
    import httpx

    return (httpx.TimeoutException, httpx.TransportError, ServerBusy, asyncio.TimeoutError), TimeoutError
