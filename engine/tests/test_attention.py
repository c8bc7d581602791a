"""The engine's path for a model, read from its config (eval_engine/attention.py): where its layers'
attention windows are, and whether requests may share prefixes (the kernel takes a custom mask)."""

import pytest

from eval_engine.attention import AttentionLayout

LONGROPE = {"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [4.0] * 8, "factor": 4.0}


@pytest.mark.parametrize(
    "model_type, settings, kernel, path",
    [
        (  # Gemma 3's multimodal config: its text model's layers
            "gemma3",
            {"text_config": {"num_hidden_layers": 6, "sliding_window": 1024}},
            "sdpa",
            {"attention_windows": "1024 tokens on 5 of 6 layers", "shared_prefixes": "yes"},
        ),
        (
            "llama4_text",
            {"num_hidden_layers": 2, "attention_chunk_size": 64},
            "sdpa",
            {
                "attention_windows": "none",
                "shared_prefixes": "no, every sequence runs whole: layers of type chunked_attention: the prefix "
                "cache masks full and sliding-window attention",
            },
        ),
        (
            "phi3",
            {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "rope_parameters": LONGROPE},
            "eager",
            {
                "attention_windows": "none",
                "shared_prefixes": "no, every sequence runs whole: longrope RoPE: frequencies depend on each pass's "
                "length",
            },
        ),
        (
            "mistral",
            {"num_hidden_layers": 2, "sliding_window": 4096},
            "flash_attention_2",
            {
                "attention_windows": "4096 tokens on 2 of 2 layers",
                "shared_prefixes": "no, every sequence runs whole: the flash_attention_2 attention kernel takes no "
                "custom mask",
            },
        ),
    ],
    ids=["gemma3-multimodal", "llama4-chunked", "phi3-longrope", "flash-attention"],
)
def test_the_engine_path_is_read_from_the_models_config(model_type, settings, kernel, path):
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type, **settings)
    config.get_text_config(decoder=True)._attn_implementation = kernel
    assert AttentionLayout.of(config).describe() == path
