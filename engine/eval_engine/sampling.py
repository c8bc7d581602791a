"""Sampled generation: the distribution a token is drawn from, and the draw.

The probabilities are transformers' own logits warpers on the row's logits (temperature, top-k,
top-p and min-p, each where set, in the order `generate` applies them, in float32 as `generate`
computes them). The draw inverts their cumulative distribution, in token order, at a uniform number
read from the sample's own stream: a hash of the seed, the sample's index and the prompt's tokens,
and the step. So a sample depends on nothing else in the batch, on its order, a resume or the number
of processes: the same seed gives the same texts. Where the batch's composition moves the logits in
their last digits, a token changes only where the uniform number falls within that distance of a
boundary between two tokens (a near-tie, as the greedy checks have theirs).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

DEFAULT_SEED = 1234  # the harness's default random seed


@dataclass(frozen=True)
class Sampling:
    """How a sampled request draws its tokens (greedy requests have none)."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        problems = [
            f"{name} {value}"
            for name, value, valid in (
                ("temperature", self.temperature, self.temperature > 0),
                ("top_k", self.top_k, self.top_k is None or self.top_k >= 0),
                ("top_p", self.top_p, self.top_p is None or 0 < self.top_p <= 1),
                ("min_p", self.min_p, self.min_p is None or 0 <= self.min_p <= 1),
            )
            if not valid
        ]
        if problems:
            raise ValueError(
                f"sampling with {', '.join(problems)}: a temperature above 0 (0 is greedy), top_k of 0 or more, "
                "top_p in (0, 1], min_p in [0, 1]"
            )

    def warpers(self) -> list[Any]:
        """transformers' warpers for these settings, as `generate(do_sample=True)` builds them."""
        from transformers import MinPLogitsWarper, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        warpers: list[Any] = []
        if self.temperature != 1.0:
            warpers.append(TemperatureLogitsWarper(self.temperature))
        if self.top_k:
            warpers.append(TopKLogitsWarper(top_k=self.top_k))
        if self.top_p is not None and self.top_p < 1.0:
            warpers.append(TopPLogitsWarper(top_p=self.top_p))
        if self.min_p is not None:
            warpers.append(MinPLogitsWarper(min_p=self.min_p))
        return warpers


def probabilities(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """The distribution each row's next token is drawn from: [rows, vocabulary], float32."""
    import torch

    scores = logits.to(dtype=torch.float32)
    for warper in sampling.warpers():
        scores = warper(None, scores)
    return torch.softmax(scores, dim=-1)


def stream(seed: int, sample: int, prompt: Sequence[int]) -> bytes:
    """A sample's stream: its seed, its index among its prompt's samples and the prompt's tokens."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{seed}:{sample}:".encode())
    digest.update(",".join(map(str, prompt)).encode())
    return digest.digest()


def uniform(stream_key: bytes, step: int) -> float:
    """The stream's number in [0, 1) for the token at `step` (53 random bits, a float64's)."""
    value = int.from_bytes(hashlib.blake2b(stream_key + step.to_bytes(8, "little"), digest_size=8).digest(), "little")
    return (value >> 11) / 2**53


def draw(probabilities: torch.Tensor, uniforms: Sequence[float]) -> list[int]:
    """Each row's token: the first whose cumulative probability (in token order, float64) exceeds
    its uniform number times the row's total; a token of probability 0 is never drawn."""
    import torch

    cumulative = probabilities.to(torch.float64).cumsum(dim=-1)
    targets = torch.tensor(uniforms, dtype=torch.float64, device=cumulative.device)[:, None] * cumulative[:, -1:]
    return torch.searchsorted(cumulative, targets, right=True)[:, 0].tolist()


@dataclass(frozen=True)
class Draw:
    """One row's next token to choose: greedily (no sampling), or from its stream at `step`."""

    sampling: Sampling | None
    stream: bytes
    step: int


def choose(logits: torch.Tensor, rows: Sequence[Draw]) -> list[int]:
    """The next token of each row of `logits` [rows, vocabulary]: its argmax where greedy, else its
    draw; rows of the same settings processed together."""
    import torch

    chosen = logits.argmax(dim=-1).tolist()
    groups: dict[Sampling, list[int]] = {}
    for row, each in enumerate(rows):
        if each.sampling is not None:
            groups.setdefault(each.sampling, []).append(row)
    for sampling, members in groups.items():
        index = torch.tensor(members, device=logits.device)
        tokens = draw(
            probabilities(logits.index_select(0, index), sampling),
            [uniform(rows[row].stream, rows[row].step) for row in members],
        )
        for row, token in zip(members, tokens, strict=True):
            chosen[row] = token
    return chosen
