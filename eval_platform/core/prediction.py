"""Prediction modes: small strategies over the model protocol, one per way of asking a model.

- `letter`: the chat prompt, one forward pass; the first answer token's probabilities restricted
  to the labels (all stored).
- `loglikelihood`: lm-evaluation-harness's method, log P(choice | context), in the `harness`
  format or continuing the `chat` prompt.
- `generate`: greedy generation, the final number extracted (GSM8K).

Each mode names the prediction columns its metrics read (`metrics`), the prompt formats it
accepts, and turns prompt records into prediction records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

from eval_platform.core.models import Chat, GenerationRequest, LanguageModel, LoglikelihoodRequest
from eval_platform.core.scoring import argmax_label, extract_numbers

PROMPT_FORMATS = ("chat", "harness")


@dataclass(frozen=True)
class Prediction:
    prompt_id: str
    predicted: str | None
    predicted_norm: str | None = None
    predicted_flexible: str | None = None
    label_probabilities: dict[str, float] | None = None
    choice_loglikelihoods: list[float] | None = None
    output_text: str | None = None


@dataclass(frozen=True)
class PredictionSettings:
    batch_size: int = 8
    max_new_tokens: int = 256


class PredictionMode(Protocol):
    name: str
    formats: tuple[str, ...]  # the first is the default
    metrics: Mapping[str, str]  # metric -> the prediction column it reads

    def predict(self, model: LanguageModel, prompts: Sequence[Mapping[str, Any]], prompt_format: str,
                settings: PredictionSettings) -> list[Prediction]:
        ...


def chat_of(prompt: Mapping[str, Any]) -> Chat:
    return Chat(prompt["system_prompt"], prompt["user_prompt"])


class LetterMode:
    name = "letter"
    formats = ("chat",)
    metrics = {"acc": "predicted"}

    def predict(self, model, prompts, prompt_format, settings):
        distributions = model.label_probabilities([chat_of(p) for p in prompts], [p["labels"] for p in prompts],
                                                  settings.batch_size)
        return [Prediction(p["prompt_id"], argmax_label(p["labels"], [dist[label] for label in p["labels"]])
                           if dist else None, label_probabilities=dist)
                for p, dist in zip(prompts, distributions)]


def loglikelihood_requests(prompt: Mapping[str, Any], prompt_format: str) -> list[LoglikelihoodRequest]:
    """One request per choice: lm-evaluation-harness's (context, continuation) pairs, or the chat
    prompt continued by each choice's text."""
    if prompt_format == "harness":
        return [LoglikelihoodRequest(context, continuation)
                for context, continuation in zip(prompt["harness_contexts"], prompt["harness_continuations"])]
    return [LoglikelihoodRequest(chat_of(prompt), choice) for choice in prompt["choices"]]


class LoglikelihoodMode:
    name = "loglikelihood"
    formats = ("harness", "chat")
    metrics = {"acc": "predicted", "acc_norm": "predicted_norm"}

    def predict(self, model, prompts, prompt_format, settings):
        per_item = [loglikelihood_requests(p, prompt_format) for p in prompts]
        flat = model.loglikelihoods([r for item in per_item for r in item], settings.batch_size)
        predictions, offset = [], 0
        for prompt, item in zip(prompts, per_item):
            scores = flat[offset: offset + len(item)]
            offset += len(item)
            normalized = [s / max(1, len(r.continuation)) for s, r in zip(scores, item)]
            predictions.append(Prediction(prompt["prompt_id"], argmax_label(prompt["labels"], scores),
                                          predicted_norm=argmax_label(prompt["labels"], normalized),
                                          choice_loglikelihoods=list(scores)))
        return predictions


class GenerateMode:
    name = "generate"
    formats = ("chat",)
    metrics = {"strict_match": "predicted", "flexible_match": "predicted_flexible"}

    def predict(self, model, prompts, prompt_format, settings):
        outputs = model.generate([GenerationRequest(chat_of(p), settings.max_new_tokens) for p in prompts],
                                 settings.batch_size)
        predictions = []
        for prompt, text in zip(prompts, outputs):
            strict, flexible = extract_numbers(text)
            predictions.append(Prediction(prompt["prompt_id"], strict, predicted_flexible=flexible, output_text=text))
        return predictions


MODES: dict[str, PredictionMode] = {mode.name: mode for mode in (LetterMode(), LoglikelihoodMode(), GenerateMode())}
METRICS: dict[str, Mapping[str, str]] = {name: mode.metrics for name, mode in MODES.items()}


def resolve_format(mode: PredictionMode, requested: str) -> str:
    """The requested prompt format where the mode accepts it, else the mode's own."""
    return requested if requested in mode.formats else mode.formats[0]
