"""Prediction modes: small strategies over the model protocol, one per way of asking a model.

- `letter`: the chat prompt, one forward pass; the first answer token's probabilities restricted
  to the labels (all stored).
- `loglikelihood`: log P(choice | context), in lm-evaluation-harness's format (with its few-shot
  examples) or continuing the `chat` prompt.
- `generate`: greedy generation after the chat prompt or lm-evaluation-harness's few-shot prompt
  (cut at the task's stop sequences, within its token budget).

Each mode turns prompt records into prediction records. In the chat format it names the metrics it
scores and scores one stored prediction against its reference (the spec's chat answer filters take a
generated answer out); in the harness's format the harness's own task scores them
(harness_format.harness_item_scores).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from eval_platform.benchmarks.harness_format import HarnessItem
from eval_platform.benchmarks.scoring import ItemScore, argmax_label, exact, length_normalized
from eval_platform.common.models import Chat, GenerationRequest, LanguageModel, LoglikelihoodRequest

if TYPE_CHECKING:
    from eval_platform.benchmarks.specs import BenchmarkSpec

PROMPT_FORMATS = ("chat", "harness")


@dataclass(frozen=True)
class Prediction:
    prompt_id: str
    predicted: str | None
    predicted_norm: str | None = None
    label_probabilities: dict[str, float] | None = None
    choice_loglikelihoods: list[float] | None = None
    output_text: str | None = None


def no_progress(done: int, total: int) -> None:
    pass


@dataclass(frozen=True)
class PredictionSettings:
    batch_size: int = 8
    max_new_tokens: int = 256  # for the chat format
    harness_max_new_tokens: int | None = None  # None: the harness task's own budget (its max_gen_toks, else 256)
    chunk_items: int = 256  # items per model call; progress is reported after each
    progress: Callable[[int, int], None] = field(default=no_progress)


class PredictionMode(Protocol):
    name: str
    formats: tuple[str, ...]  # the first is the default

    def metrics(self, spec: BenchmarkSpec) -> tuple[str, ...]:
        """The metrics it scores in the chat format."""

    def predict_chunk(
        self,
        model: LanguageModel,
        prompts: Sequence[Mapping[str, Any]],
        prompt_format: str,
        spec: BenchmarkSpec,
        settings: PredictionSettings,
    ) -> list[Prediction]: ...

    def item_scores(self, row: Mapping[str, Any], spec: BenchmarkSpec) -> dict[str, ItemScore]:
        """The metrics of one stored prediction in the chat format (`row`: prediction and prompt fields)."""


def predict(
    mode: PredictionMode,
    model: LanguageModel,
    prompts: Sequence[Mapping[str, Any]],
    prompt_format: str,
    spec: BenchmarkSpec,
    settings: PredictionSettings = PredictionSettings(),
) -> list[Prediction]:
    """The mode's predictions for every prompt, `settings.chunk_items` at a time, reporting progress."""
    predictions: list[Prediction] = []
    for start in range(0, len(prompts), settings.chunk_items):
        chunk = prompts[start : start + settings.chunk_items]
        predictions += mode.predict_chunk(model, chunk, prompt_format, spec, settings)
        settings.progress(len(predictions), len(prompts))
    return predictions


def chat_of(prompt: Mapping[str, Any]) -> Chat:
    return Chat(prompt["system_prompt"], prompt["user_prompt"])


def harness_item_of(prompt: Mapping[str, Any]) -> HarnessItem:
    """The harness request stored with a prompt (for the number of shots it was loaded with)."""
    kwargs = prompt["generation_kwargs"]
    return HarnessItem(
        tuple(prompt["contexts"]),
        tuple(prompt["continuations"]),
        tuple(prompt["choice_texts"]),
        json.loads(kwargs) if isinstance(kwargs, str) else kwargs,
        tuple(prompt["fewshot_ids"]),
    )


class LetterMode:
    name = "letter"
    formats = ("chat",)

    def metrics(self, spec):
        return ("acc",)

    def predict_chunk(self, model, prompts, prompt_format, spec, settings):
        distributions = model.label_probabilities(
            [chat_of(p) for p in prompts], [p["labels"] for p in prompts], settings.batch_size
        )
        return [
            Prediction(
                p["prompt_id"],
                argmax_label(p["labels"], [dist[label] for label in p["labels"]]) if dist else None,
                label_probabilities=dist,
            )
            for p, dist in zip(prompts, distributions, strict=False)
        ]

    def item_scores(self, row, spec):
        return {"acc": exact(row["predicted"], row["real_answer"])}


def loglikelihood_requests(prompt: Mapping[str, Any], prompt_format: str) -> list[LoglikelihoodRequest]:
    """One request per choice: lm-evaluation-harness's (context, continuation) pairs, or the chat
    prompt continued by each choice's text."""
    if prompt_format == "harness":
        return [
            LoglikelihoodRequest(context, continuation) for context, continuation in harness_item_of(prompt).requests()
        ]
    return [LoglikelihoodRequest(chat_of(prompt), choice) for choice in prompt["choices"]]


class LoglikelihoodMode:
    name = "loglikelihood"
    formats = ("harness", "chat")

    def metrics(self, spec):
        return ("acc", "acc_norm")

    def predict_chunk(self, model, prompts, prompt_format, spec, settings):
        per_item = [loglikelihood_requests(p, prompt_format) for p in prompts]
        flat = model.loglikelihoods([r for item in per_item for r in item], settings.batch_size)
        predictions, offset = [], 0
        for prompt, item in zip(prompts, per_item, strict=False):
            scores = flat[offset : offset + len(item)]
            offset += len(item)
            texts = prompt["choice_texts"] if prompt_format == "harness" else [r.continuation for r in item]
            normalized = length_normalized(scores, texts)
            predictions.append(
                Prediction(
                    prompt["prompt_id"],
                    argmax_label(prompt["labels"], scores),
                    predicted_norm=argmax_label(prompt["labels"], normalized),
                    choice_loglikelihoods=list(scores),
                )
            )
        return predictions

    def item_scores(self, row, spec):
        return {
            "acc": exact(row["predicted"], row["real_answer"]),
            "acc_norm": exact(row["predicted_norm"], row["real_answer"]),
        }


class GenerateMode:
    name = "generate"
    formats = ("chat", "harness")

    def metrics(self, spec):
        return tuple(answer_filter.name for answer_filter in spec.chat_filters)

    def predict_chunk(self, model, prompts, prompt_format, spec, settings):
        if prompt_format == "harness":
            from eval_platform.benchmarks.engine_lm import generation_request  # imports lm_eval: only when used

            requests = [
                generation_request(item.prompt, item.generation_kwargs, settings.harness_max_new_tokens)
                for item in map(harness_item_of, prompts)
            ]
        else:
            requests = [GenerationRequest(chat_of(p), settings.max_new_tokens) for p in prompts]
        outputs = model.generate(requests, settings.batch_size)
        texts = outputs if prompt_format == "harness" else [text.strip() for text in outputs]
        return [Prediction(p["prompt_id"], None, output_text=text) for p, text in zip(prompts, texts, strict=False)]

    def item_scores(self, row, spec):
        """Each chat answer filter's answer, equal to the reference answer."""
        return {f.name: exact(f.extract(row["output_text"]), row["real_answer"]) for f in spec.chat_filters}


MODES: dict[str, PredictionMode] = {mode.name: mode for mode in (LetterMode(), LoglikelihoodMode(), GenerateMode())}


def resolve_format(mode: PredictionMode, requested: str) -> str:
    """The requested prompt format where the mode accepts it, else the mode's own."""
    return requested if requested in mode.formats else mode.formats[0]


@dataclass
class ProgressLog:
    """Reports items done, items per second and the time left, at most every `every_s` seconds."""

    log: Callable[[str], None]
    label: str
    every_s: float = 30.0
    started: float = field(default_factory=time.perf_counter)
    last: float = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if done < total and now - self.last < self.every_s:
            return
        self.last = now
        rate = done / max(now - self.started, 1e-9)
        left = (total - done) / rate if rate else float("inf")
        self.log(f"{self.label}: {done}/{total} items, {rate:.2f} items/s, about {_duration(left)} left")


def _duration(seconds: float) -> str:
    if seconds == float("inf"):
        return "unknown time"
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
