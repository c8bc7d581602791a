"""Greedy generation with continuous batching and shared prefixes, for a model in this process.

A sequence leaves the batch as soon as it writes a stop sequence, its end-of-sequence token or its
last allowed token, and a waiting prompt takes its place at the next step, so the batch stays full
instead of computing until its longest member stops. Prompts wait longest first, so a newcomer is
never longer than the batch's cache and only ever pads on the left.

Each prompt is encoded alone (no padding), from the key/value cache of its longest shared prefix
where one is known: a fixed few-shot header, a system prompt, a chat template's preamble is encoded
once. A prefix becomes known when a prompt about to be encoded shares at least `min_shared` tokens
with a prompt still waiting; the few most recent prefixes are kept.

Every layer's cache is kept whole, a sliding-window layer's too (transformers' own cache cuts it to
its window, which would not fit the batch's columns), and each layer's mask is the model's own, from
the batch's attention mask: a row's tokens fill adjacent columns, so a window counted in columns is
counted in positions.

The batch's cache is preallocated, one row per sequence (`SlotBatch`): a step writes its new
column in place, where transformers' `DynamicCache` concatenates a whole new cache at every step,
and computes only the rows of sequences still running (one that finishes hands its row to the last).

Requests may arrive while the batch runs (`generate` from any thread): the thread that finds the
batch idle drives it, and the others' prompts join it. transformers' own continuous batching
(`generate_batch`, paged attention) runs here too, but took twice as long as fixed batches on this
CPU for the same GSM8K prompts and has no stop sequences; so the model's own forward pass is kept,
and this module adds the scheduling, the prefix cache and the in-place cache.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from eval_platform.common.models.prefix_cache import common_length

LOG = logging.getLogger(__name__)


@dataclass(eq=False)
class GreedySequence:
    """One prompt in the batch: its tokens, budget and stop sequences, and what it has generated."""

    tokens: list[int]
    budget: int
    stop: tuple[str, ...]
    result: Future = field(default_factory=Future)
    generated: list[int] = field(default_factory=list)
    length: int = 0  # tokens in the cache
    slot: int = -1  # its row in the batch

    @property
    def sort_key(self) -> tuple[int, list[int]]:
        return -len(self.tokens), self.tokens


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """The text before the first occurrence of any stop sequence."""
    for sequence in stop:
        text = text.split(sequence)[0]
    return text


@dataclass
class ContinuousBatcher:
    """Continuous batching over one causal LM (see the module's docstring)."""

    network: Any
    decode: Callable[[list[int]], str]  # generated tokens as text, special tokens left out
    lock: threading.RLock  # the model's: held for each step, so other calls interleave
    on_pass: Callable[[], None] = lambda: None
    min_shared: int = 32
    kept_prefixes: int = 4
    prefix_sharing: bool = True
    _pending: list[GreedySequence] = field(default_factory=list)
    _pending_lock: threading.Lock = field(default_factory=threading.Lock)
    _driving: threading.Lock = field(default_factory=threading.Lock)
    _prefixes: OrderedDict[tuple[int, ...], Any] = field(default_factory=OrderedDict)
    eos: frozenset[int] = field(init=False, default=frozenset())
    occupancy: Counter = field(default_factory=Counter)  # sequences in the batch -> steps run with that many
    encoded_tokens: int = 0  # prompt tokens run through the model (shared prefixes once)

    def __post_init__(self) -> None:
        eos = getattr(self.network.generation_config, "eos_token_id", None)
        self.eos = frozenset(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])

    def generate(
        self, prompts: Sequence[list[int]], budgets: Sequence[int], stops: Sequence[tuple[str, ...]], batch_size: int
    ) -> list[str]:
        """Greedy texts for the prompts' tokens, each cut at its first stop sequence."""
        sequences = [GreedySequence(list(p), b, tuple(s)) for p, b, s in zip(prompts, budgets, stops, strict=False)]
        with self._pending_lock:
            self._pending.extend(sequences)
            self._pending.sort(key=lambda s: s.sort_key)
        for sequence in sequences:
            while not sequence.result.done():
                if self._driving.acquire(blocking=False):
                    try:
                        self._drive(batch_size)
                    finally:
                        self._driving.release()
                else:
                    try:
                        sequence.result.exception(timeout=0.05)
                    except TimeoutError:
                        pass
        return [sequence.result.result() for sequence in sequences]

    # --- the batch ---------------------------------------------------------------------------

    def _drive(self, batch_size: int) -> None:
        """Run steps until nothing waits and nothing is in the batch; a pass out of GPU memory puts
        the batch's sequences back to wait and goes on with half the batch size."""
        import torch

        active: list[GreedySequence] = []
        while True:
            try:
                self._run(active, batch_size)
                return
            except torch.OutOfMemoryError as error:
                if batch_size == 1:
                    failure = error
                    break
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                LOG.warning(
                    f"out of GPU memory generating at batch size {batch_size}; trying again at {batch_size // 2}"
                )
                self._requeue(active)
                active, batch_size = [], batch_size // 2
            except BaseException as error:
                failure = error
                break
        # no caller may wait for ever: the batch's sequences and the waiting ones fail with the error
        for sequence in active + self._take(len(self._pending)):
            if not sequence.result.done():
                sequence.result.set_exception(failure)
        raise failure

    def _run(self, active: list[GreedySequence], batch_size: int) -> None:
        batch: SlotBatch | None = None
        while True:
            with self.lock:
                if len(active) < batch_size:
                    batch = self._admit(active, batch_size, batch)
                if active:
                    self._step(active, batch)
                    self._retire(active, batch)
                elif not self._pending:
                    return

    def _take(self, count: int) -> list[GreedySequence]:
        with self._pending_lock:
            taken, self._pending[:count] = self._pending[:count], []
            return taken

    def _admit(self, active: list[GreedySequence], batch_size: int, batch: SlotBatch | None) -> SlotBatch | None:
        """Encode waiting prompts into the batch's free places."""
        newcomers = self._take(batch_size - len(active))
        for index, sequence in enumerate(newcomers):
            layers, token = self._encode(sequence, newcomers[index + 1 :])
            sequence.length = len(sequence.tokens)
            if self._finish_if_done(sequence, token):
                continue
            if batch is None:
                batch = SlotBatch.for_rows(layers, len(newcomers) - index, sequence.length + sequence.budget)
            sequence.slot = batch.place(layers, sequence.length)
            active.append(sequence)
        return batch

    def _encode(self, sequence: GreedySequence, others: list[GreedySequence]):
        """One prompt's key/values per layer and its first generated token, from the cache of its
        longest shared prefix (see `_shared_prefix`)."""
        prefix = self._shared_prefix(sequence.tokens, others)
        layers, logits = self._forward(sequence.tokens[len(prefix) :], len(prefix), self._prefixes.get(prefix))
        return layers, int(logits.argmax())

    def _forward(self, tokens: Sequence[int], start: int, past):
        """One row's pass over `tokens` (positions from `start`) after the cache `past`: the
        key/values per layer of the past and the tokens, every layer's whole (a sliding-window
        layer's cut to its window would not fit the batch's columns), and the last token's logits."""
        import torch
        from transformers import DynamicCache

        device = self.network.device
        self.on_pass()
        self.encoded_tokens += len(tokens)
        with torch.inference_mode():
            output = self.network(
                input_ids=torch.tensor([list(tokens)], device=device),
                position_ids=torch.arange(start, start + len(tokens), device=device).unsqueeze(0),
                past_key_values=DynamicCache(ddp_cache_data=past) if past else DynamicCache(),
                use_cache=True,
                logits_to_keep=1,
            )
        return [(layer.keys, layer.values) for layer in output.past_key_values.layers], output.logits[0, -1]

    def _shared_prefix(self, tokens: list[int], others: list[GreedySequence]) -> tuple[int, ...]:
        """The longest prefix the prompt shares (at least `min_shared` tokens, one token left to
        encode) with a kept prefix, one of `others` or a waiting prompt; a new one is encoded (from
        the kept one it extends) and kept."""
        if not self.prefix_sharing:
            return ()
        known = max(
            (p for p in self._prefixes if len(p) < len(tokens) and tuple(tokens[: len(p)]) == p), key=len, default=()
        )
        with self._pending_lock:
            neighbours = others[:8] + self._pending[:8]
        shared = min(max((common_length(tokens, other.tokens) for other in neighbours), default=0), len(tokens) - 1)
        if shared < self.min_shared or shared <= len(known):
            if known:
                self._prefixes.move_to_end(known)
            return known
        prefix = tuple(tokens[:shared])
        self._prefixes[prefix], _ = self._forward(prefix[len(known) :], len(known), self._prefixes.get(known))
        while len(self._prefixes) > self.kept_prefixes:
            self._prefixes.popitem(last=False)
        return prefix

    def _step(self, active: list[GreedySequence], batch: SlotBatch) -> None:
        """One token for every sequence in the batch."""
        import torch

        device = batch.mask.device
        tokens = torch.zeros((batch.computed_rows, 1), dtype=torch.long, device=device)
        positions = torch.zeros((batch.computed_rows, 1), dtype=torch.long, device=device)
        for sequence in active:
            tokens[sequence.slot, 0], positions[sequence.slot, 0] = sequence.generated[-1], sequence.length
        cache, mask = batch.next_column()
        self.on_pass()
        self.occupancy[len(active)] += 1
        with torch.inference_mode():
            logits = self.network(
                input_ids=tokens,
                attention_mask=mask,
                position_ids=positions,
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            ).logits[:, -1]
        batch.advance()
        chosen = logits.argmax(-1).tolist()
        for sequence in active:
            sequence.length += 1
            self._finish_if_done(sequence, chosen[sequence.slot])

    def _finish_if_done(self, sequence: GreedySequence, token: int) -> bool:
        """Record a generated token; where the sequence is done, set its text."""
        sequence.generated.append(token)
        text = self.decode(sequence.generated)
        if token in self.eos or len(sequence.generated) >= sequence.budget or any(s in text for s in sequence.stop):
            sequence.result.set_result(cut_at_stop(text, sequence.stop))
            return True
        return False

    def _retire(self, active: list[GreedySequence], batch: SlotBatch) -> None:
        """Done sequences leave the batch at once: the batch's last row moves into each freed one,
        so the next step computes only the sequences still running."""
        for sequence in sorted((s for s in active if s.result.done()), key=lambda s: -s.slot):
            active.remove(sequence)
            moved = batch.free(sequence.slot)
            if moved is not None:
                next(s for s in active if s.slot == moved).slot = sequence.slot

    def _requeue(self, active: list[GreedySequence]) -> None:
        for sequence in active:
            sequence.generated, sequence.length = [], 0
        with self._pending_lock:
            self._pending[:0] = active
            self._pending.sort(key=lambda s: s.sort_key)


@functools.cache
def column_layer() -> type:
    """transformers' cache layer over preallocated buffers (made on first use, so that importing
    this module imports no transformers): a step writes its new column in place instead of
    concatenating a new cache, and the model sees views of the columns in use."""
    from transformers.cache_utils import DynamicLayer

    class ColumnLayer(DynamicLayer):
        def __init__(self, keys, values, width: int) -> None:
            super().__init__()
            self.key_buffer, self.value_buffer, self.width = keys, values, width
            self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
            self.keys, self.values = keys[:, :, :width], values[:, :, :width]

        def update(self, key_states, value_states, *args, **kwargs):
            end = self.width + key_states.shape[-2]
            self.key_buffer[:, :, self.width : end] = key_states
            self.value_buffer[:, :, self.width : end] = value_states
            self.width = end
            self.keys, self.values = self.key_buffer[:, :, :end], self.value_buffer[:, :, :end]
            return self.keys, self.values

    return ColumnLayer


# The matrix kernels block a step's rows by this: on a 2-core AVX-512 EPYC a step of 3, 7 or 11 rows
# took 10 to 25% longer than one of 4, 8 or 12 (SmolLM2-135M, 300 and 1,000 cached columns), while
# other counts cost about their rows; so a step one row short of a block computes a spare row.
ROW_BLOCK = 4


@dataclass
class SlotBatch:
    """The batch's key/value cache: one row per sequence, in buffers with room for more rows and
    columns. The sequences hold the first `rows` rows, and a step computes those rows only (views of
    the buffers, and a spare one where that completes a `ROW_BLOCK`): a sequence that leaves hands
    its row to the sequence in the last one. Every
    sequence's newest token sits in the same column, so one that joins is placed right-aligned
    (padded on the left, masked)."""

    keys: list[Any]  # per layer [row capacity, heads, column capacity, dim]
    values: list[Any]
    mask: Any  # [row capacity, column capacity]: 1 where a row's sequence has a token
    rows: int = 0  # rows in use, the first ones
    width: int = 0  # columns in use

    @classmethod
    def for_rows(cls, layers: Sequence[tuple[Any, Any]], rows: int, columns: int) -> SlotBatch:
        """Empty buffers for `rows` rows of `columns`, shaped like a prompt's layers."""
        import torch

        def buffer(like):
            return like.new_zeros((rows, like.shape[1], columns, like.shape[3]))

        return cls(
            [buffer(k) for k, _ in layers],
            [buffer(v) for _, v in layers],
            torch.zeros((rows, columns), dtype=torch.long, device=layers[0][0].device),
        )

    @property
    def computed_rows(self) -> int:
        """The rows a step computes: those in use, and a spare one where that completes a ROW_BLOCK
        (a spare row attends its new column and what a sequence that left kept there, so it
        computes something defined)."""
        spare = 1 if self.rows % ROW_BLOCK == ROW_BLOCK - 1 else 0
        return min(self.mask.shape[0], self.rows + spare)

    def place(self, layers: Sequence[tuple[Any, Any]], length: int) -> int:
        """Put a prompt's cache (one row of `length` columns) in the next row; returns the row."""
        if length > self.width:
            self._rebuild(min_width=length, spare=64)
        if self.rows == self.mask.shape[0]:
            self._add_row()
        row, start = self.rows, self.width - length
        for buffers, index in ((self.keys, 0), (self.values, 1)):
            for buffer, layer in zip(buffers, layers, strict=False):
                buffer[row, :, start : self.width] = layer[index][0]
        self.mask[row] = 0
        self.mask[row, start : self.width] = 1
        self.rows += 1
        return row

    def free(self, row: int) -> int | None:
        """Give up a row: the last row in use moves into it. Returns the row that moved, None where
        the freed row was the last."""
        self.rows -= 1
        last = self.rows
        if row == last:
            return None
        for buffer in (*self.keys, *self.values):
            buffer[row, :, : self.width] = buffer[last, :, : self.width]
        self.mask[row] = self.mask[last]
        return last

    def next_column(self):
        """The cache and attention mask of the next step, over the rows it computes."""
        from transformers.cache_utils import Cache

        if self.width == self.mask.shape[1]:
            self._rebuild(min_width=0, spare=max(64, self.width // 2))
        rows = self.computed_rows
        self.mask[:rows, self.width] = 1
        layers = [column_layer()(k[:rows], v[:rows], self.width) for k, v in zip(self.keys, self.values, strict=False)]
        return Cache(layers=layers), self.mask[:rows, : self.width + 1]

    def advance(self) -> None:
        self.width += 1

    def _add_row(self) -> None:
        import torch

        self.keys = [torch.cat([k, torch.zeros_like(k[:1])]) for k in self.keys]
        self.values = [torch.cat([v, torch.zeros_like(v[:1])]) for v in self.values]
        self.mask = torch.cat([self.mask, torch.zeros_like(self.mask[:1])])

    def _rebuild(self, min_width: int, spare: int) -> None:
        """New buffers without the leading columns no sequence uses, at least `min_width`
        columns wide (the rows move right), with `spare` free columns after."""
        used = self.mask[: self.rows, : self.width].any(0).nonzero()
        first = int(used[0]) if len(used) else self.width
        kept = self.width - first
        width = max(kept, min_width)
        offset, capacity = width - kept, max(self.mask.shape[1], width + spare)
        if not kept and capacity == self.mask.shape[1]:  # nothing to move: the buffers as they are
            self.width = width
            return

        def moved(buffer):
            axis = buffer.dim() - 2 if buffer.dim() == 4 else 1  # the columns
            fresh = buffer.new_zeros(buffer.shape[:axis] + (capacity,) + buffer.shape[axis + 1 :])
            fresh.narrow(axis, offset, kept).copy_(buffer.narrow(axis, first, kept))
            return fresh

        self.keys, self.values, self.mask = (
            [moved(k) for k in self.keys],
            [moved(v) for v in self.values],
            moved(self.mask),
        )
        self.width = width
