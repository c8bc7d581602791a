"""Sampled generation (eval_engine/sampling.py) on the real local model: the
distribution a token is drawn from is transformers' own `generate(do_sample=True)`'s, the draws
follow it (a seeded chi-square test, seen rejecting a sampler whose top-p keeps one token more), and
a sample depends on its seed, its index and its prompt alone: not on the batch size, the order, the
engine's path or what else is in the batch; a prompt's k samples share one prefill."""

import pytest
from prompt_fixtures import generation_prompts
from test_continuous_generation import fresh_batcher

from eval_engine import GenerationRequest, Sampling, draw, probabilities, stream, uniform

# Processed distributions equal transformers' to this (the issue's bound; both in float32, the same
# operations: the largest difference seen on this machine is printed by the test).
DISTRIBUTION_TOLERANCE = 1e-6
DRAWS = 20_000
# A chi-square p-value below this rejects the sampler. The draws are seeded, so each test's outcome
# is fixed: a right sampler's p-value and a wrong one's are far on either side (printed).
REJECT_BELOW = 1e-3
SETTINGS = [
    Sampling(temperature=0.7),
    Sampling(temperature=1.3, top_k=20),
    Sampling(temperature=0.6, top_p=0.95),
    Sampling(temperature=1.0, min_p=0.05),
    Sampling(temperature=0.8, top_k=40, top_p=0.9, min_p=0.02),
]


@pytest.fixture(scope="module")
def prompts():
    """Two gsm8k_cot prompts (one fixed 8-shot header) in the harness's format, and their stop sequences."""
    return generation_prompts("gsm8k_cot", 2)


def transformers_step(model, tokens: list[int], sampling: Sampling):
    """transformers' own `generate(do_sample=True)` for one token: the raw logits and the scores its
    warpers made of them (every warper named, so the model's generation config adds none)."""
    import torch

    with torch.inference_mode():
        output = model.network.generate(
            input_ids=torch.tensor([tokens]),
            max_new_tokens=1,
            do_sample=True,
            temperature=sampling.temperature,
            top_k=sampling.top_k or 0,
            top_p=sampling.top_p if sampling.top_p is not None else 1.0,
            min_p=sampling.min_p,
            output_logits=True,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=model.tokenizer.pad_token_id,
        )
    return output.logits[0], output.scores[0]


@pytest.mark.parametrize("sampling", SETTINGS, ids=lambda s: f"t{s.temperature}-k{s.top_k}-p{s.top_p}-m{s.min_p}")
def test_the_distribution_a_token_is_drawn_from_is_transformers_generate_s(local_model, prompts, sampling):
    import torch

    for prompt in prompts[0]:
        tokens = local_model.generation_prompt(GenerationRequest(prompt, 8))
        logits, scores = transformers_step(local_model, tokens, sampling)
        theirs = torch.softmax(scores.float(), dim=-1)
        ours = probabilities(logits, sampling)
        difference = (ours - theirs).abs().max().item()
        print(f"{sampling}: largest difference {difference:.3g}, tokens kept {int((theirs > 0).sum())}")
        assert difference <= DISTRIBUTION_TOLERANCE
        assert torch.equal(ours > 0, theirs > 0)  # the same tokens kept, exactly


def chi_square_p(counts: list[int], expected: list[float]) -> float:
    """Pearson's chi-square test of drawn counts against expected counts, bins of fewer than 5
    expected draws pooled into one (scipy's test)."""
    from scipy.stats import chisquare

    pooled_counts, pooled_expected, small = [], [], [0.0, 0.0]
    for count, wanted in zip(counts, expected, strict=True):
        if wanted >= 5:
            pooled_counts.append(count)
            pooled_expected.append(wanted)
        else:
            small[0] += count
            small[1] += wanted
    if small[0] or small[1]:  # draws of a token that should have none: expected 0, p-value 0
        pooled_counts.append(small[0])
        pooled_expected.append(small[1])
    scale = sum(pooled_counts) / sum(pooled_expected)  # float sums of the expected counts, made exact
    return float(chisquare(pooled_counts, [wanted * scale for wanted in pooled_expected]).pvalue)


def drawn_counts(distribution, prompt: list[int], seed: int) -> list[int]:
    """`DRAWS` first tokens, one from each sample's own stream, from a one-row distribution."""
    import torch

    uniforms = [uniform(stream(seed, sample, prompt), 0) for sample in range(DRAWS)]
    tokens = draw(distribution.expand(DRAWS, -1), uniforms)
    return torch.bincount(torch.tensor(tokens), minlength=distribution.shape[-1]).tolist()


def one_more_token(logits, sampling: Sampling, kept: int):
    """A wrong sampler's distribution: top-p keeping one token more than the `kept` it should."""
    import torch

    full = probabilities(logits, Sampling(temperature=sampling.temperature))
    order = full.argsort(descending=True)
    wrong = torch.zeros_like(full)
    wrong[order[: kept + 1]] = full[order[: kept + 1]]
    return wrong / wrong.sum()


def test_draws_follow_the_distribution_and_a_top_p_off_by_one_token_is_rejected(local_model, prompts):
    sampling = Sampling(temperature=0.9, top_p=0.8)
    tokens = local_model.generation_prompt(GenerationRequest(prompts[0][0], 8))
    logits, scores = transformers_step(local_model, tokens, sampling)
    import torch

    right = torch.softmax(scores.float(), dim=-1)[0]
    expected = (right.double() * DRAWS).tolist()
    ours = probabilities(logits, sampling)
    right_p = chi_square_p(drawn_counts(ours, tokens, seed=11), expected)
    wrong = one_more_token(logits[0], sampling, int((right > 0).sum()))
    wrong_p = chi_square_p(drawn_counts(wrong[None], tokens, seed=11), expected)
    print(
        f"kept {int((right > 0).sum())} tokens; p-value of our draws {right_p:.3g}, of top-p off by one {wrong_p:.3g}"
    )
    assert right_p > REJECT_BELOW
    assert wrong_p < REJECT_BELOW


def sampled_texts(model, requests: list[GenerationRequest], batch_size: int, order=None, packed=True) -> list[str]:
    """The requests' texts from a batcher of its own, asked in `order` (indices), in the requests' order."""
    order = list(range(len(requests))) if order is None else order
    asked = [requests[i] for i in order]
    batcher = fresh_batcher(model, packed=packed)
    texts = batcher.generate(
        [model.generation_prompt(r) for r in asked],
        [r.max_new_tokens for r in asked],
        [r.stop for r in asked],
        batch_size,
        [(r.sampling, r.sample) for r in asked],
    )
    by_request = [""] * len(requests)
    for position, index in enumerate(order):
        by_request[index] = texts[position]
    return by_request


@pytest.mark.slow
def test_the_same_seed_gives_the_same_samples_whatever_the_batch(local_model, prompts):
    """Four samples of two prompts beside two greedy requests: batch size 16 against 1, reversed, on
    padded rows, and in two halves (as a resume asks the rest). A token could change only where a
    pass's last digits move its uniform number across a boundary between two tokens (about one in a
    million tokens): none is expected here."""
    cot, stop = prompts
    sampling = Sampling(temperature=0.7, top_p=0.95, seed=7)
    requests = [GenerationRequest(p, 24, stop, sampling, i) for p in cot for i in range(4)]
    requests += [GenerationRequest(p, 24, stop) for p in cot]
    together = sampled_texts(local_model, requests, 16)
    assert together == sampled_texts(local_model, requests, 1)
    assert together == sampled_texts(local_model, requests, 16, order=list(reversed(range(len(requests)))))
    assert together == sampled_texts(local_model, requests, 4, packed=False)
    # a resumed run asks only what a killed one did not keep, in a batch of its own
    assert together == sampled_texts(local_model, requests[:5], 16) + sampled_texts(local_model, requests[5:], 16)
    assert len(set(together[:4])) > 1  # the samples differ from one another
    other_seed = [
        GenerationRequest(r.prompt, 24, stop, Sampling(0.7, top_p=0.95, seed=8), r.sample) for r in requests[:4]
    ]
    assert sampled_texts(local_model, other_seed, 16) != together[:4]


def test_k_samples_of_a_prompt_share_its_prefill(local_model, prompts):
    prompt, stop = prompts[0][0], prompts[1]
    one = fresh_batcher(local_model)
    tokens = local_model.generation_prompt(GenerationRequest(prompt, 2, stop))
    one.generate([tokens], [2], [stop], 8)
    four = fresh_batcher(local_model)
    sampling = Sampling(temperature=1.0, seed=3)
    four.generate([tokens] * 4, [2] * 4, [stop] * 4, 8, [(sampling, i) for i in range(4)])
    assert four.encoded_tokens == one.encoded_tokens == len(tokens)


def test_samples_of_prompts_that_share_only_a_short_start_are_prefilled_and_drawn_alike(local_model):
    """Two prompts whose first tokens alone are alike (fewer than the 32 a shared prefix needs), four
    samples each: each prompt's copies read it as their prefix, whose path through the prompts' trie
    (the short start folded into both) is found; each prompt's samples are those it gets alone."""
    first = "Question: " + " ".join(f"apple{i}" for i in range(40))
    second = "Question: " + " ".join(f"pear{i}" for i in range(40))
    sampling = Sampling(temperature=0.9, seed=2)
    requests = [GenerationRequest(p, 6, (), sampling, i) for p in (first, second) for i in range(4)]
    together = sampled_texts(local_model, requests, 16)
    assert together == sampled_texts(local_model, requests[:4], 16) + sampled_texts(local_model, requests[4:], 16)
