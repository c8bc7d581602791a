"""How a causal LM's layers attend, read from its configuration: what the engine's reuse of
key/value caches (shared prefixes, continuous batching) must respect to give the numbers of the
model run on each sequence whole.

A layer attends to the whole past (`full_attention`) or to a sliding window of the last
`sliding_window` positions (`sliding_attention`: Mistral, Mixtral, Phi-3 on every layer; Gemma 2,
Gemma 3, Cohere 2 and Qwen 2 with `use_sliding_window` on some layers beside global ones). The
config says which: its `layer_types`, else its `sliding_window` for every layer. The engine keeps
every layer's whole cache (nothing a later token needs is cut) and gives each layer the mask of its
type, its window counted in positions. A model whose attention the prefix cache cannot express
(another layer type, a kernel that takes no custom mask) or whose rotary embedding is scaled by the
length of each pass (`dynamic`, `longrope`: a prefix encoded alone would see other frequencies
than the whole sequence) runs every sequence whole from its first token, without shared prefixes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

FULL, SLIDING = "full_attention", "sliding_attention"
MASKED_KERNELS = {"sdpa": "boolean", "eager": "additive"}  # attention kernels and the custom mask each takes
LENGTH_SCALED_ROPE = {"dynamic", "longrope"}


@dataclass(frozen=True)
class AttentionLayout:
    """How a model's layers attend, and so how the engine may reuse their caches."""

    layer_types: tuple[str, ...]  # per layer, as the model keys its masks
    windows: tuple[int | None, ...]  # per layer: how many positions back a token sees (None: all)
    kernel: str  # the config's attention implementation
    unshared: str | None = None  # why sequences run whole, without shared prefixes (None: they share them)

    @classmethod
    def of(cls, config: PretrainedConfig) -> AttentionLayout:
        config = config.get_text_config(decoder=True)
        window = getattr(config, "sliding_window", None)
        types = getattr(config, "layer_types", None) or [SLIDING if window else FULL] * config.num_hidden_layers
        if getattr(config, "attention_chunk_size", None):
            types = ["chunked_attention"] * config.num_hidden_layers
        kernel = str(config._attn_implementation)
        others = sorted(set(types) - {FULL, SLIDING})
        scaled = sorted(LENGTH_SCALED_ROPE.intersection(_rope_types(getattr(config, "rope_parameters", None))))
        if _alibi(config):
            unshared = "ALiBi positions: the model builds their biases from each pass's 2-D mask"
        elif others:
            unshared = f"layers of type {', '.join(others)}: the prefix cache masks full and sliding-window attention"
        elif kernel not in MASKED_KERNELS:
            unshared = f"the {kernel} attention kernel takes no custom mask"
        elif scaled:
            unshared = f"{', '.join(scaled)} RoPE: frequencies depend on each pass's length"
        else:
            unshared = None
        return cls(tuple(types), tuple(window if kind == SLIDING else None for kind in types), kernel, unshared)

    @property
    def shares_prefixes(self) -> bool:
        return self.unshared is None

    def masks(
        self, allowed: torch.Tensor, query_positions: torch.Tensor, key_positions: torch.Tensor, dtype: torch.dtype
    ) -> torch.Tensor | dict[str, torch.Tensor]:
        """The attention mask of a pass whose `allowed` [rows, 1, queries, keys] says which keys each
        query may see, for a model whose layers have these windows: `allowed` where no layer has a
        window; each window also hides keys that many positions back or more (`query_positions`
        [rows, queries], `key_positions` [rows, keys]). One mask where every layer has the same
        window, else one per layer type (the model gives each layer its type's). Boolean for the
        sdpa kernel, additive (0 or the dtype's lowest) for eager."""
        import torch

        def masked(window: int | None) -> torch.Tensor:
            mask = allowed
            if window is not None:
                mask = mask & (query_positions[:, None, :, None] - key_positions[:, None, None, :] < window)
            if MASKED_KERNELS[self.kernel] == "additive":
                mask = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
                    ~mask, torch.finfo(dtype).min
                )
            return mask

        by_type = dict(zip(self.layer_types, self.windows, strict=True))
        if len(set(by_type.values())) == 1:
            return masked(self.windows[0])
        return {kind: masked(window) for kind, window in by_type.items()}

    def describe(self) -> dict[str, str]:
        """The engine's path for this model, for the run's record."""
        windowed = [window for window in self.windows if window is not None]
        return {
            "attention_windows": (
                f"{'/'.join(map(str, sorted(set(windowed))))} tokens on {len(windowed)} of {len(self.windows)} layers"
                if windowed
                else "none"
            ),
            "shared_prefixes": "yes" if self.unshared is None else f"no, every sequence runs whole: {self.unshared}",
        }


def _alibi(config: PretrainedConfig) -> bool:
    """Whether the model's positions are ALiBi biases (BLOOM always; MPT and Falcon where set)."""
    return (
        config.model_type == "bloom"
        or bool(getattr(config, "alibi", False))
        or bool(getattr(getattr(config, "attn_config", None), "alibi", False))
    )


def _rope_types(parameters: object) -> Iterator[str]:
    """Every `rope_type` in a config's rope parameters (one set, or one per layer type)."""
    if isinstance(parameters, Mapping):
        if isinstance(parameters.get("rope_type"), str):
            yield parameters["rope_type"]
        for value in parameters.values():
            yield from _rope_types(value)
