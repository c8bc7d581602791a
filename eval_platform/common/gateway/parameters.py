"""What a call sends: its messages, and the parameters that make it greedy or sample it."""

from __future__ import annotations

import hashlib

from eval_engine import Sampling


def sampling_parameters(sampling: Sampling | None, sample: int = 0) -> dict[str, float]:
    """What a call sends to sample: `temperature` 0 for a greedy call; for sample `sample` of a
    sampled one, its temperature, the top-p, top-k and min-p it sets, and a seed of the sample's own
    (from the sampling seed and the index: providers that take a seed give each sample its draw)."""
    if sampling is None:
        return {"temperature": 0}
    seed = int.from_bytes(hashlib.blake2b(f"{sampling.seed}:{sample}".encode(), digest_size=4).digest(), "little")
    chosen = {"top_p": sampling.top_p, "top_k": sampling.top_k, "min_p": sampling.min_p}
    return {
        "temperature": sampling.temperature,
        **{name: value for name, value in chosen.items() if value is not None},
        "seed": seed >> 1,  # 31 bits: every provider's integer
    }


def chat(system: str | None, user: str) -> list[dict[str, str]]:
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
