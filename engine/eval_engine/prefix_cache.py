"""Log-likelihoods with a shared-prefix cache: every distinct token prefix is encoded once.

The requests' token sequences go into a radix trie. A node holds a run of tokens shared by every
request below it: a few-shot header shared by all questions of an MMLU subject, a context shared
by its answer choices, a sentence start shared by Winogrande's two options. A shared run shorter
than `min_shared` tokens is not worth a cache entry and is folded into the nodes below it.

Nodes are encoded in batches, parents before children. Nodes that start a sequence run as the
harness runs its requests: right-padded, causal, no mask (the fast attention kernel). A node
below them gathers its ancestors' key/value segments as its past, left-padded to the batch's
longest, and runs only its own tokens, under each layer's mask (attention.py: a sliding-window
layer sees only its window of the past, counted in positions). A node keeps its segment, every
layer's whole, while nodes below it still need it; nodes are taken deepest first, so the cache
holds about one batch of contexts at a time. A model whose attention cannot be shared this way
(`AttentionLayout.unshared`) gets a trie of whole sequences (`PrefixTrie(shared=False)`).

Only the positions that predict a scored token go through the output layer: the model's own, its
logit soft-capping or scaling included (`_scored_only`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from eval_engine.attention import AttentionLayout

if TYPE_CHECKING:
    from typing import TypeAlias

    import torch
    from transformers import PreTrainedModel

    from eval_engine.packed import DecoderOutput

    # per layer, the keys and values of a run of tokens (each user's layout: here [KVH, tokens, width] a segment)
    LayerStates: TypeAlias = Sequence[tuple[torch.Tensor, torch.Tensor]]


@dataclass(eq=False)
class Node:
    tokens: list[int]
    start: int  # the global position of tokens[0]
    parent: Node | None
    children: dict[int, Node] = field(default_factory=dict)  # by first token while the trie is built
    # (offset in tokens, the token that follows, request index): log-probabilities to collect
    targets: list[tuple[int, int, int]] = field(default_factory=list)
    remaining: int = 0  # children not yet done
    segment: LayerStates | None = None  # per layer (keys, values) of this node's tokens, while nodes below need it


class PrefixTrie:
    """The token sequences of a batch of requests, with shared prefixes merged (where `shared`;
    else each sequence whole, from its first token)."""

    def __init__(self, shared: bool = True) -> None:
        self.root = Node([], 0, None)
        self.requests = 0
        self.shared = shared

    def add(self, tokens: Sequence[int], scored: int) -> int:
        """Add a sequence whose last `scored` tokens are scored; returns its index."""
        index = self.requests
        self.requests += 1
        inputs = list(tokens[:-1])  # the last token is predicted, never fed
        first = len(tokens) - scored - 1  # the position predicting the first scored token
        node, position = self.root, 0
        placed: list[tuple[Node, int]] = []  # (node, offset) of every input position
        if not self.shared:  # a child of the root of its own, keyed by no token
            whole = self.root.children[-1 - index] = Node(inputs, 0, self.root)
            placed, position = [(whole, offset) for offset in range(len(inputs))], len(inputs)
        while position < len(inputs):  # shared: down the trie, splitting a node where the sequence parts
            child = node.children.get(inputs[position])
            if child is None:
                child = Node(inputs[position:], position, node)
                node.children[inputs[position]] = child
            shared = common_length(child.tokens, inputs[position:])
            if shared < len(child.tokens):
                _split(child, shared)
            placed += [(child, offset) for offset in range(shared)]
            node, position = child, position + shared
        for predictor in range(first, len(inputs)):
            owner, offset = placed[predictor]
            owner.targets.append((offset, tokens[predictor + 1], index))
        return index


def common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two sequences share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _split(node: Node, at: int) -> None:
    """Cut a node after `at` tokens: the rest becomes its only child."""
    rest = Node(node.tokens[at:], node.start + at, node, node.children)
    for child in rest.children.values():
        child.parent = rest
    rest.targets = [(offset - at, token, request) for offset, token, request in node.targets if offset >= at]
    node.targets = [target for target in node.targets if target[0] < at]
    node.tokens = node.tokens[:at]
    node.children = {rest.tokens[0]: rest}


def _fold_short(node: Node, min_shared: int) -> None:
    """Fold shared runs shorter than `min_shared` tokens (that score nothing) into the nodes below
    them, so that the nodes below start where they did."""
    kept, pending = [], list(node.children.values())
    while pending:
        child = pending.pop()
        if child.children and len(child.tokens) < min_shared and not child.targets:
            for grandchild in child.children.values():
                grandchild.tokens = child.tokens + grandchild.tokens
                grandchild.targets = [
                    (offset + len(child.tokens), token, request) for offset, token, request in grandchild.targets
                ]
                grandchild.start, grandchild.parent = child.start, node
                pending.append(grandchild)
        else:
            kept.append(child)
    node.children = {id(child): child for child in kept}  # keys no longer needed once the trie is built
    for child in kept:
        _fold_short(child, min_shared)


@dataclass
class Unit:
    """One row of a pass: one node (`nodes` of one), or leaf siblings packed side by side, each
    attending to their shared past and to its own earlier tokens only."""

    nodes: list[Node]

    @property
    def start(self) -> int:
        return self.nodes[0].start

    @property
    def length(self) -> int:
        return sum(len(node.tokens) for node in self.nodes)


def _units(nodes: Iterable[Node], pack_limit: int) -> list[Unit]:
    """Siblings as rows: a node with children alone (its segment is kept), leaves packed up to
    `pack_limit` tokens a row; longest first."""
    units, row = [], []
    for node in sorted(nodes, key=lambda n: -len(n.tokens)):
        if node.children or node.start == 0:
            units.append(Unit([node]))
        elif row and sum(len(n.tokens) for n in row) + len(node.tokens) > pack_limit:
            units.append(Unit(row))
            row = [node]
        else:
            row.append(node)
    return units + ([Unit(row)] if row else [])


def score(
    trie: PrefixTrie,
    network: PreTrainedModel,
    batch_size: int,
    max_batch_tokens: int,
    pad_id: int,
    min_shared: int = 32,
    pack_limit: int = 256,
    on_pass: Callable[[], None] = lambda: None,
    greedy: list[bool] | None = None,
    packed: bool = True,
) -> list[float]:
    """The summed log-probabilities of every request's scored tokens; where `greedy` is a list of
    one True per request, an entry turns False when a scored token is not the most probable one
    (the harness's `is_greedy`). Where `packed` and the model can take them, in packed passes of
    at most `max_batch_tokens` new tokens (packed.py); else in batches of `batch_size` rows, padded,
    of at most `max_batch_tokens` tokens with their past."""
    import torch

    from eval_engine.packed import packed_path, score_packed

    _fold_short(trie.root, min_shared)
    layout = AttentionLayout.of(network.config)
    if packed and packed_path(network, layout) is None:
        return score_packed(trie.root, trie.requests, network, layout, max_batch_tokens, _split, on_pass, greedy)
    totals = [0.0] * trie.requests
    ready = _units(trie.root.children.values(), pack_limit)
    while ready:
        batch = _take_batch(ready, batch_size, max_batch_tokens)
        rows, positions, tokens, owners = [], [], [], []
        for row, unit in enumerate(batch):
            begin = 0
            for node in unit.nodes:
                for offset, token, request in node.targets:
                    rows.append(row)
                    positions.append(begin + offset)
                    tokens.append(token)
                    owners.append(request)
                begin += len(node.tokens)
        with torch.inference_mode(), _scored_only(network, rows, positions):
            logits, segments = _encode(network, layout, batch, pad_id)
            on_pass()
            if rows:
                log_probabilities = torch.log_softmax(logits.float(), dim=-1)
                picked = log_probabilities[torch.arange(len(rows)), torch.tensor(tokens)].cpu()
                for request, value in zip(owners, picked.tolist(), strict=False):
                    totals[request] += value
                if greedy is not None:
                    best = log_probabilities.argmax(dim=-1).cpu().tolist()
                    for request, token, top in zip(owners, tokens, best, strict=False):
                        greedy[request] = greedy[request] and token == top
        for unit, segment in zip(batch, segments, strict=False):
            node = unit.nodes[0]
            if node.children:
                below = _units(node.children.values(), pack_limit)
                node.segment, node.remaining = segment, len(below)
                ready[:0] = below
            else:
                _done(unit)
    return totals


def _done(unit: Unit) -> None:
    """A unit is encoded: free the segments nothing below needs any more."""
    parent = unit.nodes[0].parent
    while parent is not None and parent.parent is not None:
        parent.remaining -= 1
        if parent.remaining:
            break
        parent.segment = None
        parent = parent.parent


def _take_batch(ready: list[Unit], batch_size: int, max_batch_tokens: int) -> list[Unit]:
    """The first ready unit and the next ones like it: starting a sequence too, or not, and of a
    length that at most doubles the padding."""
    batch = [ready.pop(0)]
    lead = batch[0].length
    index = 0
    while index < len(ready) and len(batch) < batch_size:
        candidate = ready[index]
        members = batch + [candidate]
        width = max(u.start for u in members) + max(u.length for u in members)
        if (
            (candidate.start == 0) == (batch[0].start == 0)
            and lead / 2 <= candidate.length <= lead * 2
            and width * len(members) <= max_batch_tokens
        ):
            batch.append(ready.pop(index))
        else:
            index += 1
    return batch


def _past(node: Node) -> list[LayerStates]:
    """The node's ancestors' segments, oldest first."""
    chain: list[LayerStates] = []
    ancestor = node.parent
    while ancestor is not None and ancestor.parent is not None:
        chain.append(cast("LayerStates", ancestor.segment))  # kept while nodes below it need it
        ancestor = ancestor.parent
    return chain[::-1]


@contextmanager
def _scored_only(network: PreTrainedModel, rows: list[int], positions: list[int]) -> Iterator[None]:
    """While in use, the network's decoder hands on the hidden states of the (row, position) pairs
    alone, [1, pairs, width] in their order: the model's own output layer, with whatever its
    forward does after it (Gemma's soft-capping, Cohere's and Granite's scaling), computes the
    logits of those pairs alone."""
    import torch

    pairs = torch.tensor(rows, dtype=torch.long), torch.tensor(positions, dtype=torch.long)

    def scored_hidden_states(
        module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object], output: DecoderOutput
    ) -> DecoderOutput:
        output.last_hidden_state = output.last_hidden_state[pairs].unsqueeze(0)
        return output

    hook = network.get_decoder().register_forward_hook(scored_hidden_states, with_kwargs=True)
    try:
        yield
    finally:
        hook.remove()


def _stacked_past(batch: list[Unit], past_width: int) -> list[tuple[torch.Tensor, ...]]:
    """Each layer's keys and values of the rows' cached pasts, stacked: each row's chain of segments,
    left-padded with zeros to `past_width` (keys' and values' widths may differ: MLA's latents)."""
    import torch

    chains = [_past(unit.nodes[0]) for unit in batch]
    sample = next(chain for chain in chains if chain)[0]  # any segment: its layers' shapes and dtype
    layers = []
    for layer, parts in enumerate(sample):
        stacked = []
        for part, like in enumerate(parts):
            per_row = []
            for unit, chain in zip(batch, chains, strict=False):
                padding = [like.new_zeros((like.shape[0], past_width - unit.start, like.shape[2]))]
                per_row.append(torch.cat(padding + [segment[layer][part] for segment in chain], dim=1))
            stacked.append(torch.stack(per_row))
        layers.append(tuple(stacked))
    return layers


def _packed_mask(batch: list[Unit], width: int, past_width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rows' boolean attention mask over the past and the packed nodes, their query positions
    and their keys' positions: each packed node sees the past and its own earlier tokens, padding
    only itself."""
    import torch

    mask = torch.zeros((len(batch), 1, width, past_width + width), dtype=torch.bool)
    positions = torch.zeros((len(batch), width), dtype=torch.long)
    key_positions = torch.zeros((len(batch), past_width + width), dtype=torch.long)
    for row, unit in enumerate(batch):
        mask[row, 0, :, past_width - unit.start : past_width] = True
        key_positions[row, past_width - unit.start : past_width] = torch.arange(unit.start)
        begin = 0
        for node in unit.nodes:
            end = begin + len(node.tokens)
            mask[row, 0, begin:end, past_width + begin : past_width + end] = torch.ones(
                end - begin, end - begin, dtype=torch.bool
            ).tril()
            positions[row, begin:end] = torch.arange(node.start, node.start + len(node.tokens))
            begin = end
        for pad in range(begin, width):  # padding attends to itself (no empty row)
            mask[row, 0, pad, past_width + pad] = True
    key_positions[:, past_width:] = positions
    return mask, positions, key_positions


def _encode(
    network: PreTrainedModel, layout: AttentionLayout, batch: list[Unit], pad_id: int
) -> tuple[torch.Tensor, list[LayerStates | None]]:
    """One pass over the batch's rows (under `_scored_only`); returns the logits of the scored
    positions and, for a row that is one node with children, that node's own key/value segment
    (every layer's whole: none cut to a window)."""
    import torch
    from transformers import DynamicCache

    past_width = max(unit.start for unit in batch)
    width = max(unit.length for unit in batch)
    device = network.device
    ids = torch.tensor(
        [[t for node in unit.nodes for t in node.tokens] + [pad_id] * (width - unit.length) for unit in batch],
        device=device,
    )
    keep = any(unit.nodes[0].children for unit in batch)
    if past_width == 0:  # whole sequences from their start: right padding never reaches a real token
        output = network(
            input_ids=ids,
            past_key_values=DynamicCache() if keep else None,
            use_cache=keep,
            logits_to_keep=0,
        )
    else:
        layers = _stacked_past(batch, past_width)
        mask, positions, key_positions = _packed_mask(batch, width, past_width)
        positions = positions.to(device)
        output = network(
            input_ids=ids,
            attention_mask=layout.masks(mask.to(device), positions, key_positions.to(device), network.dtype),
            position_ids=positions,
            past_key_values=DynamicCache(ddp_cache_data=layers),
            use_cache=True,
            logits_to_keep=0,
        )
    segments = []
    for row, unit in enumerate(batch):
        node = unit.nodes[0]
        own = slice(past_width, past_width + len(node.tokens))
        segments.append(
            [
                (layer.keys[row, :, own, :].clone(), layer.values[row, :, own, :].clone())
                for layer in output.past_key_values.layers
            ]
            if node.children
            else None
        )
    return output.logits[0], segments
