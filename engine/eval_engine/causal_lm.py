"""A Hugging Face causal LM in this process, answering the engine's requests exactly as
lm-evaluation-harness's `HFLM` would (its tokenisation, truncation and log-likelihoods), through
the prefix cache, packed passes and continuous batching.

torch is imported inside functions so that importing this module is cheap.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from eval_engine.attention import AttentionLayout
from eval_engine.continuous import ContinuousBatcher
from eval_engine.endings import Generation
from eval_engine.machine import cpu_name
from eval_engine.requests import Chat, Completion, GenerationRequest, LoglikelihoodRequest
from eval_engine.sampling import Sampling

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

TOKENIZER_UNLIMITED = int(1e30)  # transformers' model_max_length of a tokenizer that names no limit
MIN_BATCH_TOKENS = 16  # the smallest tokens-per-pass budget a pass that ran out of GPU memory falls back to
# A pass's budget of new tokens by device: on the CPU, passes of 2,048 tokens keep a layer's activations
# in the caches (BBH's log-likelihoods 15% faster than with 16,384, MMLU-Pro's and ARC's within noise).
CPU_BATCH_TOKENS, DEVICE_BATCH_TOKENS = 2048, 16384
LOG = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class LocalCausalLM:
    """A causal LM in this process. Its methods are thread-safe: one call runs at a time.

    Texts are tokenised as lm-evaluation-harness tokenises them (the tokenizer's own special
    tokens, unless the text already starts with the BOS token), so log-likelihoods and generations
    equal the harness's for the same model.
    """

    name: str
    fingerprint: str
    tokenizer: PreTrainedTokenizerBase
    network: PreTrainedModel
    forward_passes: int = 0
    # a pass's budget: new tokens in a packed pass (rows x (cached + new tokens) in padded rows)
    max_batch_tokens: int = DEVICE_BATCH_TOKENS
    packed_passes: bool = True  # where the model takes them (packed.py); else padded rows
    max_cache_tokens: int | None = None  # generation's rows: a budget of cached tokens (None: the device's)
    rubric_judging: str = "probabilities"  # a small model writes no reliable JSON
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _batcher: ContinuousBatcher | None = field(default=None, repr=False)

    @property
    def max_length(self) -> int:
        """The longest input, as the harness reads it (its `resolve_max_length`): from the text
        model's configuration, else the tokenizer's own limit, else 2048."""
        config = self.network.config
        config = getattr(config, "text_config", None) or config
        for attribute in ("n_positions", "max_position_embeddings", "n_ctx"):
            if getattr(config, attribute, None) is not None:
                return int(getattr(config, attribute))
        limit = getattr(self.tokenizer, "model_max_length", None)
        return int(limit) if limit is not None and limit != TOKENIZER_UNLIMITED else 2048

    @functools.cached_property
    def attention(self) -> AttentionLayout:
        """How its layers attend, and so whether requests share prefixes (see attention.py)."""
        return AttentionLayout.of(self.network.config)

    @property
    def prefix_token_id(self) -> int:
        """The token a text's first window starts from when it is scored whole (the harness's
        `prefix_token_id`): BOS, else EOS."""
        bos = self.tokenizer.bos_token_id
        # transformers types a special token's attribute as any special attribute's (ids, tokens, their lists)
        return cast(int, bos if bos is not None else self.tokenizer.eos_token_id)

    def describe_placement(self) -> dict[str, Any]:
        import torch

        from eval_engine.packed import describe_passes

        device = self.network.device
        name = (
            torch.cuda.get_device_name(device)
            if device.type == "cuda"
            else "Apple MPS"
            if device.type == "mps"
            else cpu_name()
        )
        return {
            "device": str(device),
            "device_name": name,
            "dtype": str(self.network.dtype).removeprefix("torch."),
            "threads": torch.get_num_threads(),
            "engine": {
                **self.attention.describe(),
                **describe_passes(self.network, self.attention, self.packed_passes),
            },
        }

    # --- text and tokens --------------------------------------------------------------------

    def render(self, prompt: Chat | str) -> str:
        """A Chat as the chat template's text ready for the assistant's reply; text as it is."""
        if isinstance(prompt, str):
            return prompt
        if not getattr(self.tokenizer, "chat_template", None):
            return f"{prompt.system}\n\n{prompt.user}\n"
        messages = [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}]
        return cast(str, self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))

    def encode(self, text: str) -> list[int]:
        """A whole text's tokens, as the harness encodes a context."""
        return self.encode_all([text])[text]

    def encode_all(self, texts: Iterable[str]) -> dict[str, list[int]]:
        """Each distinct text's tokens (as `encode`), all in batches through the fast tokenizer
        (which encodes a batch outside the GIL, on every core)."""
        bos = cast("str | None", self.tokenizer.bos_token)
        distinct = list(dict.fromkeys(texts))
        encoded: dict[str, list[int]] = {}
        for special in (True, False):
            batch = [text for text in distinct if (not (bos and text.startswith(bos))) == special]
            if batch:
                encoded.update(zip(batch, self.tokenizer(batch, add_special_tokens=special)["input_ids"], strict=True))
        return encoded

    def encode_piece(self, text: str) -> list[int]:
        """A fragment's tokens, without special tokens (an answer label)."""
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def encoded_pairs(self, requests: Sequence[LoglikelihoodRequest]) -> list[tuple[list[int], list[int]]]:
        """Each request's context and continuation tokens, by lm-evaluation-harness's rule: trailing
        whitespace of the context moves to the continuation, the whole text is encoded, and the
        continuation is what follows the context's own tokens. Each distinct context and whole text
        is encoded once (`encode_all`)."""
        rendered = {context: self.render(context) for context in {request.context for request in requests}}
        texts = []
        for request in requests:
            context = rendered[request.context]
            stripped = context.rstrip()
            texts.append((stripped, stripped + context[len(stripped) :] + request.continuation))
        tokens = self.encode_all(text for pair in texts for text in pair)
        return [(tokens[context], tokens[whole][len(tokens[context]) :]) for context, whole in texts]

    def scored_sequences(self, requests: Sequence[LoglikelihoodRequest]) -> list[tuple[list[int], int]]:
        """For each request, the tokens fed (left-truncated to the model's length, as the harness
        does) and how many of its last tokens are scored."""
        return [
            ((context + continuation)[-(self.max_length + 1) :], len(continuation))
            for context, continuation in self.encoded_pairs(requests)
        ]

    def scored_sequence(self, request: LoglikelihoodRequest) -> tuple[list[int], int]:
        """`scored_sequences` of one request."""
        return self.scored_sequences([request])[0]

    # --- forward passes ---------------------------------------------------------------------

    def _left_padded(self, sequences: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        import torch

        width = max(len(s) for s in sequences)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(s)) + list(s) for s in sequences], device=self.network.device)
        mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences], device=self.network.device)
        return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)

    def _count_pass(self) -> None:
        self.forward_passes += 1

    def label_probabilities(
        self, chats: Sequence[Chat], labels: Sequence[Sequence[str]], batch_size: int = 8
    ) -> list[dict[str, float] | None]:
        """For each chat, the first answer token's distribution over its labels (sums to 1): each
        label's log-probability after the chat, every distinct token prefix of the chats encoded once
        (see prefix_cache: a judge's rubric questions share the texts they judge)."""
        from eval_engine.prefix_cache import PrefixTrie, score

        def run(batch_size: int, max_batch_tokens: int) -> list[dict[str, float] | None]:
            trie = PrefixTrie(self.attention.shares_prefixes)
            for tokens, label_tokens in zip(encoded, first_tokens, strict=False):
                for token in label_tokens:
                    trie.add([*tokens, token], 1)
            values = iter(
                score(
                    trie,
                    self.network,
                    batch_size,
                    max_batch_tokens,
                    cast(int, self.tokenizer.pad_token_id),
                    on_pass=self._count_pass,
                    packed=self.packed_passes,
                )
            )
            return [restricted_softmax(names, [next(values) for _ in names]) for names in labels]

        with self._lock:
            rendered = [self.render(chat) for chat in chats]
            tokens = self.encode_all(rendered)
            encoded = [tokens[text] for text in rendered]
            first_tokens = [[self.encode_piece(label)[0] for label in names] for names in labels]
            return self._halving_on_oom(run, batch_size)

    def loglikelihoods(self, requests: Sequence[LoglikelihoodRequest], batch_size: int = 8) -> list[float]:
        """log P(continuation | context) for each request, every distinct token prefix of the
        requests encoded once (see prefix_cache)."""
        return [value for value, _ in self.greedy_loglikelihoods(requests, batch_size)]

    def greedy_loglikelihoods(
        self, requests: Sequence[LoglikelihoodRequest], batch_size: int = 8
    ) -> list[tuple[float, bool]]:
        """Each request's log-likelihood and whether its continuation is the greedy one (every
        token the most probable), as the harness's `loglikelihood` answers."""
        with self._lock:
            return self._score_sequences(self.scored_sequences(requests), batch_size)

    def token_loglikelihoods(
        self, windows: Sequence[tuple[Sequence[int], Sequence[int]]], batch_size: int = 8
    ) -> list[float]:
        """log P(continuation | context) for token windows (context, continuation), left-truncated
        to the model's length as the harness truncates them: the windows of a text scored whole
        (the harness's `loglikelihood_rolling`)."""
        sequences = [
            ([*context, *continuation][-(self.max_length + 1) :], len(continuation))
            for context, continuation in windows
        ]
        with self._lock:
            return [value for value, _ in self._score_sequences(sequences, batch_size)]

    def _score_sequences(self, sequences: Sequence[tuple[list[int], int]], batch_size: int) -> list[tuple[float, bool]]:
        """Each token sequence's summed log-probability of its last `scored` tokens, and whether
        each of them is the most probable, every distinct prefix encoded once (see prefix_cache)."""
        from eval_engine.prefix_cache import PrefixTrie, score

        def run(batch_size: int, max_batch_tokens: int) -> list[tuple[float, bool]]:
            trie = PrefixTrie(self.attention.shares_prefixes)
            for sequence in sequences:
                trie.add(*sequence)
            greedy = [True] * len(sequences)
            totals = score(
                trie,
                self.network,
                batch_size,
                max_batch_tokens,
                cast(int, self.tokenizer.pad_token_id),
                on_pass=self._count_pass,
                greedy=greedy,
                packed=self.packed_passes,
            )
            return list(zip(totals, greedy, strict=False))

        return self._halving_on_oom(run, batch_size)

    @property
    def batcher(self) -> ContinuousBatcher:
        """This model's continuous batch (see continuous.py), made on first use. Once made, it is
        read without the model's lock, which its driver holds at every step: a caller waiting for
        that lock would join the batch only when the batch ends."""
        if self._batcher is not None:
            return self._batcher
        with self._lock:
            if self._batcher is None:
                self._batcher = ContinuousBatcher(
                    self.network,
                    lambda tokens: cast(str, self.tokenizer.decode(tokens, skip_special_tokens=True)),
                    self._lock,
                    on_pass=self._count_pass,
                    prefix_sharing=self.attention.shares_prefixes,
                    packed=self.packed_passes,
                    prefill_tokens=self.max_batch_tokens,
                    cache_tokens=self.max_cache_tokens,
                )
            return self._batcher

    def generation_prompt(self, request: GenerationRequest) -> list[int]:
        """A request's prompt tokens, left-truncated (as the harness truncates it) to leave room
        for its new tokens."""
        return self.encode(self.render(request.prompt))[-max(1, self.max_length - request.max_new_tokens) :]

    def generate(self, requests: Sequence[GenerationRequest], batch_size: int = 8) -> list[Generation]:
        """Completions, greedy or sampled as each request asks, cut at the first stop sequence (each
        with why it ended):
        continuously batched, `batch_size` sequences at a time, shared prompt prefixes encoded once.
        Calls from several threads share one batch."""
        return self.batcher.generate(
            [self.generation_prompt(r) for r in requests],
            [r.max_new_tokens for r in requests],
            [r.stop for r in requests],
            batch_size,
            [(r.sampling, r.sample) for r in requests],
        )

    def _halving_on_oom(self, run: Callable[[int, int], T], batch_size: int) -> T:
        """`run(batch_size, max_batch_tokens)` (under the model's lock); where the GPU runs out of memory,
        again with both halved (logged with the sizes), as lm-evaluation-harness's `auto` batch size
        backs off, until one item per pass still does not fit."""
        import torch

        budget = self.max_batch_tokens
        while True:
            try:
                return run(batch_size, budget)
            except torch.OutOfMemoryError:
                if batch_size == 1 and budget <= MIN_BATCH_TOKENS:
                    raise
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                smaller, less = max(1, batch_size // 2), max(MIN_BATCH_TOKENS, budget // 2)
                LOG.warning(
                    f"{self.name}: out of GPU memory at batch size {batch_size} ({budget} tokens per pass); "
                    f"trying again at {smaller} ({less})"
                )
                batch_size, budget = smaller, less

    async def acomplete(
        self,
        chat: Chat,
        max_tokens: int,
        stop: Sequence[str] = (),
        top_logprobs: int | None = None,
        sampling: Sampling | None = None,
        sample: int = 0,
    ) -> Completion:
        """One chat answer with its token counts, in the batch of whatever else this model is
        generating (concurrent calls share it); a local model costs nothing per call, so its cost is
        unknown (None) as for any unpriced model."""
        start = time.perf_counter()
        request = GenerationRequest(chat, max_tokens, tuple(stop), sampling, sample)
        (text,) = await asyncio.to_thread(self.generate, [request])
        return Completion(
            str(text),
            duration_ms=round((time.perf_counter() - start) * 1000),
            attempts=1,
            prompt_tokens=len(self.encode(self.render(chat))),
            completion_tokens=len(self.encode(text)),
            ended=text.ended,
        )


def restricted_softmax(labels: Sequence[str], log_probabilities: Sequence[float]) -> dict[str, float]:
    """The distribution over `labels` alone, from each one's log-probability (sums to 1)."""
    top = max(log_probabilities)
    weights = [math.exp(value - top) for value in log_probabilities]
    total = sum(weights)
    return {label: weight / total for label, weight in zip(labels, weights, strict=False)}


def divergence(model: LocalCausalLM, prompt: str, theirs: str, ours: str, max_new_tokens: int = 0) -> dict:
    """Where two greedy texts part, the first differing token (the texts re-encoded), and the gap
    between the two tokens' log-probabilities there under `model` (None where one text ends
    there), after the prompt as generation cuts it for `max_new_tokens`. A gap below
    LOGLIKELIHOOD_TOLERANCE is a near-tie that float noise may flip."""
    import torch

    a, b = model.encode_piece(theirs), model.encode_piece(ours)
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    shown = {
        "token": at,
        "theirs": model.tokenizer.decode(a[at : at + 1]),
        "ours": model.tokenizer.decode(b[at : at + 1]),
    }
    if at >= min(len(a), len(b)):
        return {**shown, "gap": None}
    context = model.generation_prompt(GenerationRequest(prompt, max_new_tokens)) + a[:at]
    with torch.inference_mode():
        logits = model.network(input_ids=torch.tensor([context], device=model.network.device), logits_to_keep=1).logits
    log_probabilities = torch.log_softmax(logits[0, -1].float(), dim=-1)
    return {**shown, "gap": abs(float(log_probabilities[a[at]] - log_probabilities[b[at]]))}
