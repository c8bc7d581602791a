"""Every causal-LM family users evaluate, exact: on a tiny model of each with seeded random weights
(built from its transformers config, SmolLM2's tokenizer, sliding windows of 32 tokens, far below
every prompt), the harness's own ARC-Challenge and gsm8k_cot tasks give the same log-likelihoods
(within CHOICE_TOLERANCE, measured on them), the same per-item metrics and the same generated texts
through this platform's engine as through lm-evaluation-harness alone (a process of its own that
never imports this platform, its HF model loading the same weights from a folder), with prefixes
shared; a mixture of experts routes every token to the same experts in the engine's passes as run
whole, compared as decisions; and a perplexity task (`loglikelihood_rolling`) gives the harness's
word_perplexity, byte_perplexity and bits_per_byte. `speed/architecture_parity.py` prints the same
comparison (on ARC-Challenge 25-shot)."""

import lm_eval  # noqa: F401  (a dependency: a missing harness fails the suite, never skips it)
import pytest

from eval_engine import LOGLIKELIHOOD_TOLERANCE
from eval_engine.tiny_models import FAMILIES, WINDOW, Family, smollm2_tokenizer, tiny_model
from speed.architecture_parity import (
    EXPECTED_METRICS,
    PERPLEXITY_LENGTH,
    PERPLEXITY_METRICS,
    PERPLEXITY_RELATIVE_TOLERANCE,
    compare_family,
    compare_perplexity,
    family_case,
    perplexity_runs,
)
from speed.harness_alone import run_alone

# every test here shares a module fixture that takes seconds to a minute: the fast tier leaves them out
pytestmark = pytest.mark.slow

ITEMS, SHOTS = 2, 5  # ARC-Challenge's 5-shot prompts are 164 tokens or more; gsm8k_cot's about 800
# a choice's log-likelihood, the engine against the harness alone on these families and rows: measured
# at 8.6e-06 at most (every family, AVX-512 and AVX2 kernels: docs/results/parity.md), with room; a
# perplexity's (a whole paragraph's sum) is held to LOGLIKELIHOOD_TOLERANCE (measured at 1.1e-04)
CHOICE_TOLERANCE = 1e-4
# the families whose configs give some layers a sliding window (the others attend to the whole past)
WINDOWED = {"qwen2", "mistral", "mixtral", "gemma2", "gemma3_text", "gemma3", "phi3", "phimoe", "olmo3", "cohere2"}
# the families whose positions are ALiBi biases, built by the model from a 2-D mask: their sequences run whole
ALIBI = {"bloom", "mpt", "falcon_alibi"}
# the families whose layers do not all take packed log-likelihood passes, and why
PADDED = {
    "gemma2": "soft-capped attention logits",
    "falcon": "FalconForCausalLM does not take transformers' attention interface",
    "stablelm": "StableLmForCausalLM does not take transformers' attention interface",
}


# a tiny Llama whose RoPE frequencies depend on each pass's length (dynamic RoPE)
DYNAMIC = Family(
    "Llama, dynamic RoPE",
    "llama",
    {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}},
    variant="llama_dynamic_rope",
)


@pytest.fixture(scope="module")
def tokenizer():
    return smollm2_tokenizer()


@pytest.fixture(scope="module")
def cases(tokenizer, tmp_path_factory):
    """Each family's tiny model (and the dynamic-RoPE Llama), saved for the harness alone."""
    folder = tmp_path_factory.mktemp("families")
    return {
        family.name: family_case(family, tokenizer, ITEMS, SHOTS, batch_size=4, folder=folder)
        for family in [*FAMILIES.values(), DYNAMIC]
    }


@pytest.fixture(scope="module")
def perplexity_models(tokenizer, local_model):
    return {
        "smollm2": local_model,
        **{name: tiny_model(FAMILIES[name], tokenizer, PERPLEXITY_LENGTH) for name in ("llama", "gemma2")},
    }


@pytest.fixture(scope="module")
def sides(cases, perplexity_models, tmp_path_factory):
    """Every family's and perplexity model's run by the harness alone, in one process of its own."""
    folder = tmp_path_factory.mktemp("alone")
    runs = [case.spec for case in cases.values()] + perplexity_runs(perplexity_models, folder, batch_size=4)
    sides = run_alone(runs, folder / "out")
    assert not any(side.platform_imported for side in sides.values())
    return sides


def assert_agrees(report: dict, metrics: set[str], tolerance: float = CHOICE_TOLERANCE) -> None:
    """Both tools alike item by item: every request's arguments, log-likelihoods (within
    `tolerance`), exactly the named per-item metrics on both sides and each equal, and texts
    (parting, if ever, only at a near-tie that float noise can flip)."""
    assert report["prompts_differ"] == 0
    assert report["max_ll_diff"] < tolerance
    assert report["metric_labels"] == {"harness": metrics, "ours": metrics}
    assert {metric: values["agreement"] for metric, values in report["metrics"].items()} == dict.fromkeys(metrics, 1.0)
    for difference in report["text_differences"]:
        assert difference["gap"] is not None and difference["gap"] < LOGLIKELIHOOD_TOLERANCE, difference


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_agrees_item_by_item_with_the_harness_run_alone(name, cases, sides):
    report = compare_family(cases[name], sides[name], batch_size=4)

    assert report["documents"] == 2 * ITEMS and report["loglikelihoods"] == 4 * ITEMS and report["texts"] == ITEMS
    assert_agrees(report, EXPECTED_METRICS)
    assert report["window"] == (WINDOW if name in WINDOWED else None)  # read from the config
    assert report["shortest_prompt"] > 4 * WINDOW  # every prompt outruns every window
    if name in ALIBI:  # exact by running each sequence whole, as the harness does
        whole = "ALiBi positions: the model builds their biases from each pass's 2-D mask"
        assert report["shared_prefixes"] == f"no, every sequence runs whole: {whole}"
        assert report["loglikelihood_passes"] == "padded rows with masks: every sequence runs whole"
        assert report["generation"] == "padded rows: every sequence runs whole"
        return
    # prefixes shared: a question's context once for its four choices, gsm8k_cot's exemplars once
    assert report["shared_prefixes"] == "yes" and report["ours_tokens"] < report["harness_tokens"] / 2
    kernel = "torch's CPU flash kernel, node by node"
    padded = name in PADDED
    assert report["loglikelihood_passes"] == (
        f"padded rows with masks: {PADDED[name]}" if padded else f"packed ({kernel})"
    )
    assert report["generation"] == (
        f"padded rows: {PADDED[name]}" if padded else f"packed prefill, each row decoded at its own length ({kernel})"
    )


def test_a_model_whose_prefixes_cannot_be_shared_runs_every_sequence_whole_and_agrees(cases, sides):
    """Dynamic RoPE recomputes its frequencies from the length of each pass, so a prefix encoded
    alone could see others than its whole sequence: the engine runs each sequence whole (and says
    so), as the harness's model does, and agrees with it."""
    report = compare_family(cases[DYNAMIC.name], sides[DYNAMIC.name], batch_size=4)

    assert_agrees(report, EXPECTED_METRICS)
    assert (
        report["shared_prefixes"]
        == "no, every sequence runs whole: dynamic RoPE: frequencies depend on each pass's length"
    )
    assert report["ours_tokens"] > report["harness_tokens"] / 2  # nothing encoded once for several requests


def test_perplexity_equals_the_harness_on_a_local_text_task(perplexity_models, sides):
    """SmolLM2-135M on the three paragraphs of data/benchmarks/perplexity, each in one window (the
    harness alone converting the wheel's GGUF itself)."""
    report = compare_perplexity(perplexity_models["smollm2"], sides["perplexity-smollm2"], batch_size=4)

    assert report["documents"] == 3 and report["windows"] == 3
    assert_agrees(report, PERPLEXITY_METRICS, LOGLIKELIHOOD_TOLERANCE)
    assert report["max_relative_difference"] < PERPLEXITY_RELATIVE_TOLERANCE, report["aggregates"]


@pytest.mark.parametrize("name", ["llama", "gemma2"])
def test_perplexity_in_several_rolling_windows_equals_the_harness(name, perplexity_models, sides):
    """Models PERPLEXITY_LENGTH positions long: each paragraph in three rolling windows (the last
    with the context the harness gives it), Gemma 2's sliding windows shorter still."""
    report = compare_perplexity(perplexity_models[name], sides[f"perplexity-{name}"], batch_size=4)

    assert report["documents"] == 3 and report["windows"] == 9
    assert_agrees(report, PERPLEXITY_METRICS, LOGLIKELIHOOD_TOLERANCE)
    assert report["max_relative_difference"] < PERPLEXITY_RELATIVE_TOLERANCE, report["aggregates"]


# the families whose MLP is a mixture of experts, each layer's router choosing its top k
MIXTURES = ("qwen2_moe", "qwen3_moe", "mixtral", "phimoe", "olmoe", "deepseek_v2", "deepseek_v3")
# a router logit's |difference| between the engine's passes and the model run whole: measured at
# 1.2e-07 at most on these families' ARC-Challenge prompts (AVX-512 and AVX2 kernels; the closest
# choice was decided by a margin of 4.2e-05: docs/results/parity.md), with room; a choice may differ
# only where the router's k-th and next logits are closer than twice it
ROUTER_LOGIT_TOLERANCE = 1e-6


def routed(network, call) -> tuple[list[list[int]], dict[str, tuple]]:
    """The token ids every pass of `call()` fed the decoder, in order, and each router's logits
    [tokens, experts] and chosen experts [tokens, k], concatenated over the passes."""
    import torch

    fed, outputs, hooks = [], {}, []

    def feed(module, args, kwargs):
        ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else args[0]
        fed.append(ids.reshape(-1).tolist())

    hooks.append(network.get_decoder().register_forward_pre_hook(feed, with_kwargs=True))
    for name, module in network.named_modules():
        if type(module).__name__.lower().endswith("topkrouter"):  # (logits, weights, chosen experts)
            hooks.append(module.register_forward_hook(lambda m, a, out, n=name: outputs.setdefault(n, []).append(out)))
    try:
        call()
    finally:
        for hook in hooks:
            hook.remove()
    return fed, {n: (torch.cat([o[0] for o in out]), torch.cat([o[2] for o in out])) for n, out in outputs.items()}


@pytest.mark.parametrize("name", MIXTURES)
def test_every_routing_decision_of_a_mixture_equals_the_model_run_whole(name, cases, sides):
    """Each expert a router chose in the engine's packed passes is the one it chooses with the model
    run whole (transformers' own forward, as the harness runs it), token by token and layer by layer;
    router logits within ROUTER_LOGIT_TOLERANCE, and a choice may differ only at a near-tie."""
    import torch

    from eval_platform.common.models import LoglikelihoodRequest

    model = cases[name].model
    sample = next(s for (task, _, _), s in sides[name].samples.items() if task == "arc_challenge")
    (context, continuation) = sample["arguments"][0]
    fed, ours = routed(model.network, lambda: model.loglikelihoods([LoglikelihoodRequest(context, continuation)], 1))
    tokens = [token for ids in fed for token in ids]
    assert len(tokens) > 4 * WINDOW and ours
    with torch.inference_mode():
        _, whole = routed(model.network, lambda: model.network(input_ids=torch.tensor([tokens])))

    assert set(ours) == set(whole)
    differing = []
    for layer, (logits, chosen) in whole.items():
        our_logits, our_chosen = ours[layer]
        assert our_logits.shape == logits.shape
        assert (our_logits - logits).abs().max().item() < ROUTER_LOGIT_TOLERANCE, layer
        k = chosen.shape[1]
        ranked = logits.sort(dim=-1, descending=True).values
        margins = ranked[:, k - 1] - ranked[:, k]
        for token in range(len(tokens)):
            if set(chosen[token].tolist()) != set(our_chosen[token].tolist()):
                differing.append((layer, token, margins[token].item()))
    assert all(margin < 2 * ROUTER_LOGIT_TOLERANCE for _, _, margin in differing), differing
