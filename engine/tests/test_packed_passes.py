"""Packed log-likelihood passes (eval_engine/packed.py): the plan, the kernels and the whole path,
against definitions that do not come from it.

- The variable-length kernels equal attention over each sequence alone, windows aligned as
  FlashAttention documents them, computed here from the definition.
- The plan: every node in one pass, parents first, no pass over its budget, and no two nodes that
  are alive at once sharing a store slot.
- In float64, where rounding cannot hide a wrong key or position, every family that takes packed
  passes gives each request's log-likelihood of its whole sequence run alone, whatever the budget
  (one pass, or nodes split over many), with prompts longer than every window.
- In float32 on SmolLM2, request by request: the packed path (torch's CPU kernel, and the plain
  reference kernel through the same plan) against the padded path the engine took before, within
  LOGLIKELIHOOD_TOLERANCE, every greedy flag the same.
"""

import pytest
import torch
from prompt_fixtures import loglikelihood_requests

from eval_engine import LOGLIKELIHOOD_TOLERANCE
from eval_engine import packed as packed_module
from eval_engine.kernels import cpu_varlen, reference_varlen
from eval_engine.packed import depth_first, plan_passes
from eval_engine.prefix_cache import PrefixTrie, _fold_short, _split, score
from eval_engine.tiny_models import FAMILIES, WINDOW, smollm2_tokenizer, tiny_model

# float64 leaves only what a model computes in float32 whatever its dtype: DeepSeek-V3's router
# (measured 4.9e-09); every other family agreed within 3e-14
FLOAT64_TOLERANCE = 1e-7
PACKED_FAMILIES = [
    name for name in FAMILIES if name not in {"gemma2", "falcon", "stablelm", "bloom", "mpt", "falcon_alibi"}
]


def sequence_attention(q, k, v, window, scale):
    """One sequence's attention from the definition: query i (of Lq) sees key j (of Lk) where
    i + Lk - Lq - left <= j <= i + Lk - Lq + right (-1: unbounded), FlashAttention's alignment at the
    bottom right; grouped-query heads share their key head."""
    lq, lk = q.shape[0], k.shape[0]
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    left, right = window
    for i in range(lq):
        for j in range(lk):
            if (left >= 0 and j < i + lk - lq - left) or (right >= 0 and j > i + lk - lq + right):
                scores[:, i, j] = float("-inf")
    return torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v), torch.logsumexp(scores, -1).T


@pytest.mark.parametrize("window", [(-1, -1), (-1, 0), (3, 0), (0, -1)], ids=["full", "causal", "sliding", "staggered"])
@pytest.mark.parametrize("kernel", [reference_varlen, cpu_varlen], ids=["reference", "cpu"])
def test_a_variable_length_kernel_is_attention_over_each_sequence_alone(kernel, window):
    generator = torch.Generator().manual_seed(0)
    lengths_q, lengths_k = [5, 1, 7], [5, 3, 9] if window != (-1, 0) else [5, 1, 7]
    if window == (0, -1):  # a staggered job: as many queries as keys (past_jobs never asks more)
        lengths_q = lengths_k
    cu_q, cu_k = [0], [0]
    for a, b in zip(lengths_q, lengths_k, strict=True):
        cu_q.append(cu_q[-1] + a)
        cu_k.append(cu_k[-1] + b)
    q = torch.randn(cu_q[-1], 6, 8, generator=generator, dtype=torch.float64)
    k = torch.randn(cu_k[-1], 2, 8, generator=generator, dtype=torch.float64)
    v = torch.randn(cu_k[-1], 2, 4, generator=generator, dtype=torch.float64)  # narrower values, as MLA's

    out, lse = kernel(q, k, v, cu_q, cu_k, window, 0.3)

    for qa, qb, ka, kb in zip(cu_q, cu_q[1:], cu_k, cu_k[1:], strict=False):
        expected_out, expected_lse = sequence_attention(q[qa:qb], k[ka:kb], v[ka:kb], window, 0.3)
        assert torch.allclose(out[qa:qb], expected_out, atol=1e-12)
        assert torch.allclose(lse[qa:qb], expected_lse, atol=1e-12)


def trie_of(sequences, shared=True):
    trie = PrefixTrie(shared)
    for sequence in sequences:
        trie.add(*sequence)
    return trie


@pytest.fixture(scope="module")
def tokenizer():
    return smollm2_tokenizer()


def test_the_plan_puts_every_node_once_parents_first_within_the_budget_and_slots_never_shared(local_model):
    sequences = local_model.scored_sequences(loglikelihood_requests("arc_challenge_3_shot"))
    trie = trie_of(sequences)
    _fold_short(trie.root, 32)
    budget = 100

    passes, slots, capacity = plan_passes(trie.root, budget, _split)

    order = [node for plan in passes for node in plan.nodes]
    assert order == list(depth_first(trie.root))  # every node once, in depth-first order (parents first)
    assert len(passes) > 5 and all(0 < sum(len(n.tokens) for n in plan.nodes) <= budget for plan in passes)
    for plan in passes:  # offsets lay the nodes side by side
        assert plan.offsets == [sum(len(n.tokens) for n in plan.nodes[:i]) for i in range(len(plan.nodes))]
    # a node with children holds its slots from its pass to its last descendant's: none overlap
    pass_of = {id(node): index for index, plan in enumerate(passes) for node in plan.nodes}
    lives = {}
    for node in reversed(order):
        last = max([pass_of[id(node)], *(lives[id(c)][1] for c in node.children.values())])
        lives[id(node)] = (pass_of[id(node)], last)
    held = [node for node in order if node.children]
    assert set(slots) == {id(node) for node in held}
    for index in range(len(passes)):
        alive = [n for n in held if lives[id(n)][0] <= index <= lives[id(n)][1]]
        taken = [slot for n in alive for slot in range(slots[id(n)], slots[id(n)] + len(n.tokens))]
        assert len(taken) == len(set(taken)) and max(taken, default=-1) < capacity
    # the scored tokens survive the splitting of long nodes: each request's targets, in order
    assert sum(len(node.targets) for node in order) == sum(scored for _, scored in sequences)


def whole_sequence_loglikelihoods(model, sequences):
    """Each sequence run alone through the model, its scored tokens' log-probabilities summed in
    the model's own precision."""
    totals = []
    for tokens, scored in sequences:
        with torch.inference_mode():
            logits = model.network(input_ids=torch.tensor([tokens[:-1]])).logits[0]
        logprobs = torch.log_softmax(logits, dim=-1)
        first = len(tokens) - scored
        totals.append(sum(logprobs[first - 1 + j, tokens[first + j]].item() for j in range(scored)))
    return totals


@pytest.mark.slow
@pytest.mark.parametrize("name", PACKED_FAMILIES)
def test_packed_passes_give_each_sequence_run_alone_in_float64(name, tokenizer):
    model = tiny_model(FAMILIES[name], tokenizer)
    model.network.to(torch.float64)
    model.network.config._experts_implementation = "eager"  # the grouped expert kernels take no float64
    sequences = model.scored_sequences(loglikelihood_requests("arc_challenge_5_shot"))
    assert min(len(tokens) for tokens, _ in sequences) > 4 * WINDOW  # every prompt outruns every window
    expected = whole_sequence_loglikelihoods(model, sequences)
    assert model.describe_placement()["engine"]["loglikelihood_passes"].startswith("packed")

    for budget, passes in ((4096, 1), (40, 10)):  # one pass; nodes split over passes of 40 tokens
        counted = model.forward_passes
        values = score(trie_of(sequences), model.network, 4, budget, 0, on_pass=model._count_pass)
        assert max(abs(a - b) for a, b in zip(values, expected, strict=True)) < FLOAT64_TOLERANCE
        assert model.forward_passes - counted >= passes


@pytest.mark.slow
def test_packed_passes_agree_with_the_padded_path_request_by_request(local_model, monkeypatch):
    """SmolLM2 in float32 on MMLU-Pro's 5-shot requests (a header per category, ten choices a
    question): packed passes with torch's CPU kernel and with the plain reference kernel, against
    the padded rows the engine took before."""
    sequences = local_model.scored_sequences(loglikelihood_requests("mmlu_pro_5_shot"))

    def run(packed: bool):
        greedy = [True] * len(sequences)
        values = score(trie_of(sequences), local_model.network, 8, 2048, 0, greedy=greedy, packed=packed)
        return values, greedy

    padded, padded_greedy = run(packed=False)
    cpu, cpu_greedy = run(packed=True)
    monkeypatch.setattr(packed_module, "kernel_name", lambda network: "reference")
    reference, reference_greedy = run(packed=True)

    for values in (cpu, reference):
        assert max(abs(a - b) for a, b in zip(values, padded, strict=True)) < LOGLIKELIHOOD_TOLERANCE
    assert cpu_greedy == padded_greedy == reference_greedy
