"""A model behind an OpenAI-compatible server (vLLM, llama.cpp's server, TGI, ...), through the gateway.

Log-likelihoods come from the completions endpoint the way lm-evaluation-harness's
`local-completions` gets them: the prompt is context + continuation, sent with `echo`, `logprobs`
and `max_tokens` 1, and the continuation's token log-probabilities are summed (the generated token
never counts). Before the first batch the server is checked once on a prompt whose end any language
model predicts (`check_prompt_logprobs`): a server that echoes no prompt log-probabilities, only the
generated token's, offsets that do not line up with the prompt, or values one position off is
refused before anything is scored, unless the check is skipped explicitly (recorded with the run). With the served
model's tokenizer (`tokenizer`, a `local/...` name) the prompt is sent as token ids split exactly as
the harness splits context and continuation; without it, as text, the continuation's tokens found by
their text offsets. Requests go `batch_size` prompts to an HTTP request, the requests concurrently
(the gateway's concurrency limit, retries and timeouts). Chats (letter probabilities, generation)
go to the chat endpoint of the same server.
"""

from __future__ import annotations

import asyncio
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eval_engine import Generation, Sampling
from eval_platform.common.gateway import ModelCallError, ModelGateway, PromptLogprobs, describe_error, redact
from eval_platform.common.models import (
    SERVED_PREFIX,
    Chat,
    Completion,
    GenerationRequest,
    LoglikelihoodRequest,
    ModelSettings,
    UnsupportedRequest,
)
from eval_platform.common.models.api_chat import ApiChatModel

if TYPE_CHECKING:
    from eval_engine import LocalCausalLM

# A prompt whose last tokens any language model predicts: their log-probabilities must be near 0.
CHECK_PROMPT = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16"
PREDICTABLE_TOKENS = 8  # the check prompt's last tokens that are judged
# Their mean log-probability must be above this: SmolLM2-135M gives about -0.1 there; a server one
# position off (each token scored given itself) gives -9 to -17.
PREDICTABLE_MIN_MEAN = -2.0
KNOWN_ENGINES = (
    "Known to fail: llama-cpp-python 0.3.36's server (values one position off, its issue #1983) and llama.cpp's "
    "own server (the generated token's log-probability only, llama.cpp issue #27174). Engines whose completions "
    "endpoint echoes prompt log-probabilities as lm-evaluation-harness's local-completions expects, such as vLLM, "
    "should pass; the check tells."
)


class ServerCheckFailed(RuntimeError):
    """A server whose prompt log-probabilities cannot be used to score a benchmark."""


def check_prompt_logprobs(answer: PromptLogprobs, prompt: str, prompt_tokens: int | None) -> str | None:
    """What is wrong with a server's answer to the check prompt (sent as text, or as
    `prompt_tokens` token ids), or None: every prompt token after the first must come back with a
    log-probability, text offsets must line up with the prompt, and the predictable last tokens
    must be likely."""
    if not answer.tokens or not answer.token_logprobs:
        return "no log-probabilities at all"
    if prompt_tokens is None:
        positions = [i for i, offset in enumerate(answer.text_offset) if offset < len(prompt)]
        if len(positions) < 2:
            return (
                f"log-probabilities for {len(answer.tokens)} token(s), {len(positions)} of them in the prompt: "
                "the generated token's only, not the prompt's"
            )
        if (
            answer.text_offset[0] != 0
            or "".join(answer.tokens[: len(positions)]) != prompt
            or any(answer.text_offset[i] != len("".join(answer.tokens[:i])) for i in positions)
        ):
            return "text offsets that do not line up with the prompt's tokens"
    else:
        if len(answer.tokens) < prompt_tokens:
            return (
                f"log-probabilities for {len(answer.tokens)} token(s) of a {prompt_tokens}-token prompt: "
                "the generated token's only, not the prompt's"
            )
        positions = list(range(prompt_tokens))
    found = [answer.token_logprobs[i] for i in positions[1:]]
    values = [value for value in found if value is not None]
    if len(values) < len(found):
        return f"no log-probability for {len(found) - len(values)} prompt token(s) after the first"
    tail = values[-PREDICTABLE_TOKENS:]
    if sum(tail) / len(tail) < PREDICTABLE_MIN_MEAN:
        return (
            f"log-probabilities {', '.join(f'{v:.1f}' for v in tail)} for the last tokens of {prompt!r}, which "
            f"any language model predicts (mean above {PREDICTABLE_MIN_MEAN} expected): values one position off "
            "(each token scored given itself) or otherwise wrong"
        )
    return None


@dataclass
class ServedCompletionsModel:
    name: str  # served/<the model's name on the server>
    gateway: ModelGateway
    tokenizer: LocalCausalLM | None = None  # the served model's tokenizer (a LocalCausalLM's encode rules), or None
    skip_check: bool = False  # score without checking the server's prompt log-probabilities first
    chat: ApiChatModel = field(init=False)
    rubric_judging: str = "json"
    _checked: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self.chat = ApiChatModel(f"openai/{self.served_name}", self.gateway)

    @property
    def served_name(self) -> str:
        return self.name.removeprefix(SERVED_PREFIX)

    @property
    def fingerprint(self) -> str:
        return self.name  # the server holds the weights; its model name identifies them

    def _prompts(self, requests: Sequence[LoglikelihoodRequest]) -> list[tuple[list[int] | str, range]]:
        """The prompts to send and the spans of their continuations (token indices, or text offsets)."""
        for request in requests:
            if isinstance(request.context, Chat):
                raise UnsupportedRequest(
                    f"{self.name}: log-likelihoods need a text context (the harness format); "
                    "a chat would need the server's chat template"
                )
        if self.tokenizer is not None:
            return [
                (context + continuation, range(len(context), len(context) + len(continuation)))
                for context, continuation in self.tokenizer.encoded_pairs(requests)
            ]
        texts = [(str(request.context), request.continuation) for request in requests]
        return [
            (context + continuation, range(len(context.rstrip()), len(context + continuation)))
            for context, continuation in texts
        ]

    @property
    def server(self) -> str:
        return redact(self.gateway.api_base or "the provider's default endpoint")

    def check_server(self) -> None:
        """Refuse a server whose prompt log-probabilities cannot be right, naming what it returned
        and what was expected (once per model; not where the check is skipped)."""
        if self._checked or self.skip_check:
            return
        ids = self.tokenizer.encode(CHECK_PROMPT) if self.tokenizer is not None else None
        try:
            (answer,) = asyncio.run(self.gateway.aprompt_logprobs(self.served_name, [ids or CHECK_PROMPT]))
            problem = check_prompt_logprobs(answer, CHECK_PROMPT, len(ids) if ids else None)
        except ModelCallError as error:
            hint = " (it may take no token ids: leave served_tokenizer unset to send text)" if ids else ""
            problem = f"an error{hint}: {describe_error(error)}"
        if problem:
            raise ServerCheckFailed(
                f"{self.name} at {self.server} cannot score log-likelihoods: asked for the log-probability of every "
                f"token of {CHECK_PROMPT!r} (echo, logprobs, max_tokens 1), it returned {problem}. Expected: a "
                f"log-probability for every prompt token after the first, text offsets into the prompt, and values "
                f"near 0 for the tokens any model predicts. {KNOWN_ENGINES} Nothing was scored. To score anyway, set "
                "evaluation_model's skip_logprob_check: true (recorded with the run)."
            )
        self._checked = True

    def loglikelihoods(self, requests: Sequence[LoglikelihoodRequest], batch_size: int = 8) -> list[float]:
        self.check_server()
        prompts = self._prompts(requests)

        async def every():
            batches = [prompts[start : start + batch_size] for start in range(0, len(prompts), batch_size)]
            async with self.gateway.connections():
                answers = await asyncio.gather(
                    *(self.gateway.aprompt_logprobs(self.served_name, [p for p, _ in batch]) for batch in batches)
                )
            return [answer for batch in answers for answer in batch]

        return [
            _continuation_logprob(answer, span, self.tokenizer is not None)
            for answer, (_, span) in zip(asyncio.run(every()), prompts, strict=False)
        ]

    def describe_placement(self) -> dict[str, str]:
        skipped = " (log-probability check skipped)" if self.skip_check else ""
        return {"device": "served", "device_name": self.server + skipped}

    def label_probabilities(
        self, chats: Sequence[Chat], labels: Sequence[Sequence[str]], batch_size: int = 8
    ) -> list[dict[str, float] | None]:
        return self.chat.label_probabilities(chats, labels, batch_size)

    def generate(self, requests: Sequence[GenerationRequest], batch_size: int = 8) -> list[Generation]:
        return self.chat.generate(requests, batch_size)

    async def acomplete(
        self,
        prompt: Chat,
        max_tokens: int,
        stop: Sequence[str] = (),
        top_logprobs: int | None = None,
        sampling: Sampling | None = None,
        sample: int = 0,
    ) -> Completion:
        return await self.chat.acomplete(prompt, max_tokens, stop, top_logprobs, sampling, sample)


def open_served_model(
    name: str, settings: ModelSettings, gateway: ModelGateway | None = None
) -> ServedCompletionsModel:
    """A served model; with `served_tokenizer`, its prompts go as token ids of that local tokenizer."""
    from eval_engine import Placement, load_local_model

    tokenizer = (
        load_local_model(settings.served_tokenizer, settings.model_cache_dir, Placement(), settings.torch_threads)
        if settings.served_tokenizer
        else None
    )
    return ServedCompletionsModel(name, gateway or ModelGateway(), tokenizer, settings.skip_logprob_check)


def _continuation_logprob(answer: PromptLogprobs, span: range, by_token: bool) -> float:
    """The summed log-probabilities of the continuation's tokens: those at the token indices of
    `span`, or whose text offsets (ascending, as the server check saw them) fall in it (a
    generated token after the prompt never counts)."""
    offsets = answer.text_offset
    positions = span if by_token else range(bisect_left(offsets, span.start), bisect_left(offsets, span.stop))
    values = [answer.token_logprobs[i] for i in positions]
    known = [value for value in values if value is not None]
    if not values or len(known) < len(values):
        raise ValueError("the server returned no log-probability for a continuation token")
    return float(sum(known))
