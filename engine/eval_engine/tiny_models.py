"""Tiny models of every causal-LM family users evaluate, for the engine's parity checks: each built
from its transformers config (no download), a few layers of small width, SmolLM2's tokenizer and
vocabulary, weights drawn from a seeded generator, every sliding attention window WINDOW tokens
(far below every prompt of the checks), MAX_LENGTH positions (no prompt of the checks is cut).

Chosen families: those the issue names (Llama 3, Qwen 2/2.5/3, Mistral, Mixtral, Gemma 2 and 3,
Phi-3/4, OLMo 2, GPT-2, GPT-NeoX/Pythia), and among the most evaluated others those transformers
supports natively: Qwen2-MoE and Qwen3-MoE, Phi-3.5-MoE, OLMo 3 and OLMoE, Falcon, StableLM, Cohere
(Command R) and Cohere 2 (Command R7B), Granite, DeepSeek-V2 and V3, SmolLM3, and the ALiBi families
(BLOOM, MPT, Falcon's ALiBi variant), whose positions are biases rather than rotations (InternLM is
not native: its models need the Hub's remote code).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from eval_engine.causal_lm import LocalCausalLM
from eval_engine.loading import DEFAULT_LOCAL_MODEL, materialize_weights

if TYPE_CHECKING:
    from typing import TypeAlias

    from transformers import PreTrainedTokenizerBase

    # a config field's value, as `AutoConfig.for_model` takes it: a number, a name, a flag, or a sub-config's fields
    ConfigValue: TypeAlias = int | float | str | bool | None | Mapping[str, "ConfigValue"]

WINDOW = 32  # every sliding attention window: far below every prompt
MAX_LENGTH = 1536  # positions: ARC-Challenge 25-shot (up to about 1,060 tokens) and gsm8k_cot (800) fit
# The tiny shape every family starts from: 2 layers of width 64, 4 heads of 16 (2 key/value heads)
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": MAX_LENGTH,
}
MOE = {"num_experts_per_tok": 2, "moe_intermediate_size": 32}
MLA = {
    "num_key_value_heads": 4,
    "kv_lora_rank": 16,
    "q_lora_rank": 24,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 12,
}

# BLOOM's and MPT's configs name their sizes themselves (n_head, d_model, ...)
NO_ROPE_SIZES = {"num_key_value_heads": None, "intermediate_size": None}
GEMMA3_TEXT = {"sliding_window": WINDOW, "num_hidden_layers": 6, "head_dim": 16, "query_pre_attn_scalar": 16}
TINY_VISION = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "image_size": 28,
    "patch_size": 14,
}


@dataclass(frozen=True)
class Family:
    title: str
    model_type: str
    settings: Mapping[str, ConfigValue] = field(default_factory=dict)  # config fields over TINY
    covers: str = ""
    variant: str = ""  # the family's name where its model type has another family (falcon_alibi)

    @property
    def name(self) -> str:
        return self.variant or self.model_type


FAMILIES = {
    family.name: family
    for family in (
        Family(
            "Llama 3",
            "llama",
            {
                "rope_parameters": {
                    "rope_type": "llama3",
                    "rope_theta": 500000.0,
                    "factor": 8.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 128,
                }
            },
            "Llama 3's scaled RoPE",
        ),
        Family(
            "Qwen 2 / 2.5",
            "qwen2",
            {"use_sliding_window": True, "sliding_window": WINDOW, "max_window_layers": 1},
            "a full layer, then a sliding one",
        ),
        Family("Qwen 3", "qwen3", {"head_dim": 16}, "q/k norms"),
        Family(
            "Qwen2-MoE",
            "qwen2_moe",
            {**MOE, "num_experts": 4, "shared_expert_intermediate_size": 64},
            "experts and a shared expert",
        ),
        Family("Qwen3-MoE", "qwen3_moe", {**MOE, "num_experts": 4, "head_dim": 16}, "experts"),
        Family("Mistral", "mistral", {"sliding_window": WINDOW}, "a sliding window on every layer"),
        Family(
            "Mixtral",
            "mixtral",
            {"sliding_window": WINDOW, "num_local_experts": 4, "num_experts_per_tok": 2},
            "experts, a sliding window on every layer",
        ),
        Family(
            "Gemma 2",
            "gemma2",
            {"sliding_window": WINDOW, "head_dim": 16, "query_pre_attn_scalar": 16},
            "sliding and global layers alternating, attention and final logit soft-capping, eager attention",
        ),
        Family("Gemma 3 (1B)", "gemma3_text", GEMMA3_TEXT, "five sliding layers to one global, local and global RoPE"),
        Family(
            "Gemma 3 (4B to 27B)",
            "gemma3",
            {"text_config": GEMMA3_TEXT, "vision_config": TINY_VISION, "mm_tokens_per_image": 4},
            "the multimodal checkpoints' model, text alone through its language model",
        ),
        Family("Phi-3 / Phi-4", "phi3", {"sliding_window": WINDOW}, "a sliding window on every layer"),
        Family(
            "Phi-3.5-MoE",
            "phimoe",
            {"sliding_window": WINDOW, "num_local_experts": 4, "num_experts_per_tok": 2},
            "experts, a sliding window on every layer",
        ),
        Family("OLMo 2", "olmo2", {}, "q/k norms after the projections"),
        Family("OLMo 3", "olmo3", {"sliding_window": WINDOW, "num_hidden_layers": 4}, "three sliding layers to one"),
        Family("OLMoE", "olmoe", {"num_experts": 4, "num_experts_per_tok": 2}, "experts"),
        Family(
            "GPT-2",
            "gpt2",
            {"num_key_value_heads": None, "intermediate_size": None},
            "absolute position embeddings, tied embeddings",
        ),
        Family("GPT-NeoX / Pythia", "gpt_neox", {"num_key_value_heads": None}, "partial rotary (a quarter)"),
        Family(
            "Falcon",
            "falcon",
            {"multi_query": True, "parallel_attn": True, "num_key_value_heads": None},
            "multi-query attention, parallel attention and MLP",
        ),
        Family("StableLM", "stablelm", {}, "partial rotary"),
        Family("Cohere (Command R)", "cohere", {"logit_scale": 0.0625}, "logit scale, parallel blocks"),
        Family(
            "Cohere 2 (Command R7B)",
            "cohere2",
            {"sliding_window": WINDOW, "num_hidden_layers": 4, "logit_scale": 0.0625},
            "three sliding layers to one, logit scale",
        ),
        Family(
            "Granite",
            "granite",
            {"logits_scaling": 8.0, "embedding_multiplier": 12.0, "residual_multiplier": 0.22},
            "logit scaling, embedding and residual multipliers",
        ),
        Family(
            "DeepSeek-V2",
            "deepseek_v2",
            {**MLA, **MOE, "n_routed_experts": 4, "n_shared_experts": 1, "first_k_dense_replace": 1},
            "multi-head latent attention (keys and values of other widths), experts",
        ),
        Family(
            "DeepSeek-V3",
            "deepseek_v3",
            {
                **MLA,
                **MOE,
                "n_routed_experts": 4,
                "n_shared_experts": 1,
                "first_k_dense_replace": 1,
                "n_group": 2,
                "topk_group": 1,
            },
            "multi-head latent attention (compressed latents cached), grouped expert routing",
        ),
        Family("SmolLM3", "smollm3", {"num_hidden_layers": 4, "no_rope_layer_interval": 2}, "layers without RoPE"),
        Family("BLOOM", "bloom", {**NO_ROPE_SIZES, "n_head": 4, "n_layer": 2}, "ALiBi positions, no rotary"),
        Family(
            "MPT",
            "mpt",
            {**NO_ROPE_SIZES, "d_model": 64, "n_heads": 4, "n_layers": 2, "max_seq_len": MAX_LENGTH},
            "ALiBi positions, no rotary",
        ),
        Family(
            "Falcon (ALiBi)",
            "falcon",
            {"alibi": True, "multi_query": True, "num_key_value_heads": None},
            "ALiBi positions, multi-query attention",
            variant="falcon_alibi",
        ),
    )
}


def smollm2_tokenizer(folder: Path | None = None) -> PreTrainedTokenizerBase:
    """SmolLM2's tokenizer, from `folder` or the converted default model's."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder or materialize_weights(DEFAULT_LOCAL_MODEL)[0])
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def tiny_model(
    family: Family, tokenizer: PreTrainedTokenizerBase, length: int = MAX_LENGTH, seed: int = 0
) -> LocalCausalLM:
    """The family's model in TINY's shape, `length` positions long, its weights drawn from a
    generator seeded with `seed`, as the engine's in-process model."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    def text(settings: Mapping[str, ConfigValue]) -> dict[str, ConfigValue]:
        """The text model's settings over TINY's, with the tokenizer's vocabulary and special tokens."""
        merged = {
            **TINY,
            "max_position_embeddings": length,
            "vocab_size": len(tokenizer),
            "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id,
            "pad_token_id": tokenizer.pad_token_id,
            **settings,
        }
        return {name: value for name, value in merged.items() if value is not None}

    settings = family.settings
    # a multimodal config: the tiny text model inside it
    settings = (
        {**settings, "text_config": text(cast("Mapping[str, ConfigValue]", settings["text_config"]))}
        if "text_config" in settings
        else text(settings)
    )
    config = AutoConfig.for_model(family.model_type, **settings)
    torch.manual_seed(seed)
    network = AutoModelForCausalLM.from_config(config).eval()
    return LocalCausalLM(f"local/tiny-{family.model_type}", f"tiny-{family.model_type}@{seed}", tokenizer, network)
