"""Generated tokens a second with k sampled answers a prompt: this platform's engine against
transformers' `generate(num_return_sequences=k, do_sample=True)` and against lm-evaluation-harness's
own HF model running the same task with `repeats: k`.

    python speed/sampled_generation.py                       # gsm8k_cot 8-shot, 4 items, k = 1, 4, 8, 16
    python speed/sampled_generation.py --items 2 --ks 8 --budget 64

Same machine, model (SmolLM2-135M-Instruct, float32 on the CPU), prompts (gsm8k_cot's eight fixed
exemplars over the first N rows of ../shared/benchmarks/gsm8k.jsonl, as the harness renders them),
stop sequences, token budget and sampling (temperature 0.6, every other warper off: top-k 0 is
passed to transformers and the harness, whose generation config would otherwise add top-k 50):
- ours: the engine's `generate`, each prompt's k samples as k requests (prefilled once, k rows);
- transformers: `generate` one prompt at a time, its k return sequences in one batch;
- the harness: lm-evaluation-harness alone in a process of its own (speed/harness_alone.py, which
  never imports this platform), its HF model on the GGUF, gsm8k_cot with `repeats: k` and the
  sampled generation kwargs; its model phase alone (its `generate_until` calls).
Tokens are those of the texts kept (cut at the stop sequences), counted with the model's tokenizer
for every side. Printed: seconds, tokens, tokens/s per side, and our speed-up over each.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_engine import (  # noqa: E402
    DEFAULT_LOCAL_MODEL,
    Placement,
    Sampling,
    cut_at_stop,
    load_local_model,
)
from eval_platform.common.models import GenerationRequest  # noqa: E402
from speed.engine_prompts import harness_prompts  # noqa: E402
from speed.harness_alone import run_alone  # noqa: E402
from speed.lm_eval_parity import harness_model_spec, harness_run, read_rows  # noqa: E402

TEMPERATURE = 0.6
TASK = "gsm8k_cot"


def tokens_of(model, texts: list[str]) -> int:
    return sum(len(model.encode(text)) for text in texts)


def ours(model, prompts: list[str], k: int, budget: int, stop: tuple[str, ...], batch_size: int) -> tuple[float, int]:
    sampling = Sampling(temperature=TEMPERATURE, seed=1)
    requests = [GenerationRequest(p, budget, stop, sampling, sample) for p in prompts for sample in range(k)]
    start = time.perf_counter()
    texts = model.generate(requests, batch_size)
    return time.perf_counter() - start, tokens_of(model, texts)


def transformers_generate(model, prompts: list[str], k: int, budget: int, stop: tuple[str, ...]) -> tuple[float, int]:
    import torch

    torch.manual_seed(1)
    seconds, texts = 0.0, []
    for prompt in prompts:
        tokens = model.generation_prompt(GenerationRequest(prompt, budget, stop))
        start = time.perf_counter()
        with torch.inference_mode():
            output = model.network.generate(
                input_ids=torch.tensor([tokens]),
                max_new_tokens=budget,
                do_sample=True,
                temperature=TEMPERATURE,
                top_k=0,
                num_return_sequences=k,
                pad_token_id=model.tokenizer.pad_token_id,
                stop_strings=list(stop),
                tokenizer=model.tokenizer,
            )
        seconds += time.perf_counter() - start
        texts += [
            cut_at_stop(model.tokenizer.decode(row[len(tokens) :], skip_special_tokens=True), stop) for row in output
        ]
    return seconds, tokens_of(model, texts)


def harness(model, items: int, ks: list[int], budget: int, stop: tuple[str, ...], batch_size: int, folder: Path):
    """Each k's model phase and kept tokens from lm-evaluation-harness alone, one process for all."""
    rows, fewshot = read_rows(TASK, items)
    kwargs = {"until": list(stop), "do_sample": True, "temperature": TEMPERATURE, "top_k": 0, "max_gen_toks": budget}
    runs = []
    for k in ks:
        (folder / f"k{k}").mkdir(parents=True)
        run = harness_run(TASK, rows, fewshot, 8, batch_size, folder / f"k{k}", harness_model_spec())
        run["name"] = f"k{k}"
        run["overrides"] = {task: {"repeats": k, "generation_kwargs": kwargs} for task in run["tasks"]}
        runs.append(run)
    sides = run_alone(runs, folder / "harness")
    figures = {}
    for k in ks:
        side = sides[f"k{k}"]
        texts = [
            cut_at_stop(text, stop)
            for sample in side.samples.values()
            if sample["filter"] == "strict-match"
            for request in sample["resps"]
            for text in request
        ]
        assert side.platform_imported is False
        figures[k] = (side.model_seconds, tokens_of(model, texts), len(texts))
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=4)
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--budget", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args(argv)
    model = load_local_model(DEFAULT_LOCAL_MODEL, placement=Placement("cpu", "float32"))
    prompts, _, stop = harness_prompts(TASK, args.items)
    with tempfile.TemporaryDirectory() as tmp:
        theirs = harness(model, args.items, args.ks, args.budget, stop, args.batch_size, Path(tmp))
    print(
        f"model {model.fingerprint} (float32, cpu), {args.items} gsm8k_cot 8-shot prompts, up to {args.budget} "
        f"new tokens, temperature {TEMPERATURE}, batch size {args.batch_size}"
    )
    print(
        "| k | answers | ours s | ours tok/s | generate s | generate tok/s | harness s | harness tok/s | "
        "vs generate | vs harness |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for k in args.ks:
        our_s, our_t = ours(model, prompts, k, args.budget, stop, args.batch_size)
        gen_s, gen_t = transformers_generate(model, prompts, k, args.budget, stop)
        har_s, har_t, answers = theirs[k]
        assert answers == len(prompts) * k, (answers, len(prompts) * k)
        rates = (our_t / our_s, gen_t / gen_s, har_t / har_s)
        rows.append({"k": k, "ours": [our_s, our_t], "generate": [gen_s, gen_t], "harness": [har_s, har_t]})
        print(
            f"| {k} | {answers} | {our_s:.1f} | {rates[0]:.0f} | {gen_s:.1f} | {rates[1]:.0f} | {har_s:.1f} | "
            f"{rates[2]:.0f} | {rates[0] / rates[1]:.2f}x | {rates[0] / rates[2]:.2f}x |",
            flush=True,
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
