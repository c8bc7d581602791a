"""Generation with continuous batching and shared prefixes, for a model in this process.

A sequence leaves the batch as soon as it writes a stop sequence, its end-of-sequence token or its
last allowed token, and a waiting prompt takes its place at the next step, so the batch stays full
instead of computing until its longest member stops. Prompts wait longest first. Stop sequences are
looked for in the newly decoded text alone (`Detokenizer`); a text is decoded whole once, at its end.

Requests may arrive while the batch runs (`generate` from any thread): the thread that finds the
batch idle drives it, and the others' prompts join it. A pass out of GPU memory puts the batch's
sequences back to wait and goes on with half the batch.

The passes themselves are a `steps` engine's:
- `PackedSteps` (decoding.py), for a model whose attention takes packed passes (packed.py):
  newcomers prefilled together in packed passes from their shared prefixes, each row decoded at its
  own length without masks or copies; rows as many as `batch_size` on the CPU, and as the GPU's
  free memory holds on a GPU;
- `PaddedSteps` (below), for any other model: each prompt encoded alone from the cache of its
  longest shared prefix, rows right-aligned in preallocated buffers (padded on the left, masked),
  the model's own masks. Every layer's cache is kept whole, a sliding-window layer's too
  (transformers' own cache cuts it to its window, which would not fit the batch's columns), and a
  window counted in columns is counted in positions, since a row's tokens fill adjacent columns.

transformers' own continuous batching (`generate_batch`, paged attention) took twice as long as
fixed batches on the CPU for the same GSM8K prompts and has no stop sequences; so the model's own
forward pass is kept, and this module adds the scheduling.

Each row's next token is chosen from the logits its pass gives (sampling.py): the argmax for a
greedy sequence, a draw from its own seeded stream for a sampled one. The k samples of one prompt
have the same tokens, so they are prefilled once (the packed passes' trie holds one prompt once;
padded rows encode a prompt after its longest shared prefix) and fork into k rows.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, cast

from eval_engine.endings import BUDGET, END_TOKEN, STOP_SEQUENCE, Generation
from eval_engine.prefix_cache import common_length
from eval_engine.sampling import Draw, Sampling, choose, stream

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel
    from transformers.cache_utils import (
        Cache,
        CacheLayerMixin,
        DummyLayer,
        DynamicLayer,
        LinearAttentionCacheLayerMixin,
    )

    from eval_engine.prefix_cache import LayerStates

LOG = logging.getLogger(__name__)
INCOMPLETE = "\ufffd"  # what decoding shows for a character whose bytes have not all come


@dataclass
class Detokenizer:
    """Generated tokens' text, decoded as they come: each new token's text is what decoding from a
    few tokens back adds (so a tokenizer that joins or spaces tokens by their neighbours reads them
    right), held back while it ends in an incomplete character."""

    decode: Callable[[list[int]], str]
    text: str = ""
    start: int = 0  # tokens from here on are decoded again for the next token's text
    read: int = 0  # tokens whose text is in `text`

    def add(self, tokens: list[int]) -> str:
        """The text the newest of `tokens` (all generated so far) adds, possibly empty."""
        before = self.decode(tokens[self.start : self.read])
        after = self.decode(tokens[self.start :])
        if len(after) <= len(before) or after.endswith(INCOMPLETE):
            return ""
        added = after[len(before) :]
        self.text += added
        self.start, self.read = self.read, len(tokens)
        return added


@dataclass(eq=False)
class GeneratedSequence:
    """One prompt in the batch: its tokens, budget and stop sequences, how it chooses its tokens
    (greedy, or sampled from its stream), and what it has generated."""

    tokens: list[int]
    budget: int
    stop: tuple[str, ...]
    text: Detokenizer
    sampling: Sampling | None = None
    stream: bytes = b""
    result: Future[Generation] = field(default_factory=Future)
    generated: list[int] = field(default_factory=list)
    row: int = -1  # its row in the batch

    @property
    def next_draw(self) -> Draw:
        return Draw(self.sampling, self.stream, len(self.generated))

    @property
    def sort_key(self) -> tuple[int, list[int]]:
        return -len(self.tokens), self.tokens

    @property
    def columns(self) -> int:
        """The cache columns it may need: its prompt and budget."""
        return len(self.tokens) + self.budget


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """The text before the first occurrence of any stop sequence."""
    for sequence in stop:
        text = text.split(sequence)[0]
    return text


class Steps(Protocol):
    """A batch's passes: admitting prompts into rows, one token a row, freeing rows."""

    def room(self, active: int, batch_size: int, columns: int) -> int:
        """How many more sequences of up to `columns` cache columns may join."""
        ...

    def admit(
        self, newcomers: Sequence[GeneratedSequence], waiting: Sequence[GeneratedSequence], columns: int
    ) -> torch.Tensor:
        """Encode the newcomers' prompts into the next rows; their first tokens' logits [newcomers, vocabulary]."""
        ...

    def step(self, tokens: Sequence[int]) -> torch.Tensor:
        """One pass for each row in use, given each row's last token; the next tokens' logits [rows, vocabulary]."""
        ...

    def free(self, row: int) -> int | None:
        """Give up a row: the last row in use moves into it (returned), None where it was the last."""
        ...

    def reset(self) -> None:
        """Drop the batch's cache (after running out of memory)."""
        ...

    def shrink(self, rows: int) -> None:
        """After `rows` rows ran out of memory: take half as many, and passes half as long."""
        ...


@dataclass
class ContinuousBatcher:
    """Continuous batching over one causal LM (see the module's docstring)."""

    network: PreTrainedModel
    decode: Callable[[list[int]], str]  # generated tokens as text, special tokens left out
    lock: threading.RLock  # the model's: held for each step, so other calls interleave
    on_pass: Callable[[], None] = lambda: None
    min_shared: int = 32
    kept_prefixes: int = 4
    prefix_sharing: bool = True
    packed: bool = True  # packed prefill and row-wise decode where the model takes them
    prefill_tokens: int = 16384  # new tokens a packed prefill pass takes at most
    cache_tokens: int | None = None  # packed: the rows' budget of cached tokens (None: the device's)
    _pending: list[GeneratedSequence] = field(default_factory=list)
    _pending_lock: threading.Lock = field(default_factory=threading.Lock)
    _driving: threading.Lock = field(default_factory=threading.Lock)
    _width: int = 0  # the sequences of the pass in progress
    eos: frozenset[int] = field(init=False, default=frozenset())
    steps: Steps = field(init=False)
    occupancy: Counter[int] = field(default_factory=Counter)  # sequences in the batch -> steps run with that many
    encoded_tokens: int = 0  # prompt tokens run through the model (shared prefixes once)

    def __post_init__(self) -> None:
        from eval_engine.attention import AttentionLayout
        from eval_engine.packed import packed_path

        eos = getattr(self.network.generation_config, "eos_token_id", None)
        self.eos = frozenset(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])
        layout = AttentionLayout.of(self.network.config)
        if self.packed and packed_path(self.network, layout) is None:
            from eval_engine.decoding import PackedSteps

            self.steps = PackedSteps(
                self.network,
                layout,
                self.prefill_tokens,
                self.min_shared,
                self.kept_prefixes,
                self.prefix_sharing,
                self._count_encoded,
                self.on_pass,
                self.cache_tokens,
            )
        else:
            self.steps = PaddedSteps(
                self.network,
                self.min_shared,
                self.kept_prefixes,
                self.prefix_sharing,
                self._count_encoded,
                self.on_pass,
            )

    def _count_encoded(self, tokens: int) -> None:
        self.encoded_tokens += tokens

    def generate(
        self,
        prompts: Sequence[list[int]],
        budgets: Sequence[int],
        stops: Sequence[tuple[str, ...]],
        batch_size: int,
        samplings: Sequence[tuple[Sampling | None, int]] | None = None,
    ) -> list[Generation]:
        """Texts for the prompts' tokens, each cut at its first stop sequence (with why it ended):
        greedy, or where `samplings` gives a prompt's settings and sample index, that sample's draw."""
        samplings = samplings or [(None, 0)] * len(prompts)
        sequences = [
            GeneratedSequence(
                list(p),
                b,
                tuple(s),
                Detokenizer(self.decode),
                sampling,
                stream(sampling.seed, sample, p) if sampling else b"",
            )
            for p, b, s, (sampling, sample) in zip(prompts, budgets, stops, samplings, strict=True)
        ]
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

        active: list[GeneratedSequence] = []
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
                    f"out of GPU memory generating {self._width} sequences at batch size {batch_size}; trying again "
                    f"at {batch_size // 2}, with half the rows"
                )
                self.steps.shrink(self._width)
                self._requeue(active)
                active, batch_size = [], batch_size // 2
            except BaseException as error:
                failure = error
                break
        self.steps.reset()
        # no caller may wait for ever: the batch's sequences and the waiting ones fail with the error
        for sequence in active + self._take(len(self._pending)):
            if not sequence.result.done():
                sequence.result.set_exception(failure)
        raise failure

    def _run(self, active: list[GeneratedSequence], batch_size: int) -> None:
        import torch

        try:
            while True:
                with self.lock, torch.inference_mode():
                    self._admit(active, batch_size)
                    if active:
                        self._width = len(active)
                        self.occupancy[len(active)] += 1
                        by_row = cast("list[GeneratedSequence]", [None] * len(active))  # every row is filled
                        for sequence in active:
                            by_row[sequence.row] = sequence
                        logits = self.steps.step([sequence.generated[-1] for sequence in by_row])
                        chosen = choose(logits, [sequence.next_draw for sequence in by_row])
                        done = [s for s in active if self._finish_if_done(s, chosen[s.row])]
                        self._retire(active, done)
                    elif not self._pending:
                        return
        finally:
            if not active:
                self.steps.reset()

    def _take(self, count: int) -> list[GeneratedSequence]:
        with self._pending_lock:
            taken, self._pending[:count] = self._pending[:count], []
            return taken

    def _admit(self, active: list[GeneratedSequence], batch_size: int) -> None:
        """Encode waiting prompts into the batch's free rows."""
        with self._pending_lock:
            columns = max((s.columns for s in [*active, *self._pending[:batch_size]]), default=0)
        newcomers = self._take(self.steps.room(len(active), batch_size, columns)) if self._pending else []
        if not newcomers:
            return
        with self._pending_lock:
            waiting = self._pending[:8]
        first, self._width = len(active), len(active) + len(newcomers)
        try:
            tokens = choose(self.steps.admit(newcomers, waiting, columns), [s.next_draw for s in newcomers])
        except BaseException:
            self._requeue(newcomers)  # they wait again (or fail with the others), never lost
            raise
        for index, sequence in enumerate(newcomers):
            sequence.row = first + index
            active.append(sequence)
        self._retire(active, [s for s, token in zip(newcomers, tokens, strict=True) if self._finish_if_done(s, token)])

    def _finish_if_done(self, sequence: GeneratedSequence, token: int) -> bool:
        """Record a generated token; where the sequence is done, set its text (decoded whole) and
        why it ended: a stop sequence, the end token or the budget, in that order."""
        sequence.generated.append(token)
        added = sequence.text.add(sequence.generated)
        longest = max(map(len, sequence.stop), default=0)
        recent = sequence.text.text[-(len(added) + longest) :] if added else ""
        if any(stop in recent for stop in sequence.stop):
            ended = STOP_SEQUENCE
        elif token in self.eos:
            ended = END_TOKEN
        elif len(sequence.generated) >= sequence.budget:
            ended = BUDGET
        else:
            return False
        sequence.result.set_result(Generation(cut_at_stop(self.decode(sequence.generated), sequence.stop), ended))
        return True

    def _retire(self, active: list[GeneratedSequence], done: list[GeneratedSequence]) -> None:
        """Done sequences leave the batch at once: the batch's last row moves into each freed one
        (the highest freed first), so the next step computes only the sequences still running."""
        for sequence in sorted(done, key=lambda s: -s.row):
            active.remove(sequence)
            moved = self.steps.free(sequence.row)
            if moved is not None:
                next(s for s in active if s.row == moved).row = sequence.row

    def _requeue(self, active: Sequence[GeneratedSequence]) -> None:
        self.steps.reset()
        for sequence in active:
            sequence.generated, sequence.row, sequence.text = [], -1, Detokenizer(self.decode)
        with self._pending_lock:
            self._pending[:0] = active
            self._pending.sort(key=lambda s: s.sort_key)


# --- padded rows, for models outside packed passes ---------------------------------------------------


@dataclass
class PaddedSteps:
    """Each prompt encoded alone (no padding) from the cache of its longest shared prefix: a fixed
    few-shot header, a system prompt, a chat template's preamble is encoded once. A prefix becomes
    known when a prompt about to be encoded shares at least `min_shared` tokens with a prompt still
    waiting; the few most recent prefixes are kept. The rows live in `SlotBatch`'s buffers, each
    step writing its new column in place under the model's own masks."""

    network: PreTrainedModel
    min_shared: int = 32
    kept_prefixes: int = 4
    prefix_sharing: bool = True
    encoded: Callable[[int], None] = lambda tokens: None
    on_pass: Callable[[], None] = lambda: None
    batch: SlotBatch | None = None
    positions: list[int] = field(default_factory=list)  # each row's next position
    _prefixes: OrderedDict[tuple[int, ...], LayerStates] = field(default_factory=OrderedDict)

    def room(self, active: int, batch_size: int, columns: int) -> int:
        return max(0, batch_size - active)

    def reset(self) -> None:
        self.batch, self.positions = None, []

    def shrink(self, rows: int) -> None:
        """Nothing to shrink: the batch size alone sets the rows, and a prompt is encoded alone."""

    def admit(
        self, newcomers: Sequence[GeneratedSequence], waiting: Sequence[GeneratedSequence], columns: int
    ) -> torch.Tensor:
        import torch

        firsts = []
        for index, sequence in enumerate(newcomers):
            layers, logits = self._encode(sequence.tokens, [*newcomers[index + 1 :], *waiting])
            if self.batch is None:
                self.batch = SlotBatch.for_rows(layers, len(newcomers) - index, columns)
            self.batch.place(layers, len(sequence.tokens))
            self.positions.append(len(sequence.tokens))
            firsts.append(logits)
        return torch.stack(firsts)

    def _encode(self, tokens: list[int], others: Sequence[GeneratedSequence]) -> tuple[LayerStates, torch.Tensor]:
        """One prompt's key/values per layer and its first token's logits, from the cache of its
        longest shared prefix (see `_shared_prefix`)."""
        prefix = self._shared_prefix(tokens, others)
        return self._forward(tokens[len(prefix) :], len(prefix), self._prefixes.get(prefix))

    def _forward(self, tokens: Sequence[int], start: int, past: LayerStates | None) -> tuple[LayerStates, torch.Tensor]:
        """One row's pass over `tokens` (positions from `start`) after the cache `past`: the
        key/values per layer of the past and the tokens, every layer's whole, and the last token's
        logits."""
        import torch
        from transformers import DynamicCache

        device = self.network.device
        self.on_pass()
        self.encoded(len(tokens))
        with torch.inference_mode():
            output = self.network(
                input_ids=torch.tensor([list(tokens)], device=device),
                position_ids=torch.arange(start, start + len(tokens), device=device).unsqueeze(0),
                past_key_values=DynamicCache(ddp_cache_data=past) if past else DynamicCache(),
                use_cache=True,
                logits_to_keep=1,
            )
        return [(layer.keys, layer.values) for layer in output.past_key_values.layers], output.logits[0, -1]

    def _shared_prefix(self, tokens: list[int], others: Sequence[GeneratedSequence]) -> tuple[int, ...]:
        """The longest prefix the prompt shares (at least `min_shared` tokens, one token left to
        encode) with a kept prefix or one of `others`; a new one is encoded (from the kept one it
        extends) and kept."""
        if not self.prefix_sharing:
            return ()
        known = max(
            (p for p in self._prefixes if len(p) < len(tokens) and tuple(tokens[: len(p)]) == p), key=len, default=()
        )
        shared = min(max((common_length(tokens, other.tokens) for other in others[:16]), default=0), len(tokens) - 1)
        if shared < self.min_shared or shared <= len(known):
            if known:
                self._prefixes.move_to_end(known)
            return known
        prefix = tuple(tokens[:shared])
        self._prefixes[prefix], _ = self._forward(prefix[len(known) :], len(known), self._prefixes.get(known))
        while len(self._prefixes) > self.kept_prefixes:
            self._prefixes.popitem(last=False)
        return prefix

    def step(self, tokens: Sequence[int]) -> torch.Tensor:
        import torch

        assert self.batch is not None
        batch = self.batch
        device = batch.mask.device
        rows = batch.computed_rows
        ids = torch.tensor([[t] for t in tokens] + [[0]] * (rows - len(tokens)), device=device)
        positions = torch.tensor([[p] for p in self.positions] + [[0]] * (rows - len(tokens)), device=device)
        cache, mask = batch.next_column()
        self.on_pass()
        with torch.inference_mode():
            logits = self.network(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            ).logits[:, -1]
        batch.advance()
        self.positions = [p + 1 for p in self.positions]
        return logits[: len(tokens)]

    def free(self, row: int) -> int | None:
        assert self.batch is not None
        moved = self.batch.free(row)
        last = self.positions.pop()
        if moved is not None:
            self.positions[row] = last
        return moved


@functools.cache
def column_layer() -> Callable[[torch.Tensor, torch.Tensor, int], DynamicLayer]:
    """transformers' cache layer over preallocated buffers (made on first use, so that importing
    this module imports no transformers): a step writes its new column in place instead of
    concatenating a new cache, and the model sees views of the columns in use."""
    from transformers.cache_utils import DynamicLayer

    class ColumnLayer(DynamicLayer):
        def __init__(self, keys: torch.Tensor, values: torch.Tensor, width: int) -> None:
            super().__init__()
            self.key_buffer, self.value_buffer, self.width = keys, values, width
            self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
            self.keys, self.values = keys[:, :, :width], values[:, :, :width]

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
        ) -> tuple[torch.Tensor, torch.Tensor]:
            end = self.width + key_states.shape[-2]
            self.key_buffer[:, :, self.width : end] = key_states
            self.value_buffer[:, :, self.width : end] = value_states
            self.width = end
            keys, values = self.key_buffer[:, :, :end], self.value_buffer[:, :, :end]
            self.keys, self.values = keys, values
            return keys, values

    return ColumnLayer


# The matrix kernels block a step's rows by this: on a 2-core AVX-512 EPYC a step of 3, 7 or 11 rows
# took 10 to 25% longer than one of 4, 8 or 12 (SmolLM2-135M, 300 and 1,000 cached columns), while
# other counts cost about their rows; so a step one row short of a block computes a spare row.
ROW_BLOCK = 4


@dataclass
class SlotBatch:
    """The padded rows' key/value cache: one row per sequence, in buffers with room for more rows
    and columns. The sequences hold the first `rows` rows, and a step computes those rows only (views
    of the buffers, and a spare one where that completes a `ROW_BLOCK`): a sequence that leaves hands
    its row to the sequence in the last one. Every sequence's newest token sits in the same column, so
    one that joins is placed right-aligned (padded on the left, masked)."""

    keys: list[torch.Tensor]  # per layer [row capacity, heads, column capacity, dim]
    values: list[torch.Tensor]
    mask: torch.Tensor  # [row capacity, column capacity]: 1 where a row's sequence has a token
    rows: int = 0  # rows in use, the first ones
    width: int = 0  # columns in use

    @classmethod
    def for_rows(cls, layers: LayerStates, rows: int, columns: int) -> SlotBatch:
        """Empty buffers for `rows` rows of `columns`, shaped like a prompt's layers."""
        import torch

        def buffer(like: torch.Tensor) -> torch.Tensor:
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

    def place(self, layers: LayerStates, length: int) -> int:
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

    def next_column(self) -> tuple[Cache, torch.Tensor]:
        """The cache and attention mask of the next step, over the rows it computes."""
        from transformers.cache_utils import Cache

        if self.width == self.mask.shape[1]:
            self._rebuild(min_width=0, spare=max(64, self.width // 2))
        rows = self.computed_rows
        self.mask[:rows, self.width] = 1
        layers: list[CacheLayerMixin | LinearAttentionCacheLayerMixin | DummyLayer] = [
            column_layer()(k[:rows], v[:rows], self.width) for k, v in zip(self.keys, self.values, strict=False)
        ]
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

        def moved(buffer: torch.Tensor) -> torch.Tensor:
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
