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
no key reaches DuckDB or a log.

Cut along its jobs: `core.py` (the gateway: litellm's calls, deadlines, retries' loop, routing to
replicas, the concurrency limit), `retries.py` (what is retried and after how long), `http.py` (the
plain HTTP calls), `parameters.py` (a call's messages and sampling parameters), `cache.py` (the
response cache), `usage.py` (each call's tokens and cost) and `redaction.py`."""

from eval_platform.common.gateway.cache import AnsweredCall, KeptResponses, ResponseCache, ResponseCachedModel
from eval_platform.common.gateway.core import ModelGateway, ResponseTooLong
from eval_platform.common.gateway.http import PromptLogprobs
from eval_platform.common.gateway.parameters import chat, sampling_parameters
from eval_platform.common.gateway.redaction import ModelCallError, describe_error, redact
from eval_platform.common.gateway.usage import CallRecord, call_record

__all__ = [
    "AnsweredCall",
    "CallRecord",
    "KeptResponses",
    "ModelCallError",
    "ModelGateway",
    "PromptLogprobs",
    "ResponseCache",
    "ResponseCachedModel",
    "ResponseTooLong",
    "call_record",
    "chat",
    "describe_error",
    "redact",
    "sampling_parameters",
]
