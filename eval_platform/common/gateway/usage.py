"""Each call's tokens and cost, as stored."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict, cast

from eval_engine import Completion

if TYPE_CHECKING:
    from types import ModuleType

    from litellm.types.utils import Choices


class CallRecord(TypedDict):
    """One API call's row: `gateway_calls`' columns but its era, generation and prompt id."""

    purpose: str
    model: str
    judge_name: str | None
    error: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    attempts: int | None
    duration_ms: int | None
    cached: bool


def call_record(
    purpose: str, model: str, completion: Completion | None, error: str | None = None, judge_name: str | None = None
) -> CallRecord:
    """One API call's row: what for, which model, its tokens and cost, whether the cache answered."""
    return cast(
        CallRecord,
        {
            "purpose": purpose,
            "model": model,
            "judge_name": judge_name,
            "error": error,
            **{
                name: getattr(completion, name, None)
                for name in ("prompt_tokens", "completion_tokens", "cost_usd", "attempts", "duration_ms")
            },
            "cached": bool(completion and completion.cached),
        },
    )


def cost(litellm: ModuleType, response: object, model: str) -> float | None:
    try:
        return float(litellm.completion_cost(completion_response=response, model=model))
    except Exception:  # litellm knows no price for this model
        return None


def first_token_logprobs(choice: Choices) -> dict[str, float] | None:
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    return {entry.token: entry.logprob for entry in content[0].top_logprobs}
