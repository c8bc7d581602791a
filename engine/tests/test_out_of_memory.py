"""A pass that runs out of GPU memory is tried again smaller (LocalCausalLM's halving, the way
lm-evaluation-harness's `auto` batch size backs off), simulated on the CPU."""

import pytest
from prompt_fixtures import loglikelihood_requests
from test_continuous_generation import assert_same_texts, fresh_batcher

from eval_engine import LOGLIKELIHOOD_TOLERANCE, Chat, GenerationRequest


@pytest.mark.slow
def test_a_pass_that_runs_out_of_gpu_memory_is_tried_again_smaller(local_model, monkeypatch, caplog):
    """Simulated on the CPU: a forward pass over more than LIMIT tokens (packed passes and steps are
    one sequence of every row's tokens) raises torch's out-of-memory error. Log-likelihoods go on in
    passes of half the tokens, generation with half the rows (and prefill passes half as long),
    until a pass fits; the numbers are those of passes that fit at once."""
    import torch

    limit = 24
    requests = loglikelihood_requests("arc_challenge_3_shot")[:12]
    chats = [Chat("Answer with a letter.", f"Question {i}: pick A or B.") for i in range(5)]
    prompts = [GenerationRequest(f"Question: what is {i} plus {i}?\nAnswer:", 6) for i in range(4)]
    expected = (
        local_model.loglikelihoods(requests, batch_size=8),
        local_model.label_probabilities(chats, [["A", "B"]] * 5),
    )
    expected_texts = [local_model.generate([prompt])[0] for prompt in prompts]
    assert all(
        len(local_model.generation_prompt(p)) < limit < 2 * len(local_model.generation_prompt(p)) for p in prompts
    )
    forward = local_model.network.forward

    def small_passes_only(*args, **kwargs):
        tokens = kwargs["input_ids"].numel()
        if tokens > limit:
            raise torch.OutOfMemoryError(f"simulated: {tokens} tokens")
        return forward(*args, **kwargs)

    monkeypatch.setattr(local_model.network, "forward", small_passes_only)
    monkeypatch.setattr(local_model, "max_batch_tokens", 256)
    batcher = fresh_batcher(local_model, prefill_tokens=256)
    with caplog.at_level("WARNING"):
        values = local_model.loglikelihoods(requests, batch_size=8)
        distributions = local_model.label_probabilities(chats, [["A", "B"]] * 5, batch_size=8)
        texts = batcher.generate(
            [local_model.generation_prompt(p) for p in prompts], [6] * len(prompts), [()] * len(prompts), 8
        )
    assert values == pytest.approx(expected[0], abs=LOGLIKELIHOOD_TOLERANCE)
    assert [d["A"] for d in distributions] == pytest.approx([d["A"] for d in expected[1]], abs=LOGLIKELIHOOD_TOLERANCE)
    messages = [r.getMessage() for r in caplog.records if "out of GPU memory" in r.getMessage()]
    for budget in (256, 128, 64):  # halved each time, down to the smallest budget
        assert any(f"({budget} tokens per pass); trying again" in m for m in messages), messages
    assert_same_texts(local_model, [p.prompt for p in prompts], texts, expected_texts)  # near-ties aside
    # four prompts in one prefill pass, then two, then one: each fits
    assert any("generating 4 sequences at batch size 8; trying again at 4, with half the rows" in m for m in messages)
    assert any("generating 2 sequences at batch size 4; trying again at 2, with half the rows" in m for m in messages)
