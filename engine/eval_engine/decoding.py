"""Generation's passes without masks or copies: prompts prefilled in packed passes, every
row decoded at its own length, a prefix that rows share read once a step.

The batch's cache (`RowCache`) holds each sequence in a row of its own: per layer, [rows, columns,
key heads, width] (token-major: the FlashAttention kernel reads a row as a sequence of `seqused_k`
tokens) or [rows, key heads, columns, width] (head-major: torch's CPU attention reads a row's heads).
The rows in use are the first ones: a sequence that leaves hands its row to the sequence in the
last one. A row starts at its first position, or after a `SharedPrefix` it reads in place: a
few-shot header, a system prompt or a chat template's preamble that prompts share, held once.

Prefill (`admit`): the newcomers' prompts go into a prefix trie and through packed passes
(packed.py), each shared run computed once; a prefix kept from an earlier admission is a node
computed already. At the pass that computes a prompt's last token, the prompt's keys and values
after its shared prefix (its ancestors' from the store, its own from the pass) are copied once into
its row, and its last position's logits give its first token; at the pass that computes a new
shared prefix's last token, the prefix is copied out of the store. The prefix a newcomer shares is
its first branching point with another prompt (newcomer or waiting) at `min_shared` tokens or more,
or the longest kept prefix it starts with; a row reads it in place only where every position it
will reach sees the whole prefix within every sliding window (else it holds the prefix itself).

Decode (`step`): one token a row, the rows' tokens side by side in one sequence; each layer writes
its new keys and values at each row's length and attends to the row's own tokens (one
variable-length call: FlashAttention's with `seqused_k` the rows' lengths, or on the CPU one call
over the rows with their lengths' mask), and to each shared prefix with the rows that read it, the
parts merged by their log-sum-exps; native grouped-query heads, each layer's window. transformers
builds no 4-D mask, no key is repeated, and one copy of the chosen tokens goes to the host a step.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from eval_engine import kernels, packed
from eval_engine.attention import AttentionLayout
from eval_engine.prefix_cache import Node, PrefixTrie, _fold_short, _split, common_length

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

    from eval_engine.continuous import GeneratedSequence
    from eval_engine.prefix_cache import LayerStates

CUDA_CACHE_SHARE = 0.9  # of the GPU memory free when a batch starts: what its rows may take
# The CPU's budget of cached tokens, every row's prompt and budget: its steps read the weights once for
# all rows, so more rows generate more tokens a second until reading the rows' caches dominates
# (SmolLM2-135M, float32, 2 AVX-512 cores, gsm8k_cot: 84 tokens/s a step at 8 rows, 164 at 32, 200 at 64).
CPU_CACHE_TOKENS = 32768
MIN_PREFILL_TOKENS = 64  # the shortest prefill pass that one out of GPU memory falls back to


@dataclass(eq=False)
class SharedPrefix:
    """A prefix that rows read in place: its tokens and, per layer, its keys and values."""

    tokens: tuple[int, ...]
    # layer -> (keys, values), [length, KVH, width] each
    states: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    readers: int = 0  # rows reading it


@dataclass
class RowCache:
    """Every sequence's own keys and values, a row each (see the module's docstring)."""

    rows: int
    columns: int
    token_major: bool
    lengths: list[int] = field(default_factory=list)  # tokens held by each row in use
    prefixes: list[SharedPrefix | None] = field(default_factory=list)  # the prefix each row reads
    value_widths: dict[int, int] = field(default_factory=dict)  # layer -> its values' own width
    keys: dict[int, torch.Tensor] = field(default_factory=dict)  # layer -> buffer
    values: dict[int, torch.Tensor] = field(default_factory=dict)

    @property
    def used(self) -> int:
        return len(self.lengths)

    def base(self, row: int) -> int:
        """The row's first position: after its prefix."""
        prefix = self.prefixes[row]
        return len(prefix.tokens) if prefix is not None else 0

    def _empty(self, like: torch.Tensor, width: int | None = None) -> torch.Tensor:
        """A buffer for states like `like` [..., KVH, width], `width` wide (at least its own)."""
        heads, width = like.shape[-2], max(like.shape[-1], width or 0)
        shape = (self.rows, self.columns, heads, width) if self.token_major else (self.rows, heads, self.columns, width)
        return like.new_zeros(shape)

    def buffers(self, layer: int, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The layer's buffers, made on first use like its keys and values ([tokens, KVH, width]);
        token-major values as wide as the keys (the flash kernel takes one width; multi-head latent
        attention's values are narrower: the extra columns stay zeros)."""
        if layer not in self.keys:
            self.keys[layer] = self._empty(key)
            self.values[layer] = self._empty(value, key.shape[-1] if self.token_major else None)
            self.value_widths[layer] = value.shape[-1]
        return self.keys[layer], self.values[layer]

    def write(self, buffer: torch.Tensor, rows: torch.Tensor, columns: torch.Tensor, states: torch.Tensor) -> None:
        """`states` [n, KVH, width] at (row, column) pairs."""
        width = states.shape[-1]
        if self.token_major:
            buffer[..., :width][rows, columns] = states
        else:
            buffer[..., :width].permute(0, 2, 1, 3)[rows, columns] = states

    def move(self, source: int, target: int) -> None:
        """Row `source`'s tokens into row `target`, every layer."""
        length = self.lengths[source]
        for buffer in (*self.keys.values(), *self.values.values()):
            if self.token_major:
                buffer[target, :length] = buffer[source, :length]
            else:
                buffer[target, :, :length] = buffer[source, :, :length]
        self.lengths[target], self.prefixes[target] = length, self.prefixes[source]

    def grown(self, rows: int, columns: int) -> RowCache:
        """A cache of at least these sizes holding this one's rows."""
        bigger = RowCache(
            max(rows, self.rows), max(columns, self.columns), self.token_major, self.lengths, self.prefixes
        )
        bigger.value_widths = self.value_widths
        for mine, theirs in ((self.keys, bigger.keys), (self.values, bigger.values)):
            for layer, buffer in mine.items():
                theirs[layer] = bigger._empty(buffer[0, 0] if self.token_major else buffer[0, :, 0])
                if self.token_major:
                    theirs[layer][: self.rows, : self.columns] = buffer
                else:
                    theirs[layer][: self.rows, :, : self.columns] = buffer
        return bigger


@dataclass
class PrefillRun(packed.PassRun):
    """A prefill pass: a packed pass that also copies each prompt it ends into its row, and each
    shared prefix it ends out of the store."""

    cache: RowCache | None = None
    # (rows, columns, store slots) and (rows, columns, pass tokens), on the device
    row_writes: tuple[tuple[torch.Tensor, ...], ...] = ()
    prefix_writes: Sequence[tuple[SharedPrefix, torch.Tensor]] = ()  # each prefix ended here, and its store slots

    def attend(
        self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float
    ) -> torch.Tensor:
        output = super().attend(layer, query, key, value, scale)
        assert self.cache is not None
        k, v = key[0].transpose(0, 1), value[0].transpose(0, 1)
        keys, values = self.cache.buffers(layer, k, v)
        store_keys, store_values = self.stores[layer]
        (store_rows, store_columns, slots), (pass_rows, pass_columns, tokens) = self.row_writes
        if len(slots):
            self.cache.write(keys, store_rows, store_columns, store_keys.index_select(0, slots))
            self.cache.write(values, store_rows, store_columns, store_values.index_select(0, slots))
        if len(tokens):
            self.cache.write(keys, pass_rows, pass_columns, k.index_select(0, tokens))
            self.cache.write(values, pass_rows, pass_columns, v.index_select(0, tokens))
        for prefix, prefix_slots in self.prefix_writes:
            prefix.states[layer] = (
                store_keys.index_select(0, prefix_slots),
                store_values.index_select(0, prefix_slots),
            )
        return output


@dataclass
class PrefixReaders:
    """A shared prefix read in a decode step: the rows that read it and, for FlashAttention, the
    step's call over it (one query a row, all its keys), each on the device."""

    prefix: SharedPrefix
    rows: torch.Tensor
    cu_q: torch.Tensor | None = None  # one sequence: the rows' queries over the prefix's keys
    cu_k: torch.Tensor | None = None


@dataclass
class DecodeRun:
    """A decode step: one token a row, attending to its row and its shared prefix. Every tensor the
    layers read is built once a step, by `PackedSteps.step`, in one copy to the device."""

    cache: RowCache
    windows: Sequence[int | None]
    kernel: str  # kernels.kernel_name's
    rows: torch.Tensor  # 0..R-1 on the device
    columns: torch.Tensor  # each row's length: where its new token goes
    readers: Sequence[PrefixReaders]
    # by window: the CPU's masks [R, 1, 1, longest]
    visible: dict[int | None, torch.Tensor] = field(default_factory=dict)
    cu_q: torch.Tensor | None = None  # FlashAttention's call over the rows: a query and a row a sequence
    cu_k: torch.Tensor | None = None
    used: torch.Tensor | None = None  # each row's keys, its new one included (seqused_k)

    def attend(
        self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float
    ) -> torch.Tensor:
        q, k, v = query[0].transpose(0, 1), key[0].transpose(0, 1), value[0].transpose(0, 1)  # [R, heads, width]
        keys, values = self.cache.buffers(layer, k, v)
        self.cache.write(keys, self.rows, self.columns, k)
        self.cache.write(values, self.rows, self.columns, v)
        window, width = self.windows[layer], v.shape[-1]
        out, lse = self._own(q, keys, values, window, scale)
        own = out[..., :width], lse
        parts = []
        for readers in self.readers:
            prefix_keys, prefix_values = readers.prefix.states[layer]
            out, lse = self._prefix(q.index_select(0, readers.rows), prefix_keys, prefix_values, readers, scale)
            parts.append((out, lse, readers.rows))
        out = kernels.merge(own, parts) if parts else own[0]
        return out[..., :width].unsqueeze(0)

    def _own(
        self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, window: int | None, scale: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each row's query over its row's keys: output [R, H, width] and log-sum-exp [R, H]."""
        import torch

        count = q.shape[0]
        if self.kernel == "flash":
            heads = keys.shape[-2]
            return kernels.flash_varlen(
                q,
                keys.view(-1, heads, keys.shape[-1]),
                values.view(-1, heads, values.shape[-1]),
                cast("torch.Tensor", self.cu_q),  # set by `PackedSteps.step` for FlashAttention
                cast("torch.Tensor", self.cu_k),
                1,
                self.cache.columns,
                (-1, 0) if window is None else (window - 1, 0),
                scale,
                seqused_k=self.used,
            )
        visible = self.visible[window]
        longest = visible.shape[-1]
        row_keys = keys[:count, :, :longest]
        row_values = kernels._as_wide_as(values[:count, :, :longest], row_keys)
        mask = torch.zeros(visible.shape, dtype=q.dtype, device=q.device).masked_fill(~visible, float("-inf"))
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q[:, :, None], row_keys, row_values, 0.0, False, attn_mask=mask, scale=scale
        )
        return out[:, :, 0], lse[:, :, 0]

    def _prefix(
        self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, readers: PrefixReaders, scale: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries [n, H, D] over a prefix's keys and values, all seen (no window reaches past it)."""
        if self.kernel == "flash":
            return kernels.flash_varlen(  # FlashAttention's bounds, set by `PackedSteps.step`
                q,
                keys,
                values,
                cast("torch.Tensor", readers.cu_q),
                cast("torch.Tensor", readers.cu_k),
                q.shape[0],
                keys.shape[0],
                (-1, -1),
                scale,
            )
        host = kernels.cpu_varlen if self.kernel == "cpu" else kernels.reference_varlen
        return host(q, keys, values, [0, q.shape[0]], [0, keys.shape[0]], (-1, -1), scale)


@dataclass
class PackedSteps:
    """Admission and steps of a continuous batch through packed prefill and row-wise decode."""

    network: PreTrainedModel
    layout: AttentionLayout
    prefill_tokens: int  # new tokens a prefill pass takes at most
    min_shared: int = 32
    kept_prefixes: int = 4
    prefix_sharing: bool = True
    encoded: Callable[[int], None] = lambda tokens: None  # told the prompt tokens each pass computes
    on_pass: Callable[[], None] = lambda: None
    cache_tokens: int | None = None  # the rows' budget of cached tokens (None: the device's, see `room`)
    max_rows: int | None = None  # at most this many rows, after running out of memory
    cache: RowCache | None = None
    prefixes: OrderedDict[tuple[int, ...], SharedPrefix] = field(default_factory=OrderedDict)  # least recent first

    @property
    def kernel(self) -> str:
        return kernels.kernel_name(self.network)

    def reset(self) -> None:
        self.cache = None
        for prefix in self.prefixes.values():
            prefix.readers = 0

    def room(self, active: int, batch_size: int, columns: int) -> int:
        """How many more sequences of up to `columns` tokens fit, at least `batch_size` rows in all
        (at most `max_rows`): as many as `cache_tokens` hold, by default on a GPU as many as
        `CUDA_CACHE_SHARE` of its free memory holds, on the CPU as many as `CPU_CACHE_TOKENS`."""
        budget = CPU_CACHE_TOKENS if self.cache_tokens is None else self.cache_tokens
        if self.cache_tokens is None and self.network.device.type == "cuda":
            import torch

            free, _ = torch.cuda.mem_get_info(self.network.device)
            held = self.cache.rows * self.cache.columns if self.cache is not None else 0
            budget = int(free * CUDA_CACHE_SHARE / self._token_bytes()) + held
        rows = max(1, batch_size, budget // max(1, columns))
        return max(0, min(rows, self.max_rows or rows) - active)

    def shrink(self, rows: int) -> None:
        """After `rows` rows ran out of memory: at most half as many rows, prefill passes half as long."""
        self.max_rows = max(1, rows // 2)
        self.prefill_tokens = max(MIN_PREFILL_TOKENS, self.prefill_tokens // 2)

    def _token_bytes(self) -> int:
        config = self.network.config.get_text_config(decoder=True)
        heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
        width = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return 2 * config.num_hidden_layers * heads * width * self.network.dtype.itemsize

    # --- prefill ---------------------------------------------------------------------------------

    def admit(
        self, newcomers: Sequence[GeneratedSequence], waiting: Sequence[GeneratedSequence], columns: int
    ) -> torch.Tensor:
        """Prefill the newcomers' prompts into rows after the ones in use (the cache grown to
        `columns` and their number where needed); their first tokens' logits, in order."""
        import torch

        first_row = self.cache.used if self.cache is not None else 0
        rows = first_row + len(newcomers)
        if self.cache is None:
            self.cache = RowCache(rows, columns, self.kernel == "flash")
        elif rows > self.cache.rows or columns > self.cache.columns:
            self.cache = self.cache.grown(rows, columns)
        reads = self._shared_prefixes(newcomers, waiting)
        trie, given, ends = self._trie([s.tokens for s in newcomers], reads)
        reads = [prefix if prefix is None or id(prefix) in ends or prefix.states else None for prefix in reads]
        passes, slots, capacity = packed.plan_passes(trie.root, self.prefill_tokens, _split, pinned=given)
        for prefix in reads:
            if prefix is not None:
                prefix.readers += 1
                self.prefixes[prefix.tokens] = prefix
                self.prefixes.move_to_end(prefix.tokens)
        self.cache.lengths += [
            len(s.tokens) - (len(p.tokens) if p else 0) for s, p in zip(newcomers, reads, strict=True)
        ]
        self.cache.prefixes += reads
        firsts = cast("list[torch.Tensor]", [None] * len(newcomers))  # each set by the pass that ends its prompt
        stores: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        windows = sorted(set(self.layout.windows), key=lambda w: -1 if w is None else w)
        device = self.network.device
        with torch.inference_mode(), packed.packed_attention(self.network):
            for plan in passes:
                run, (ids, positions, scored, _, _) = packed.prepare(
                    plan, slots, self.layout, windows, self.kernel, stores, capacity, device, PrefillRun
                )
                run.preload = {slots[node]: states for node, states in given.items()}
                run.cache = self.cache
                asked = self._writes(run, plan, slots, first_row, ends)
                with packed.active(run), packed.scored_rows(self.network, scored):
                    logits = self.network(
                        input_ids=ids[None], position_ids=positions[None], use_cache=False, logits_to_keep=0
                    ).logits[0]
                self.on_pass()
                self.encoded(plan.tokens)
                for index, (_, request) in enumerate(asked):
                    firsts[request] = logits[index]
        self._forget()
        return torch.stack(firsts)

    def _shared_prefixes(
        self, newcomers: Sequence[GeneratedSequence], waiting: Sequence[GeneratedSequence]
    ) -> list[SharedPrefix | None]:
        """The prefix each newcomer reads in place: the longest kept one it starts with, else its
        first branching point with another prompt at `min_shared` tokens or more (a new prefix);
        none where a sliding window would not see the whole prefix from every position it reaches."""
        if not self.prefix_sharing:
            return [None] * len(newcomers)
        windows = [w for w in self.layout.windows if w is not None]
        others = [*newcomers, *waiting]
        reads: list[SharedPrefix | None] = []
        for sequence in newcomers:
            tokens = sequence.tokens
            if windows and len(tokens) + sequence.budget > min(windows):
                reads.append(None)
                continue
            kept = max(
                (
                    p
                    for p in self.prefixes.values()
                    if len(p.tokens) < len(tokens) and tuple(tokens[: len(p.tokens)]) == p.tokens
                ),
                key=lambda p: len(p.tokens),
                default=None,
            )
            if kept is not None:
                reads.append(kept)
                continue
            branches = [common_length(tokens, o.tokens) for o in others if o is not sequence]
            shared = min((b for b in branches if b >= self.min_shared), default=0)
            shared = min(shared, len(tokens) - 1)
            if shared < self.min_shared:
                reads.append(None)
                continue
            prefix = tuple(tokens[:shared])
            reads.append(next((p for p in reads if p is not None and p.tokens == prefix), SharedPrefix(prefix)))
        return reads

    def _trie(
        self, prompts: Sequence[list[int]], reads: Sequence[SharedPrefix | None]
    ) -> tuple[PrefixTrie, dict[int, LayerStates], dict[int, Node]]:
        """The prompts' trie (short shared runs folded), each prompt and each prefix read ending at the
        end of a node; the nodes of kept prefixes, as computed already (by id: their states per
        layer); and the last node of each new prefix (by the prefix's id), where its end is one."""
        trie = PrefixTrie(self.prefix_sharing)
        for prompt in prompts:
            trie.add([*prompt, 0], 1)
        _ends_at_node_ends(trie.root)
        distinct = {id(p): p for p in reads if p is not None}.values()
        for prefix in distinct:
            trie.add([*prefix.tokens, 0], 0)
        _fold_short(trie.root, self.min_shared)
        given: dict[int, LayerStates] = {}
        ends: dict[int, Node] = {}
        for prefix in distinct:
            node, position = trie.root, 0
            while position < len(prefix.tokens):
                # the child on the prefix's path: after folding, siblings may start with the same tokens
                node = next(c for c in node.children.values() if _on_path(c.tokens, prefix.tokens, position))
                end = position + len(node.tokens)
                if end > len(prefix.tokens):  # folded across its end
                    break
                if prefix.states:
                    given[id(node)] = [(k[position:end], v[position:end]) for k, v in prefix.states.values()]
                elif end == len(prefix.tokens):
                    ends[id(prefix)] = node
                position = end
        return trie, given, ends

    def _writes(
        self, run: PrefillRun, plan: packed.PassPlan, slots: dict[int, int], first_row: int, ends: dict[int, Node]
    ) -> list[tuple[int, int]]:
        """Where the pass's prompts' keys and values go in their rows (after each one's prefix) and
        which new prefixes it copies out of the store; which scored rows, in the pass's order, are
        whose first token: (pass token, prompt)."""
        import torch

        assert self.cache is not None
        offsets = {id(node): offset for node, offset in zip(plan.nodes, plan.offsets, strict=True)}
        device = self.network.device
        asked, store, own = [], ([], [], []), ([], [], [])
        for node, offset in zip(plan.nodes, plan.offsets, strict=True):
            for at, _, request in node.targets:
                asked.append((offset + at, request))
                row = first_row + request
                base = self.cache.base(row)
                for part in [*packed.ancestors(node)][::-1] + [node]:
                    first, end = max(part.start, base), part.start + len(part.tokens)
                    if first >= end:
                        continue
                    columns = range(first - base, end - base)
                    if id(part) in offsets and not part.children:  # this pass's own tokens
                        target, source = own, offsets[id(part)] + first - part.start
                    else:
                        target, source = store, slots[id(part)] + first - part.start
                    target[0].extend([row] * len(columns))
                    target[1].extend(columns)
                    target[2].extend(range(source, source + len(columns)))
        run.row_writes = tuple(
            tuple(torch.tensor(values, dtype=torch.long, device=device) for values in part) for part in (store, own)
        )
        here = {id(node) for node in plan.nodes}
        prefix_writes = []
        for prefix in {id(p): p for p in self.cache.prefixes[first_row:] if p is not None}.values():
            node = ends.get(id(prefix))
            if node is not None and id(node) in here:
                chain = [*packed.ancestors(node)][::-1] + [node]
                prefix_slots = [s for part in chain for s in range(slots[id(part)], slots[id(part)] + len(part.tokens))]
                prefix_writes.append((prefix, torch.tensor(prefix_slots, dtype=torch.long, device=device)))
        run.prefix_writes = prefix_writes
        return sorted(asked)

    def _forget(self) -> None:
        """Drop the least recent prefixes no row reads, past `kept_prefixes`."""
        idle = [tokens for tokens, prefix in self.prefixes.items() if not prefix.readers]
        for tokens in idle[: max(0, len(self.prefixes) - self.kept_prefixes)]:
            del self.prefixes[tokens]

    # --- decode ----------------------------------------------------------------------------------

    def step(self, tokens: Sequence[int]) -> torch.Tensor:
        """One pass for each row in use, given each row's last token; the next tokens' logits."""
        import torch

        assert self.cache is not None
        cache, device, kernel = self.cache, self.network.device, self.kernel
        count = len(tokens)
        readers: dict[int, tuple[SharedPrefix, list[int]]] = {}
        for row, prefix in enumerate(cache.prefixes[:count]):
            if prefix is not None:
                readers.setdefault(id(prefix), (prefix, []))[1].append(row)
        lengths = cache.lengths[:count]
        parts = [list(tokens), lengths, [cache.base(row) for row in range(count)], list(range(count))]
        parts += [rows for _, rows in readers.values()]
        flash = kernel == "flash"
        if flash:  # the calls' cumulative lengths: over the rows, and over each prefix
            parts += [list(range(count + 1)), [row * cache.columns for row in range(count + 1)]]
            parts += [[length + 1 for length in lengths]]
            parts += [bound for prefix, rows in readers.values() for bound in ([0, len(rows)], [0, len(prefix.tokens)])]
        ids, lengths_t, bases, row_ids, *rest = packed.to_device(parts, device)
        prefix_rows, rest = rest[: len(readers)], rest[len(readers) :]
        run = DecodeRun(
            cache,
            self.layout.windows,
            kernel,
            row_ids,
            lengths_t,
            [PrefixReaders(prefix, rows_t) for (prefix, _), rows_t in zip(readers.values(), prefix_rows, strict=True)],
        )
        if flash:
            run.cu_q, run.cu_k, run.used, *bounds = (tensor.int() for tensor in rest)
            for index, reader in enumerate(run.readers):
                reader.cu_q, reader.cu_k = bounds[2 * index], bounds[2 * index + 1]
        else:
            column = torch.arange(max(lengths) + 1, device=device)[None]
            for window in set(self.layout.windows):
                seen = column <= lengths_t[:, None]
                if window is not None:
                    seen &= column > lengths_t[:, None] - window
                run.visible[window] = seen[:, None, None]
        ids = ids[None]
        with torch.inference_mode(), packed.packed_attention(self.network), packed.active(run):
            logits = self.network(
                input_ids=ids, position_ids=(bases + lengths_t)[None], use_cache=False, logits_to_keep=0
            ).logits
        self.on_pass()
        for row in range(count):
            cache.lengths[row] += 1
        return logits[0]

    def free(self, row: int) -> int | None:
        """Give up a row: the last row in use moves into it. Returns the row that moved, None where
        the freed row was the last."""
        assert self.cache is not None
        prefix = self.cache.prefixes[row]
        if prefix is not None:
            prefix.readers -= 1
        last = self.cache.used - 1
        if row != last:
            self.cache.move(last, row)
        self.cache.lengths.pop()
        self.cache.prefixes.pop()
        return last if row != last else None


def _on_path(tokens: Sequence[int], path: Sequence[int], position: int) -> bool:
    """Whether a node's tokens continue `path` from `position` (up to the path's end)."""
    shown = min(len(tokens), len(path) - position)
    return tuple(tokens[:shown]) == tuple(path[position : position + shown])


def _ends_at_node_ends(root: Node) -> None:
    """Split nodes so that every target (a prompt's last token) is its node's last token."""
    for node in list(packed.depth_first(root)):
        while True:
            inside = [offset for offset, _, _ in node.targets if offset < len(node.tokens) - 1]
            if not inside:
                break
            _split(node, min(inside) + 1)
            node = next(iter(node.children.values()))
