"""The attention kernels' one FlashAttention call and the check before a fast kernel is used
(eval_engine/kernels.py), on the CPU.

FlashAttention itself needs a GPU, so its call is driven through stand-ins of its operator with the
operator's signature, computed by the definition: one giving the log-sum-exp as FlashAttention 2
does ([heads, tokens]), one as [tokens, heads], one of a torch without `seqused_k`. The expected
values come from attention over the concatenated keys, computed here in float64."""

import dataclasses

import pytest
import torch

from eval_engine import LocalCausalLM, kernels
from eval_engine.kernels import (
    HEADS,
    check_cases,
    flash_varlen,
    kernel_check,
    merge,
    reference_of,
    run_case,
)
from eval_engine.tiny_models import FAMILIES, smollm2_tokenizer, tiny_model

EXACT = 1e-12  # float64 throughout: only summation order differs
# where a log-sum-exp takes part: the call gives it in float32, as FlashAttention does (8.3e-08 seen)
FLOAT32_LSE = 1e-6


def largest_difference(a, b) -> float:
    return float((a.double() - b.double()).abs().max())


def stand_in(heads_first: bool, takes_seqused_k: bool = True, lying: bool = False):
    """An operator of `_flash_attention_forward`'s signature computed by the definition. `lying`:
    its fake (meta) implementation says one layout and its results have the other."""

    def operator(query, key, value, cu_q, cu_k, max_q, max_k, dropout_p, is_causal, return_debug_mask, *,
                 scale=None, window_size_left=None, window_size_right=None, **optional):  # fmt: skip
        unknown = set(optional) - ({"seqused_k"} if takes_seqused_k else set())
        if unknown:
            raise TypeError(f"_flash_attention_forward() got unexpected keyword arguments {sorted(unknown)}")
        first = heads_first != (lying and query.device.type != "meta")
        if query.device.type == "meta":
            shape = (query.shape[1], query.shape[0]) if first else (query.shape[0], query.shape[1])
            return torch.empty_like(query), torch.empty(shape, device="meta"), None, None, None
        used = optional.get("seqused_k")
        window = (window_size_left, window_size_right)
        seqused_k = None if used is None else used.tolist()
        case = dict(query=query, key=key, value=value, cu_q=cu_q.tolist(), cu_k=cu_k.tolist(), window=window,
                    seqused_k=seqused_k)  # fmt: skip
        out, lse = run_case("reference", case)
        lse = lse.where(torch.isfinite(lse), float("inf"))  # FlashAttention: +inf where a query sees no key
        return out, (lse.T if first else lse).contiguous(), torch.zeros(2), torch.empty(()), torch.empty(0)

    return operator


def float64_cases():
    return check_cases("cpu", torch.float64)


@pytest.mark.parametrize("heads_first", [True, False], ids=["heads-first", "tokens-first"])
def test_the_flash_call_gives_the_definition_in_either_layout_at_every_shape(heads_first):
    operator = stand_in(heads_first)
    cases = float64_cases()
    assert any(case["query"].shape[0] == HEADS for case in cases)  # as many tokens as heads, packed and decode
    for case in cases:
        out, lse = run_case("flash", case, operator)
        expected_out, expected_lse = reference_of(case)
        assert largest_difference(out, expected_out) < EXACT, case["name"]
        assert largest_difference(lse, expected_lse) < FLOAT32_LSE, case["name"]


def test_a_prefix_and_a_row_merged_by_their_log_sum_exps_equal_attention_over_both_with_tokens_as_many_as_heads():
    """The decode step's merge: each of HEADS rows over a shared prefix (all seen) and its own keys
    (causal, its last token new): the result of attention over the prefix followed by the row."""
    generator = torch.Generator().manual_seed(1)
    prefix_length, own = 6, [3, 1, 5, 2, 4, 1, 2, 3]  # a row per head
    assert len(own) == HEADS
    query = torch.randn(HEADS, HEADS, 16, generator=generator, dtype=torch.float64)
    prefix_k, prefix_v = (torch.randn(prefix_length, 2, 16, generator=generator, dtype=torch.float64) for _ in "kv")
    rows_k = [torch.randn(n, 2, 16, generator=generator, dtype=torch.float64) for n in own]
    rows_v = [torch.randn(n, 2, 16, generator=generator, dtype=torch.float64) for n in own]
    cu_own = torch.tensor([0, *torch.tensor(own).cumsum(0).tolist()], dtype=torch.int32)
    one = torch.arange(HEADS + 1, dtype=torch.int32)
    scale = 0.25
    operator = stand_in(heads_first=True)

    own_part = flash_varlen(query, torch.cat(rows_k), torch.cat(rows_v), one, cu_own, 1, max(own), (-1, 0), scale,
                            operator=operator)  # fmt: skip
    bounds = torch.tensor([0, HEADS], dtype=torch.int32), torch.tensor([0, prefix_length], dtype=torch.int32)
    prefix_part = flash_varlen(query, prefix_k, prefix_v, *bounds, HEADS, prefix_length, (-1, -1), scale,
                               operator=operator)  # fmt: skip
    merged = merge(own_part, [(*prefix_part, torch.arange(HEADS))])

    for row in range(HEADS):
        keys, values = torch.cat([prefix_k, rows_k[row]]), torch.cat([prefix_v, rows_v[row]])
        weights = torch.softmax(torch.einsum("hd,khd->hk", query[row], keys.repeat_interleave(4, dim=1)) * scale, -1)
        expected = torch.einsum("hk,khd->hd", weights, values.repeat_interleave(4, dim=1))
        assert largest_difference(merged[row], expected) < FLOAT32_LSE


@pytest.fixture
def fresh_checks():
    kernel_check.cache_clear()
    yield
    kernel_check.cache_clear()


@pytest.mark.parametrize(
    "operator, passes",
    [
        (stand_in(heads_first=True), True),
        (stand_in(heads_first=False), True),
        (stand_in(heads_first=True, takes_seqused_k=False), False),  # a torch without seqused_k
        (stand_in(heads_first=True, lying=True), False),  # a layout other than its contract says
    ],
    ids=["heads-first", "tokens-first", "no-seqused_k", "lying-layout"],
)
def test_the_check_before_use_passes_a_right_kernel_and_refuses_a_wrong_one(
    fresh_checks, monkeypatch, operator, passes
):
    monkeypatch.setattr(kernels, "flash_operator", lambda: operator)
    reason = kernel_check("flash", "cpu", "float32")
    if passes:
        assert reason is None
    else:
        assert reason is not None and reason.startswith("FlashAttention's variable-length kernel failed its check")


def off_by_a_little(query, key, value, cu_q, cu_k, window, scale):
    """torch's CPU kernel with its log-sum-exp shifted by 0.01: every output right, every merge wrong."""
    out, lse = kernels.reference_varlen(query, key, value, cu_q, cu_k, window, scale)
    return out, lse + 0.01


@pytest.fixture(scope="module")
def tiny_llama() -> LocalCausalLM:
    return tiny_model(FAMILIES["llama"], smollm2_tokenizer())


def test_a_fast_kernel_that_fails_its_check_is_not_used_and_the_run_says_why(fresh_checks, monkeypatch, tiny_llama):
    from eval_engine import GenerationRequest, LoglikelihoodRequest

    header = "Question: what is two and two? Answer: four.\n" * 3
    requests = [
        LoglikelihoodRequest(header + "Question: and three and three? Answer:", f" {a}") for a in "six ten".split()
    ]
    prompts = [GenerationRequest(header + "Question: and one and one? Answer:", 6)] * 2
    padded = dataclasses.replace(tiny_llama, packed_passes=False)
    expected = padded.loglikelihoods(requests, 2), padded.generate(prompts, 2)
    assert tiny_llama.describe_placement()["engine"]["loglikelihood_passes"].startswith("packed")

    monkeypatch.setattr(kernels, "cpu_varlen", off_by_a_little)
    kernel_check.cache_clear()

    engine = tiny_llama.describe_placement()["engine"]
    assert engine["loglikelihood_passes"].startswith(
        "padded rows with masks: torch's CPU flash kernel, node by node failed its check on cpu in float32: "
        "its lse differs from the definition by 0.01"
    )
    assert engine["generation"].startswith("padded rows: torch's CPU flash kernel")
    assert (tiny_llama.loglikelihoods(requests, 2), tiny_llama.generate(prompts, 2)) == expected
