"""Same seed, same samples: sampled texts asked in different ways, against one run of them all.

    python engine/parity/sampled_invariance.py                     # 4 gsm8k_cot prompts x 8 samples, 48 tokens
    python engine/parity/sampled_invariance.py --items 8 --k 4 --budget 96

The reference: every sample (k a prompt, temperature 0.7, top-p 0.95, seed 7) and one greedy answer
a prompt, in one `generate` call at batch size 16. Then the same requests at batch size 1; in
reverse order; on padded rows (the engine's path for models outside packed passes); and split in
two halves, each asked by a fresh process of its own (as a resumed run asks only the answers a
killed one did not keep, and as two workers share an evaluation). Printed: how many texts equal the
reference's, per way. A text that differs would be a near-tie: a uniform number within the last
digits' change of a boundary between two tokens.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from parity_prompts import generation_prompts

from eval_engine import DEFAULT_LOCAL_MODEL, GenerationRequest, Sampling, load_local_model
from eval_engine.continuous import ContinuousBatcher

SAMPLING = Sampling(temperature=0.7, top_p=0.95, seed=7)


def requests(items: int, k: int, budget: int) -> list[GenerationRequest]:
    prompts, _, stop = generation_prompts("gsm8k_cot", items)
    sampled = [GenerationRequest(p, budget, stop, SAMPLING, i) for p in prompts for i in range(k)]
    return sampled + [GenerationRequest(p, budget, stop) for p in prompts]


def texts(model, asked: list[GenerationRequest], batch_size: int, packed: bool = True) -> list[str]:
    batcher = ContinuousBatcher(model.network, model.batcher.decode, model._lock, cache_tokens=0, packed=packed)
    return batcher.generate(
        [model.generation_prompt(r) for r in asked],
        [r.max_new_tokens for r in asked],
        [r.stop for r in asked],
        batch_size,
        [(r.sampling, r.sample) for r in asked],
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=4)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--budget", type=int, default=48)
    parser.add_argument("--half", type=int, choices=(0, 1), help=argparse.SUPPRESS)  # a child process's half
    args = parser.parse_args(argv)
    model = load_local_model(DEFAULT_LOCAL_MODEL)
    asked = requests(args.items, args.k, args.budget)
    middle = len(asked) // 2
    if args.half is not None:
        print(json.dumps(texts(model, asked[:middle] if args.half == 0 else asked[middle:], 16)))
        return
    reference = texts(model, asked, 16)
    backwards = texts(model, asked[::-1], 16)[::-1]
    halves = []
    for half in (0, 1):
        child = subprocess.run(
            [sys.executable, __file__, *(argv or sys.argv[1:]), "--half", str(half)],
            capture_output=True,
            text=True,
            check=True,
        )
        halves += json.loads(child.stdout.splitlines()[-1])
    ways = {
        "batch size 1": texts(model, asked, 1),
        "reverse order": backwards,
        "padded rows (batch size 4)": texts(model, asked, 4, packed=False),
        "two halves, a fresh process each": halves,
    }
    sampled = args.items * args.k
    print(
        f"{args.items} gsm8k_cot prompts x {args.k} samples (temperature {SAMPLING.temperature}, top-p "
        f"{SAMPLING.top_p}, seed {SAMPLING.seed}) + {args.items} greedy, up to {args.budget} tokens; reference: "
        "one call, batch size 16"
    )
    print("| asked | sampled texts identical | greedy texts identical |")
    print("|---|---:|---:|")
    for way, got in ways.items():
        same = [a == b for a, b in zip(got, reference, strict=True)]
        print(f"| {way} | {sum(same[:sampled])} / {sampled} | {sum(same[sampled:])} / {args.items} |")
    print(f"distinct sampled texts in the reference: {len(set(reference[:sampled]))} of {sampled}")


if __name__ == "__main__":
    main()
