"""Each call's tokens and cost, as stored."""

from __future__ import annotations

from typing import Any

from eval_engine import Completion


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


def cost(litellm: Any, response: Any, model: str) -> float | None:
    try:
        return float(litellm.completion_cost(completion_response=response, model=model))
    except Exception:  # litellm knows no price for this model
        return None


def first_token_logprobs(choice: Any) -> dict[str, float] | None:
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    return {entry.token: entry.logprob for entry in content[0].top_logprobs}
