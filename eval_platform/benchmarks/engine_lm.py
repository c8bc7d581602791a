"""lm-evaluation-harness's `LM` protocol answered by this platform's engine.

`EngineLM` is the harness's three-method model (`loglikelihood`, `loglikelihood_rolling`,
`generate_until`, plus its chat template) over any `LanguageModel`: each call hands the whole list
of the harness's requests to the engine at once, so log-likelihoods go through the shared-prefix
cache and generations through continuous batching. Its `Answering` reuses the answers already
stored for the same model fingerprint and keeps those it computes in chunks as they come
(answering.py); every answer of the run is in `answers`, keyed like the store keys them, with
whether this run computed it. A chat API (no prompt log-probabilities, no
chat template here) answers generation tasks run with `apply_chat_template`: its prompt goes as the
chat the harness built.

Registered with the harness as `eval-platform`, so `lm_eval.api.registry.get_model("eval-platform")`
finds it. This module imports lm_eval; harness.py imports it only when a task runs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from eval_engine import DEFAULT_SEED, Sampling, with_reasoning_ending
from eval_platform.benchmarks.answering import Answering
from eval_platform.benchmarks.records import CHAT_MESSAGES, Answer, sampled_arguments, with_budget
from eval_platform.common.models import Chat, GenerationRequest, LanguageModel, LoglikelihoodRequest, UnsupportedRequest

if TYPE_CHECKING:
    from lm_eval.api.instance import Instance

LOG = logging.getLogger(__name__)
DEFAULT_MAX_GEN_TOKS = 256  # the harness's default max_gen_toks


class TokenWindows(Protocol):
    """A local model as `loglikelihood_rolling` reads it: its tokenizer and context length."""

    @property
    def prefix_token_id(self) -> int: ...

    @property
    def max_length(self) -> int: ...

    def encode(self, text: str) -> list[int]: ...


class ChatTemplating(Protocol):
    """A tokenizer with a chat template, as `EngineLM` renders a conversation with it (as text)."""

    chat_template: str | None

    def apply_chat_template(
        self,
        conversation: list[dict[str, str]],
        *,
        tokenize: bool,
        add_generation_prompt: bool,
        continue_final_message: bool,
    ) -> str: ...


def as_chat(context: str, model_name: str) -> Chat | str:
    """A prompt the chat template "rendered" for a chat API, as the chat it is (a system turn and
    one user turn); any other prompt as it is."""
    if not context.startswith(CHAT_MESSAGES):
        return context
    messages = json.loads(context[len(CHAT_MESSAGES) :])
    users = [m["content"] for m in messages if m["role"] == "user"]
    if len(users) != 1 or any(m["role"] not in ("system", "user") for m in messages):
        raise UnsupportedRequest(
            f"{model_name} is a chat API answered one system and one user turn at a time; this "
            f"prompt has the turns {[m['role'] for m in messages]} (set fewshot_as_multiturn: false)"
        )
    return Chat("\n".join(m["content"] for m in messages if m["role"] == "system"), users[0])


def sampling_of(gen_kwargs: Mapping[str, object] | None, seed: int) -> Sampling | None:
    """A harness request's sampling (its `generation_kwargs` as the harness normalises them: sampled
    where `do_sample`, or a temperature above 0 without it), None where it is greedy. A warper it does
    not set is off (transformers' `generate` would take the model's generation config's: top-k 50)."""
    from lm_eval.models.utils import normalize_gen_kwargs

    settings: dict[str, Any] = dict(normalize_gen_kwargs(dict(gen_kwargs or {}), DEFAULT_MAX_GEN_TOKS))
    if not settings.get("do_sample"):
        return None
    try:
        return Sampling(
            float(settings.get("temperature", 1.0)),
            settings.get("top_k"),
            settings.get("top_p"),
            settings.get("min_p"),
            seed,
        )
    except ValueError as error:
        raise UnsupportedRequest(f"sampled generation ({dict(gen_kwargs or {})}): {error}") from error


def generation_request(
    context: Chat | str,
    gen_kwargs: Mapping[str, object] | None,
    max_new_tokens: int | None = None,
    seed: int = DEFAULT_SEED,
    sample: int = 0,
) -> GenerationRequest:
    """A harness `generate_until` request as the engine's: greedy or sample `sample` (its stream
    seeded by `seed`), cut at the task's stop sequences, within its `max_gen_toks` (or
    `max_new_tokens` where given)."""
    from lm_eval.models.utils import normalize_gen_kwargs

    settings: dict[str, Any] = dict(normalize_gen_kwargs(dict(gen_kwargs or {}), DEFAULT_MAX_GEN_TOKS))
    return GenerationRequest(
        context,
        max_new_tokens or settings["max_gen_toks"],
        tuple(s for s in settings["until"] if s),
        sampling_of(gen_kwargs, seed),
        sample,
    )


def numbered_samples(
    arguments: Sequence[tuple[str, Mapping[str, object]]], requests: Sequence[Instance], seed: int
) -> list[tuple[Any, ...]]:
    """`generate_until` requests' arguments, each sampled one's with its sample index and the seed
    (records.sampled_arguments): the harness asks a task's `repeats` copies of one request (the same
    object), numbered 0 to k-1 in order; so each sample has a key, an answer and a stream of its own,
    and a document's samples are numbered alike whatever else the call holds."""
    seen: dict[int, int] = {}
    numbered: list[tuple[Any, ...]] = []
    for (context, gen_kwargs), request in zip(arguments, requests, strict=True):
        seen[id(request)] = index = seen.get(id(request), -1) + 1
        if sampling_of(gen_kwargs, seed) is None:
            numbered.append((context, gen_kwargs))
        else:
            numbered.append(tuple(sampled_arguments([context, gen_kwargs], seed, index)))
    return numbered


def strip_reasoning(text: str, marker: str | None) -> str:
    """The answer after a reasoning block: the text after the last `marker` (e.g. `</think>`),
    as the harness's `think_end_token` strips it; the whole text where there is no marker."""
    return text.split(marker)[-1].lstrip() if marker and marker in text else text


class EngineLM(LM):
    """The harness's model protocol over a platform `LanguageModel`."""

    def __init__(
        self,
        model: LanguageModel,
        batch_size: int = 8,
        answering: Answering | None = None,
        reasoning_end: str | None = None,
        max_gen_toks: int | None = None,
        seed: int = DEFAULT_SEED,
    ) -> None:
        super().__init__()
        self.model, self.batch_size, self.reasoning_end, self.seed = model, batch_size, reasoning_end, seed
        self.max_gen_toks = max_gen_toks  # every generation's budget, over the task's own
        self.answering = answering or Answering(smallest=batch_size)
        self.warned_greedy = False  # once per evaluation, not once per engine call

    @property
    def answers(self) -> dict[str, Answer]:
        """Every answer of the run, by request key, with whether this run computed it."""
        return self.answering.answers

    @property
    def model_seconds(self) -> float:
        """Time in the engine alone."""
        return self.answering.model_seconds

    def _answer(self, request_type: str, arguments: Sequence[Sequence[Any]], compute) -> list[Any]:
        return self.answering.answer(request_type, arguments, compute)

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        def compute(arguments: list[tuple[str, str]]) -> list[list[float | bool]]:
            batch = [LoglikelihoodRequest(context, continuation) for context, continuation in arguments]
            greedy = getattr(self.model, "greedy_loglikelihoods", None)
            if greedy is not None:
                return [[value, is_greedy] for value, is_greedy in greedy(batch, self.batch_size)]
            if not self.warned_greedy:
                LOG.warning(
                    f"{self.model.name} does not report whether a continuation is its greedy one; is_greedy "
                    "is False (metrics that need it, such as lambada's acc, do not apply)"
                )
                self.warned_greedy = True
            return [[value, False] for value in self.model.loglikelihoods(batch, self.batch_size)]

        return [
            (float(value), bool(is_greedy))
            for value, is_greedy in self._answer("loglikelihood", [r.args for r in requests], compute)
        ]

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """Each text's log-likelihood as a whole (perplexity tasks such as wikitext), in the windows
        the harness's HF model scores: the text's tokens in rolling windows of the model's length
        (`get_rolling_token_windows`, made disjoint), the first after the prefix token, each token
        predicted once; the windows of all texts go to the engine at once."""
        from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

        score = getattr(self.model, "token_loglikelihoods", None)
        if score is None:
            raise UnsupportedRequest(
                f"{self.model.name} scores no token windows: loglikelihood_rolling (perplexity tasks) "
                "is answered by local models"
            )

        local = cast("TokenWindows", self.model)  # a local model: its tokenizer and context length

        def compute(arguments: list[tuple[str]]) -> list[float]:
            windows, owners = [], []
            for owner, (text,) in enumerate(arguments):
                for window in get_rolling_token_windows(
                    local.encode(text), local.prefix_token_id, local.max_length, context_len=1
                ):
                    windows.append(make_disjoint_window(window))
                    owners.append(owner)
            totals = [0.0] * len(arguments)
            for owner, value in zip(owners, score(windows, self.batch_size), strict=True):
                totals[owner] += value
            return totals

        return [float(value) for value in self._answer("loglikelihood_rolling", [r.args for r in requests], compute)]

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Each request's text; a sampled request's copies (a task's `repeats`) each a sample of its own."""

        def compute(arguments: list[tuple[Any, ...]]) -> list[str]:  # each with why it ended
            batch = [
                generation_request(
                    as_chat(context, self.model.name), gen_kwargs, seed=self.seed, sample=sample[0]["sample"]
                )
                if sample
                else generation_request(as_chat(context, self.model.name), gen_kwargs)
                for context, gen_kwargs, *sample in arguments
            ]
            return [
                with_reasoning_ending(text, self.reasoning_end) for text in self.model.generate(batch, self.batch_size)
            ]

        arguments = [
            (context, with_budget(gen_kwargs, self.max_gen_toks)) for context, gen_kwargs in (r.args for r in requests)
        ]
        answers = self._answer("generate_until", numbered_samples(arguments, requests, self.seed), compute)
        return [strip_reasoning(text, self.reasoning_end) for text in answers]

    # --- chat templates (apply_chat_template, fewshot_as_multiturn) ------------------------------

    @property
    def _tokenizer(self) -> ChatTemplating | None:
        """The model's tokenizer with a chat template, or None for a model that takes chats (an API)."""
        tokenizer = getattr(self.model, "tokenizer", None)
        return tokenizer if tokenizer is not None and getattr(tokenizer, "chat_template", None) else None

    @property
    def tokenizer_name(self) -> str:
        return self.model.fingerprint

    def chat_template(self, chat_template: bool | str = False) -> str | None:
        return (self._tokenizer.chat_template if self._tokenizer else "") if chat_template else None

    def apply_chat_template(self, chat_history: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """The conversation as the model's chat template renders it, as the harness's HF model
        renders it (a final assistant turn is continued, not closed, when no generation prompt); for
        a model without a template of its own (a chat API), its messages, sent as a chat."""
        if self._tokenizer is None:
            return CHAT_MESSAGES + json.dumps(chat_history, ensure_ascii=False)
        return self._tokenizer.apply_chat_template(
            chat_history,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            continue_final_message=not add_generation_prompt,
        )


register_model("eval-platform")(EngineLM)  # the harness's model registry knows it by this name
