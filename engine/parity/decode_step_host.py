"""Where a decode step's time goes: the host's part (building the step's tensors and sending them in
one copy, the scheduling around it) against the network's forward call, per step, over gsm8k_cot's
prompts (one shared 8-shot header) through the packed path.

    python engine/parity/decode_step_host.py                          # SmolLM2, float32, CPU, 16 prompts, batch 8
    python engine/parity/decode_step_host.py --device cuda --dtype bfloat16

On a GPU the forward call returns once its kernels are queued; a step the host can run ahead of
spends its time in the forward call and the final read of the chosen tokens, not before it.
"""

from __future__ import annotations

import argparse
import time

from parity_prompts import generation_prompts

from eval_engine import DEFAULT_LOCAL_MODEL, GenerationRequest, Placement, load_local_model
from eval_engine.continuous import ContinuousBatcher
from eval_engine.decoding import PackedSteps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args(argv)
    model = load_local_model(DEFAULT_LOCAL_MODEL, placement=Placement(args.device, args.dtype))
    texts, budget, stop = generation_prompts("gsm8k_cot", args.items)
    prompts = [model.generation_prompt(GenerationRequest(text, budget, stop)) for text in texts]
    steps: list[tuple[float, float]] = []  # each decode step's whole time, and its forward call's
    forwards: list[float] = []  # every forward call's (prefill passes' too)
    started: list[float] = []
    step = PackedSteps.step

    def timed_step(self, tokens):
        began, calls = time.perf_counter(), len(forwards)
        chosen = step(self, tokens)
        steps.append((time.perf_counter() - began, sum(forwards[calls:])))
        return chosen

    before = model.network.register_forward_pre_hook(lambda module, inputs: started.append(time.perf_counter()))
    after = model.network.register_forward_hook(
        lambda module, inputs, output: forwards.append(time.perf_counter() - started[-1])
    )
    PackedSteps.step = timed_step  # pyright: ignore[reportAttributeAccessIssue]
    try:
        batcher = ContinuousBatcher(model.network, model.batcher.decode, model._lock, packed=True)
        batcher.generate(prompts, [budget] * len(prompts), [stop] * len(prompts), args.batch_size)
    finally:
        PackedSteps.step = step  # pyright: ignore[reportAttributeAccessIssue]
        before.remove()
        after.remove()
    whole, forward = (sum(times) for times in zip(*steps, strict=True))
    mean = 1000 / len(steps)
    print(
        f"{model.fingerprint} ({args.dtype}, {args.device}), gsm8k_cot, {args.items} prompts, batch {args.batch_size}"
    )
    print(
        f"{len(steps)} decode steps: {whole * mean:.2f} ms a step, of which the forward call {forward * mean:.2f} ms "
        f"and the host outside it {(whole - forward) * mean:.2f} ms ({(whole - forward) / whole:.1%})"
    )


if __name__ == "__main__":
    main()
