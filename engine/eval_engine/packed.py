"""Log-likelihood passes packed from the prefix trie: no padding, no copies of a row's past.

The trie's nodes (prefix_cache.py) are taken in depth-first order and cut into passes by a budget of
new tokens: a pass is one sequence, the nodes' tokens side by side, each at its own positions. A
node's keys and values stay where the layer computed them, and a node that has children is also
written once into a per-layer store of key/value slots, where its descendants' queries read it (in
the same pass or a later one) until its last descendant is done. So attention in a pass is, for
each node, causal over its own tokens and full over each ancestor's slots: variable-length
attention calls, with the model's grouped-query heads as they are and each layer's sliding window,
whose parts are merged by their log-sum-exps (the partial softmaxes FlashAttention itself merges).
No 4-D mask is built, no key is repeated for a query head, the host builds each pass's indices in
one tensor copied once, and results stay on the device until the call ends.

The kernel is FlashAttention's inside torch on a CUDA GPU in 16-bit floats, torch's flash kernel on
the CPU, else the definition in plain torch (kernels.py). The path is taken where the model's
attention layers go through transformers' attention interface with nothing the kernel cannot
express, and the kernel has passed its check on the model's device and dtype (`packed_path`);
other models keep the padded rows of prefix_cache.py.

A sliding-window layer sees an ancestor's keys within each query's window: for a node at positions
[a, a+L) and a window of w, the keys at a+L-w+1 and after are seen by all of its queries, and the
w-1 keys before them by query i from the i-th on: the kernel's window (0, -1), aligned at the
bottom right, whatever the node.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from eval_engine.attention import AttentionLayout
from eval_engine.kernels import (
    KERNELS,
    cpu_varlen,
    flash_varlen,
    kernel_check,
    kernel_name,
    merge,
    reference_varlen,
)

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel

    from eval_engine.prefix_cache import LayerStates, Node

ATTENTION_NAME = "eval_platform_packed"  # the attention implementation registered with transformers
# scored positions whose log-probabilities are computed at once (a float32 row of each's vocabulary)
LOGIT_ROWS = 1024


class AttentionRun(Protocol):
    """A pass in progress, whose `attend` computes each layer's attention (`PassRun`, decoding's `DecodeRun`)."""

    def attend(
        self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float
    ) -> torch.Tensor: ...


class AttentionModule(Protocol):
    """A transformers attention layer, as its attention interface hands it over."""

    layer_idx: int


class DecoderOutput(Protocol):
    """A decoder's output as a forward hook sees it (transformers' `BaseModelOutputWithPast` and its kin)."""

    last_hidden_state: torch.Tensor


_ACTIVE: contextvars.ContextVar[AttentionRun | None] = contextvars.ContextVar(
    "packed_pass", default=None
)  # a pass's run
Run = TypeVar("Run", bound="PassRun")


def packed_path(network: PreTrainedModel, layout: AttentionLayout) -> str | None:
    """Why the model's log-likelihoods cannot take packed passes, or None where they can."""
    config = network.config.get_text_config(decoder=True)
    if not layout.shares_prefixes:
        return "every sequence runs whole"
    if not getattr(network, "_supports_attention_backend", False):
        return f"{type(network).__name__} does not take transformers' attention interface"
    if getattr(config, "attn_logit_softcapping", None) is not None:
        return "soft-capped attention logits"
    return kernel_check(kernel_name(network), str(network.device), str(network.dtype).removeprefix("torch."))


def describe_passes(network: PreTrainedModel, layout: AttentionLayout, packed: bool = True) -> dict[str, str]:
    """The passes this model takes, for the run's record: log-likelihoods' and generation's."""
    reason = packed_path(network, layout) if packed else "packed passes turned off"
    if reason is None:
        kernel = KERNELS[kernel_name(network)]
        return {
            "loglikelihood_passes": f"packed ({kernel})",
            "generation": f"packed prefill, each row decoded at its own length ({kernel})",
        }
    return {"loglikelihood_passes": f"padded rows with masks: {reason}", "generation": f"padded rows: {reason}"}


# --- the plan ------------------------------------------------------------------------------------


@dataclass
class PassPlan:
    """One packed pass: its nodes in depth-first order, and each one's first token in the pass."""

    nodes: list[Node] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(len(node.tokens) for node in self.nodes)


def depth_first(root: Node) -> Iterator[Node]:
    """The trie's nodes below the root, parents before children, each subtree contiguous."""
    stack = list(reversed(root.children.values()))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children.values()))


def ancestors(node: Node) -> Iterator[Node]:
    """A node's ancestors below the root, nearest first."""
    ancestor = node.parent
    while ancestor is not None and ancestor.parent is not None:
        yield ancestor
        ancestor = ancestor.parent


def plan_passes(
    root: Node, budget: int, split: Callable[[Node, int], None], pinned: Mapping[int, LayerStates] = {}
) -> tuple[list[PassPlan], dict[int, int], int]:
    """The trie cut into passes of at most `budget` new tokens (a longer node is first split by
    `split(node, at)`); the first store slot of each node with children (by id), which holds it
    from its pass to the pass of its last descendant, placed first-fit; and the store's size. The
    `pinned` nodes (by id) are computed already: in no pass, they hold the first slots throughout."""
    slots: dict[int, int] = {}
    capacity = 0
    for node in depth_first(root):
        if id(node) in pinned:
            slots[id(node)], capacity = capacity, capacity + len(node.tokens)
    for node in list(depth_first(root)):
        while len(node.tokens) > budget and id(node) not in pinned:
            split(node, budget)
            node = next(iter(node.children.values()))
    passes: list[PassPlan] = []
    pass_of: dict[int, int] = {}
    order: list[Node] = []
    filled = budget
    for node in depth_first(root):
        if id(node) in pinned:
            continue
        if filled + len(node.tokens) > budget:
            passes.append(PassPlan())
            filled = 0
        passes[-1].nodes.append(node)
        passes[-1].offsets.append(filled)
        pass_of[id(node)] = len(passes) - 1
        order.append(node)
        filled += len(node.tokens)
    last: dict[int, int] = {}  # id(node) -> the pass of the last node of its subtree
    for node in reversed(order):
        last[id(node)] = max([pass_of[id(node)], *(last[id(child)] for child in node.children.values())])
    free: list[tuple[int, int]] = []  # (first, length), in order
    releases: dict[int, list[tuple[int, int]]] = {}
    for index, plan in enumerate(passes):
        for span in releases.pop(index - 1, []):
            free = _released(free, span)
        for node in plan.nodes:
            if node.children:
                first, capacity = _allocate(free, len(node.tokens), capacity)
                slots[id(node)] = first
                releases.setdefault(last[id(node)], []).append((first, len(node.tokens)))
    return passes, slots, capacity


def _allocate(free: list[tuple[int, int]], length: int, capacity: int) -> tuple[int, int]:
    """The first slot of the first free range that holds `length` (taken out of `free`), else of
    new slots at the end (joining a free range that ends there); and the capacity after."""
    for index, (first, size) in enumerate(free):
        if size >= length:
            if size == length:
                free.pop(index)
            else:
                free[index] = (first + length, size - length)
            return first, capacity
    if free and sum(free[-1]) == capacity:
        first, _ = free.pop()
        return first, first + length
    return capacity, capacity + length


def _released(free: list[tuple[int, int]], span: tuple[int, int]) -> list[tuple[int, int]]:
    """The free ranges with `span` added, in order, neighbours joined."""
    joined: list[tuple[int, int]] = []
    for first, size in sorted([*free, span]):
        if joined and sum(joined[-1]) == first:
            joined[-1] = (joined[-1][0], joined[-1][1] + size)
        else:
            joined.append((first, size))
    return joined


@dataclass
class Jobs:
    """The sequences of one variable-length attention call: each, queries (pass tokens) over keys
    (store slots), with their cumulative lengths as the kernel takes them."""

    queries: list[int] = field(default_factory=list)
    keys: list[int] = field(default_factory=list)
    cu_q: list[int] = field(default_factory=lambda: [0])
    cu_k: list[int] = field(default_factory=lambda: [0])
    max_q: int = 0
    max_k: int = 0

    def add(self, queries: range, keys: range) -> None:
        if len(queries) and len(keys):
            self.queries += queries
            self.keys += keys
            self.cu_q.append(self.cu_q[-1] + len(queries))
            self.cu_k.append(self.cu_k[-1] + len(keys))
            self.max_q, self.max_k = max(self.max_q, len(queries)), max(self.max_k, len(keys))


def past_jobs(plan: PassPlan, slots: dict[int, int], window: int | None) -> tuple[Jobs, Jobs]:
    """The pass's attention to its nodes' ancestors in the store: the keys each job's queries all
    see, and (within a window) the keys query i sees from the i-th on. Without a window, an
    ancestor's job takes all its descendants in the pass at once (contiguous, depth-first)."""
    everyone, staggered = Jobs(), Jobs()
    if window is None:
        runs: dict[int, tuple[Node, int, int]] = {}  # id(ancestor) -> (ancestor, first token, end)
        for node, offset in zip(plan.nodes, plan.offsets, strict=True):
            for ancestor in ancestors(node):
                first = runs[id(ancestor)][1] if id(ancestor) in runs else offset
                runs[id(ancestor)] = (ancestor, first, offset + len(node.tokens))
        for ancestor, first, end in runs.values():
            slot = slots[id(ancestor)]
            everyone.add(range(first, end), range(slot, slot + len(ancestor.tokens)))
        return everyone, staggered
    for node, offset in zip(plan.nodes, plan.offsets, strict=True):
        a, length = node.start, len(node.tokens)
        for ancestor in ancestors(node):
            start, end = ancestor.start, ancestor.start + len(ancestor.tokens)
            slot = slots[id(ancestor)] - start  # + a position: its slot
            shared = max(start, a + length - window + 1)
            everyone.add(range(offset, offset + length), range(slot + shared, slot + end))
            # query i sees the keys from first + i - (first - (a - window + 1)) on: the kernel's window
            # (0, -1) over the queries that see any (as many as keys, plus that offset)
            first, last = max(start, a - window + 1), min(end, shared)
            staggered.add(range(offset, offset + last - a + window - 1), range(slot + first, slot + last))
    return everyone, staggered


# --- passes ----------------------------------------------------------------------------------------


@dataclass
class Call:
    """A variable-length call's indices: on the host (the reference kernel's) and the device."""

    jobs: Jobs
    rows: torch.Tensor | None = None  # pass tokens of the queries, on the device
    slots: torch.Tensor | None = None  # store slots of the keys
    cu_q: torch.Tensor | None = None
    cu_k: torch.Tensor | None = None


@dataclass
class PassRun:
    """One pass in progress: its indices and the store, which `packed_attention` reads at each
    layer."""

    windows: Sequence[int | None]  # per layer
    kernel: str  # see kernel_name
    stores: dict[int, tuple[torch.Tensor, torch.Tensor]]  # layer -> (keys, values) [capacity, KVH, D]
    capacity: int
    own: Call  # each node over its own tokens
    past: dict[int | None, tuple[Call, Call]]  # by window: to ancestors, all seen and staggered
    write_rows: torch.Tensor | None = None  # the tokens of nodes with children, and their slots
    write_slots: torch.Tensor | None = None
    preload: Mapping[int, LayerStates] = field(default_factory=dict)  # first slot -> per layer states

    def attend(
        self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float
    ) -> torch.Tensor:
        """One layer's attention: query [1, H, T, D], key and value [1, KVH, T, D] as the layer
        computed them; returns [1, T, H, Dv]."""
        q, k, v = query[0].transpose(0, 1), key[0].transpose(0, 1), value[0].transpose(0, 1)
        window = self.windows[layer]
        if layer not in self.stores:
            self.stores[layer] = (
                k.new_empty((self.capacity, *k.shape[1:])),
                v.new_empty((self.capacity, *v.shape[1:])),
            )
            for first, states in self.preload.items():  # nodes computed before this plan
                for buffer, state in zip(self.stores[layer], states[layer], strict=True):
                    buffer[first : first + len(state)] = state
        keys, values = self.stores[layer]
        if self.write_rows is not None:  # and so write_slots
            keys.index_copy_(0, cast("torch.Tensor", self.write_slots), k.index_select(0, self.write_rows))
            values.index_copy_(0, cast("torch.Tensor", self.write_slots), v.index_select(0, self.write_rows))
        own = self._kernel(self.own, q, k, v, (-1, 0) if window is None else (window - 1, 0), scale)
        parts = []
        for call, kernel_window in zip(self.past[window], ((-1, -1), (0, -1)), strict=True):
            if call.jobs.queries:  # a call with queries has its indices (see `prepare`)
                q_rows = q.index_select(0, cast("torch.Tensor", call.rows))
                k_rows, v_rows = (
                    keys.index_select(0, cast("torch.Tensor", call.slots)),
                    values.index_select(0, cast("torch.Tensor", call.slots)),
                )
                parts.append((*self._kernel(call, q_rows, k_rows, v_rows, kernel_window, scale), call.rows))
        return merge(own, parts).unsqueeze(0)

    def _kernel(
        self, call: Call, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: tuple[int, int], scale: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        jobs = call.jobs
        if self.kernel == "flash":
            # a call the kernel runs has its cumulative lengths on the device (see `prepare`)
            return flash_varlen(
                q,
                k,
                v,
                cast("torch.Tensor", call.cu_q),
                cast("torch.Tensor", call.cu_k),
                jobs.max_q,
                jobs.max_k,
                window,
                scale,
            )
        host = cpu_varlen if self.kernel == "cpu" else reference_varlen
        return host(q, k, v, jobs.cu_q, jobs.cu_k, window, scale)


def packed_attention_forward(
    module: AttentionModule,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    **kwargs: object,
) -> tuple[torch.Tensor, None]:
    """transformers' attention interface over the pass in progress."""
    run = _ACTIVE.get()
    if run is None:
        raise RuntimeError(f"the {ATTENTION_NAME} attention runs inside a packed pass only")
    for unsupported in ("softcap", "s_aux"):
        if kwargs.get(unsupported) is not None:
            raise RuntimeError(f"{type(module).__name__} passes {unsupported}, which packed passes do not compute")
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    return run.attend(module.layer_idx, query, key, value, scale), None


@functools.cache
def _registered() -> str:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION_NAME, packed_attention_forward)
    return ATTENTION_NAME


@contextmanager
def active(run: AttentionRun) -> Iterator[None]:
    """While in use, `packed_attention_forward` computes `run`'s attention (a pass's `attend`)."""
    token = _ACTIVE.set(run)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


@contextmanager
def packed_attention(network: PreTrainedModel) -> Iterator[None]:
    """While in use, the network's layers attend through `packed_attention_forward` (no mask is
    built for an implementation transformers' mask interface does not know)."""
    config = network.config
    before = config._attn_implementation
    config._attn_implementation = _registered()
    try:
        yield
    finally:
        config._attn_implementation = before


@contextmanager
def scored_rows(network: PreTrainedModel, rows: torch.Tensor) -> Iterator[None]:
    """While in use, the decoder hands on the hidden states of the pass's scored tokens alone
    (`rows`, on the device), so the model's own output layer computes their logits alone."""

    def scored(
        module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object], output: DecoderOutput
    ) -> DecoderOutput:
        output.last_hidden_state = output.last_hidden_state[0].index_select(0, rows).unsqueeze(0)
        return output

    hook = network.get_decoder().register_forward_hook(scored, with_kwargs=True)
    try:
        yield
    finally:
        hook.remove()


def score_packed(
    root: Node,
    requests: int,
    network: PreTrainedModel,
    layout: AttentionLayout,
    budget: int,
    split: Callable[[Node, int], None],
    on_pass: Callable[[], None] = lambda: None,
    greedy: list[bool] | None = None,
) -> list[float]:
    """The summed log-probabilities of every request's scored tokens (the trie's targets), in packed
    passes of at most `budget` new tokens; where `greedy` is given, an entry turns False when a
    scored token is not the most probable one. Read from the device once, at the end."""
    import torch

    device = network.device
    passes, slots, capacity = plan_passes(root, budget, split)
    kernel = kernel_name(network)
    totals = torch.zeros(requests, dtype=torch.float64, device=device)
    missed = torch.zeros(requests, dtype=torch.bool, device=device)
    stores: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    windows = sorted(set(layout.windows), key=lambda w: -1 if w is None else w)
    with torch.inference_mode(), packed_attention(network):
        for plan in passes:
            run, inputs = prepare(plan, slots, layout, windows, kernel, stores, capacity, device)
            ids, positions, scored, targets, owners = inputs
            with active(run), scored_rows(network, scored):
                logits = network(
                    input_ids=ids[None], position_ids=positions[None], use_cache=False, logits_to_keep=0
                ).logits[0]
            on_pass()
            for first in range(0, logits.shape[0], LOGIT_ROWS):
                # log_softmax in float32 (or wider), as the harness's model takes it on float32 weights
                wide = torch.promote_types(logits.dtype, torch.float32)
                chunk = torch.log_softmax(logits[first : first + LOGIT_ROWS].to(wide), dim=-1)
                wanted, owner = targets[first : first + LOGIT_ROWS], owners[first : first + LOGIT_ROWS]
                totals.index_add_(0, owner, chunk.gather(1, wanted[:, None])[:, 0].double())
                if greedy is not None:
                    missed.index_put_((owner,), chunk.argmax(dim=-1) != wanted, accumulate=True)
    if greedy is not None:
        for index, was_missed in enumerate(missed.tolist()):
            greedy[index] = greedy[index] and not was_missed
    return totals.tolist()


def to_device(parts: Sequence[Sequence[int]], device: torch.device) -> list[torch.Tensor]:
    """Lists of host integers as tensors (int64) on the device, in one copy, which on a GPU is
    asynchronous (from pinned memory): the host goes on while the GPU works."""
    import torch

    flat = torch.tensor([value for part in parts for value in part], dtype=torch.long)
    if device.type == "cuda":
        flat = flat.pin_memory()
    flat = flat.to(device, non_blocking=True)
    pieces, first = [], 0
    for part in parts:
        pieces.append(flat[first : first + len(part)])
        first += len(part)
    return pieces


def prepare(
    plan: PassPlan,
    slots: dict[int, int],
    layout: AttentionLayout,
    windows: Sequence[int | None],
    kernel: str,
    stores: dict[int, tuple[torch.Tensor, torch.Tensor]],
    capacity: int,
    device: torch.device,
    kind: type[Run] = PassRun,
) -> tuple[Run, tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]:
    """A pass's run and its inputs (ids, positions, scored tokens, their targets and requests): every
    index built on the host and copied to the device in one tensor."""

    ids, positions, scored, targets, owners, write_rows, write_slots = [], [], [], [], [], [], []
    own = Jobs()
    for node, offset in zip(plan.nodes, plan.offsets, strict=True):
        length = len(node.tokens)
        ids += node.tokens
        positions += range(node.start, node.start + length)
        own.add(range(offset, offset + length), range(offset, offset + length))
        for at, token, request in node.targets:
            scored.append(offset + at)
            targets.append(token)
            owners.append(request)
        if node.children:
            write_rows += range(offset, offset + length)
            write_slots += range(slots[id(node)], slots[id(node)] + length)
    past = {window: past_jobs(plan, slots, window) for window in windows}
    parts: list[list[int]] = [ids, positions, scored, targets, owners, write_rows, write_slots, own.cu_q]
    for everyone, staggered in past.values():
        parts += [everyone.queries, everyone.keys, everyone.cu_q, everyone.cu_k]
        parts += [staggered.queries, staggered.keys, staggered.cu_q, staggered.cu_k]
    pieces = to_device(parts, device)
    ids_t, positions_t, scored_t, targets_t, owners_t, rows_t, slots_t, own_cu = pieces[:8]

    def call(jobs: Jobs, tensors: list[torch.Tensor]) -> Call:
        rows, keys, cu_q, cu_k = tensors
        return Call(jobs, rows, keys, cu_q.int(), cu_k.int()) if jobs.queries else Call(jobs)

    past_calls, rest = {}, pieces[8:]
    for window, (everyone, staggered) in past.items():
        past_calls[window] = (call(everyone, rest[:4]), call(staggered, rest[4:8]))
        rest = rest[8:]
    own_call = Call(own, None, None, own_cu.int(), own_cu.int())
    run = kind(
        layout.windows,
        kernel,
        stores,
        max(capacity, 1),
        own_call,
        past_calls,
        rows_t if write_rows else None,
        slots_t if write_rows else None,
    )
    return run, (ids_t, positions_t, scored_t, targets_t, owners_t)
