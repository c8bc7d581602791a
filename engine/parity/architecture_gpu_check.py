"""The engine on a GPU, for every family of engine/eval_engine/tiny_models.py: on CUDA, in float32 and bfloat16,
each tiny model's log-likelihoods through the engine (shared prefixes, each layer's mask, the
model's own output layer) against the same model run on each sequence whole and alone (what the
harness's HF model computes), and its greedy texts (continuous batching, shared prefixes) against
transformers' own `generate` on each prompt alone.

    python engine/parity/architecture_gpu_check.py                       # on a machine with a CUDA GPU
    python engine/parity/architecture_gpu_check.py --tokenizer DIR --families gemma2 mistral
    python engine/parity/architecture_gpu_check.py --device cpu            # the same check on the CPU

The requests are made of the three paragraphs of data/benchmarks/perplexity: the first is a header
every request shares, the first 40 words of each other one a context after it, the next 8 words of
each paragraph a choice; prompts of 150 to 250 tokens, each longer than every window (WINDOW). No
lm-evaluation-harness is needed (a GPU machine may lack it): the reference is the model itself.
Printed per family and precision: the largest |difference| of a log-likelihood, whether each
context's most likely choice is the same, how many greedy token lists are identical (and, for one
that is not, the gap between the two tokens where they part), and the engine's path for the model.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from parity_prompts import harness_texts

from eval_engine import GenerationRequest, LocalCausalLM, LoglikelihoodRequest
from eval_engine.continuous import ContinuousBatcher
from eval_engine.tiny_models import FAMILIES, smollm2_tokenizer, tiny_model

GENERATED_TOKENS = 24


def requests() -> tuple[list[str], list[str]]:
    """The contexts (the shared header, then a paragraph's start) and the choices after each."""
    paragraphs = harness_texts("paragraphs")
    contexts = [paragraphs[0] + "\n\n" + " ".join(p.split()[:40]) for p in paragraphs[1:]]
    return contexts, [" " + " ".join(p.split()[40:48]) for p in paragraphs]


def whole(model: LocalCausalLM, request: LoglikelihoodRequest) -> float:
    """The request's log-likelihood from the model run on its sequence whole and alone."""
    import torch

    tokens, scored = model.scored_sequence(request)
    with torch.inference_mode():
        logits = model.network(input_ids=torch.tensor([tokens[:-1]], device=model.network.device)).logits
    log_probabilities = torch.log_softmax(logits[0, -scored:].float(), dim=-1)
    return float(log_probabilities[torch.arange(scored), torch.tensor(tokens[-scored:])].sum())


def alone(model: LocalCausalLM, prompt: str) -> list[int]:
    """transformers' own greedy tokens after the prompt alone (`generate`)."""
    import torch

    tokens = model.generation_prompt(GenerationRequest(prompt, GENERATED_TOKENS))
    with torch.inference_mode():
        output = model.network.generate(
            input_ids=torch.tensor([tokens], device=model.network.device),
            max_new_tokens=GENERATED_TOKENS,
            do_sample=False,
            pad_token_id=model.tokenizer.pad_token_id,
        )
    return output[0, len(tokens) :].tolist()


def parting_gap(model: LocalCausalLM, prompt: str, theirs: list[int], ours: list[int]) -> float | None:
    """Where two greedy token lists part, the gap between their two tokens' log-probabilities
    there under the model run whole (None where one ends there)."""
    import torch

    at = next((i for i, (x, y) in enumerate(zip(theirs, ours, strict=False)) if x != y), None)
    if at is None:
        return None
    context = model.generation_prompt(GenerationRequest(prompt, GENERATED_TOKENS)) + theirs[:at]
    with torch.inference_mode():
        logits = model.network(input_ids=torch.tensor([context], device=model.network.device)).logits[0, -1]
    log_probabilities = torch.log_softmax(logits.float(), dim=-1)
    return abs(float(log_probabilities[theirs[at]] - log_probabilities[ours[at]]))


def engine_tokens(model: LocalCausalLM, prompts: list[str]) -> list[list[int]]:
    """The engine's greedy tokens (continuous batching, shared prefixes), all prompts in one batch."""
    batcher = ContinuousBatcher(
        model.network, lambda tokens: json.dumps(tokens), model._lock, prefix_sharing=model.attention.shares_prefixes
    )
    tokens = [model.generation_prompt(GenerationRequest(p, GENERATED_TOKENS)) for p in prompts]
    texts = batcher.generate(tokens, [GENERATED_TOKENS] * len(prompts), [()] * len(prompts), len(prompts))
    return [json.loads(text) for text in texts]


def check(model: LocalCausalLM) -> dict:
    contexts, choices = requests()
    batch = [LoglikelihoodRequest(context, choice) for context in contexts for choice in choices]
    ours = model.loglikelihoods(batch, batch_size=4)
    theirs = [whole(model, request) for request in batch]
    per_context = len(choices)

    def best(values: list[float]) -> list[int]:
        return [max(range(per_context), key=lambda c: values[i + c]) for i in range(0, len(values), per_context)]

    gaps = [
        parting_gap(model, context, reference, ours)
        for context, reference, ours in zip(
            contexts, [alone(model, c) for c in contexts], engine_tokens(model, contexts), strict=True
        )
        if reference != ours
    ]
    return {
        "shortest_prompt": min(len(model.encode(c)) for c in contexts),
        "max_ll_diff": max(abs(a - b) for a, b in zip(theirs, ours, strict=True)),
        "decisions_equal": best(theirs) == best(ours),
        "texts_identical": len(contexts) - len(gaps),
        "texts": len(contexts),
        "gaps": gaps,
        **model.attention.describe(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="*", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument(
        "--tokenizer", type=Path, help="A folder with SmolLM2's tokenizer (default: the converted model's)."
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json", help="Also write the reports to this file.")
    args = parser.parse_args(argv)
    import torch
    import transformers

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("architecture_gpu_check needs a CUDA GPU (torch.cuda.is_available() is False here)")
    tokenizer = smollm2_tokenizer(args.tokenizer)
    device = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else args.device
    print(f"{device}, torch {torch.__version__}, transformers {transformers.__version__}")
    print(
        f"{'family':<24}{'dtype':>9}{'prompt≥':>8}{'max|Δll|':>10}  {'decisions equal':<16}{'greedy identical':<17}"
        "shared prefixes (engine path)"
    )
    reports = []
    for name in args.families:
        for dtype in ("float32", "bfloat16"):
            model = tiny_model(FAMILIES[name], tokenizer)
            model.network.to(device=args.device, dtype=getattr(torch, dtype))
            report = {"family": name, "dtype": dtype, **check(model)}
            reports.append(report)
            gaps = ", ".join("one text ends" if g is None else f"gap {g:.1e}" for g in report["gaps"])
            identical = f"{report['texts_identical']} of {report['texts']}"
            print(
                f"{FAMILIES[name].title:<24}{dtype:>9}{report['shortest_prompt']:>8}{report['max_ll_diff']:>10.1e}  "
                f"{'yes' if report['decisions_equal'] else 'NO':<16}{identical:<17}{report['shared_prefixes']}"
                + (f"  (parted: {gaps})" if gaps else ""),
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=1))


if __name__ == "__main__":
    main()
