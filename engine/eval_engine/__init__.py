"""The local inference engine: a Hugging Face causal LM answering log-likelihood, generation and
chat requests exactly as transformers and lm-evaluation-harness compute them, faster (a prefix
cache, packed variable-length passes, continuous batching, seeded sampling). README.md is its
contract. Importing it is cheap: torch and transformers are imported when a model is loaded.

This module is the engine's public interface; its other modules are its own.
"""

from eval_engine.causal_lm import LocalCausalLM, divergence, restricted_softmax
from eval_engine.continuous import cut_at_stop
from eval_engine.endings import (
    BUDGET,
    CUT_AT_BUDGET,
    END_TOKEN,
    REASONING_OPEN,
    STOP_SEQUENCE,
    STOPPED,
    Generation,
    api_ending,
    ended_of,
    with_reasoning_ending,
)
from eval_engine.kernels import KERNEL_TOLERANCE, check_kernel, flash_operator
from eval_engine.loading import (
    DEFAULT_CACHE_DIR,
    DEFAULT_LOCAL_MODEL,
    Placement,
    choose_placement,
    detect_placement,
    load_local_model,
    materialize_weights,
    smollm2_gguf,
    token_counter,
)
from eval_engine.machine import LOGLIKELIHOOD_TOLERANCE, cpu_flags, cpu_name
from eval_engine.requests import Chat, Completion, GenerationRequest, LoglikelihoodRequest
from eval_engine.sampling import DEFAULT_SEED, Sampling, draw, probabilities, stream, uniform

__all__ = [
    "BUDGET",
    "CUT_AT_BUDGET",
    "DEFAULT_CACHE_DIR",
    "DEFAULT_LOCAL_MODEL",
    "DEFAULT_SEED",
    "END_TOKEN",
    "KERNEL_TOLERANCE",
    "LOGLIKELIHOOD_TOLERANCE",
    "REASONING_OPEN",
    "STOPPED",
    "STOP_SEQUENCE",
    "Chat",
    "Completion",
    "Generation",
    "GenerationRequest",
    "LocalCausalLM",
    "LoglikelihoodRequest",
    "Placement",
    "Sampling",
    "api_ending",
    "choose_placement",
    "cpu_flags",
    "cpu_name",
    "cut_at_stop",
    "check_kernel",
    "detect_placement",
    "divergence",
    "draw",
    "ended_of",
    "flash_operator",
    "load_local_model",
    "materialize_weights",
    "probabilities",
    "restricted_softmax",
    "smollm2_gguf",
    "stream",
    "token_counter",
    "uniform",
    "with_reasoning_ending",
]
