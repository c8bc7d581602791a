"""Predictions for prompt records in one mode: `letter`, `loglikelihood` or `generate` (GSM8K)."""

from __future__ import annotations

from typing import Any, Sequence

from evaluation_logic.scoring import argmax_label, extract_numbers

MULTIPLE_CHOICE_MODES = ("letter", "loglikelihood")
PROMPT_FORMATS = ("seed", "harness")


def prompt_format_for(mode: str, loglikelihood_format: str) -> str:
    """Letter and generate modes use the seed's chat prompts; log-likelihood the chosen format."""
    return loglikelihood_format if mode == "loglikelihood" else "seed"


def loglikelihood_requests(model: Any, prompt: dict, prompt_format: str) -> list[tuple[str, str]]:
    """(context, continuation) per choice: lm-evaluation-harness's format, or the seed's chat prompt
    continued by each choice's text."""
    if prompt_format == "harness":
        return list(zip(prompt["harness_contexts"], prompt["harness_continuations"]))
    context = model.render_chat(prompt["system_prompt"], prompt["user_prompt"])
    return [(context, choice) for choice in prompt["choices"]]


def predict(
    model: Any, prompts: Sequence[dict], mode: str, prompt_format: str, batch_size: int = 8, max_new_tokens: int = 256
) -> list[dict[str, Any]]:
    """One prediction record per prompt (keyed by prompt_id) from `model` in `mode`."""
    if not prompts:
        return []
    chats = [(p["system_prompt"], p["user_prompt"]) for p in prompts]
    if mode == "letter":
        distributions = model.label_probabilities(chats, [p["labels"] for p in prompts], batch_size)
        return [
            {
                "prompt_id": p["prompt_id"],
                "predicted": argmax_label(p["labels"], [dist[label] for label in p["labels"]]) if dist else None,
                "label_probabilities": dist,
            }
            for p, dist in zip(prompts, distributions)
        ]
    if mode == "loglikelihood":
        requests = [loglikelihood_requests(model, p, prompt_format) for p in prompts]
        scores = model.loglikelihoods(requests, batch_size)
        records = []
        for p, item, item_scores in zip(prompts, requests, scores):
            normalized = [s / max(1, len(continuation)) for s, (_, continuation) in zip(item_scores, item)]
            records.append(
                {
                    "prompt_id": p["prompt_id"],
                    "predicted": argmax_label(p["labels"], item_scores),
                    "predicted_norm": argmax_label(p["labels"], normalized),
                    "choice_loglikelihoods": list(item_scores),
                }
            )
        return records
    if mode == "generate":
        outputs = model.generate(chats, max_new_tokens=max_new_tokens, batch_size=batch_size)
        records = []
        for p, text in zip(prompts, outputs):
            strict, flexible = extract_numbers(text)
            records.append(
                {"prompt_id": p["prompt_id"], "predicted": strict, "predicted_flexible": flexible, "output_text": text}
            )
        return records
    raise ValueError(f"Unknown prediction mode {mode!r}; expected letter, loglikelihood or generate")
