"""Redaction: no secret of the environment (an API key a provider or proxy echoes) reaches DuckDB,
Dagster's event log or a log line."""

from __future__ import annotations

import re

from eval_platform.environment import secrets

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
