"""Tokens per second of greedy generation: continuous batching in padded rows (the engine's path for
models outside packed passes), without and with shared prefixes, against packed passes (packed
prefill, each row decoded at its own length); with `--fixed`, fixed batches first (as
lm-evaluation-harness batches).

    python engine/parity/generation_throughput.py                    # GSM8K 5-shot and gsm8k_cot 8-shot, 48 items
    python engine/parity/generation_throughput.py --items 16 --benchmarks gsm8k_cot --batch-size 8

Same process, same model (SmolLM2-135M-Instruct, float32 on the CPU unless `--device`/`--dtype`),
same prompts (the harness task's over the first N rows of ../shared/benchmarks/gsm8k.jsonl, in
data/harness_prompts.json),
same batch size, one after the other. Tokens are the tokens of the texts kept (cut at the stop
sequence); a fixed batch also computes tokens that are thrown away, which is what it loses.
Printed: seconds, tokens/s, the speed-up over fixed batches, and how many texts equal the fixed
batches' (the first differing item and token where one does not).

Then `--concurrent` chat answers asked at once as separate `acomplete` calls, as an era's
compressions and blind evaluation's answers ask them, against the same answers in one `generate`
call: equal times where every call joins the running batch, as it should.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from parity_prompts import generation_prompts, harness_texts

from eval_engine import DEFAULT_LOCAL_MODEL, Chat, GenerationRequest, Placement, divergence, load_local_model
from eval_engine.continuous import ContinuousBatcher, cut_at_stop


def fixed_batches(model, prompts: list[list[int]], budget: int, stop: tuple[str, ...], batch_size: int) -> list[str]:
    """The path before continuous batching: longest prompt first, left-padded batches that run
    through `generate` until their last member stops."""
    import torch

    order = sorted(range(len(prompts)), key=lambda i: (-len(prompts[i]), prompts[i]))
    texts = [""] * len(prompts)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        ids, mask, _ = model._left_padded([prompts[i] for i in batch])
        with torch.inference_mode():
            generated = model.network.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=budget,
                do_sample=False,
                pad_token_id=model.tokenizer.pad_token_id,
                stop_strings=list(stop),
                tokenizer=model.tokenizer,
            )
        for row, index in zip(generated[:, ids.shape[1] :], batch, strict=False):
            texts[index] = cut_at_stop(model.tokenizer.decode(row, skip_special_tokens=True), stop)
    return texts


def first_difference(model, prompts: list[str], texts: list[str], reference: list[str]) -> str:
    """The first item whose text differs from the reference's, where and by how much (see divergence)."""
    for index, (prompt, a, b) in enumerate(zip(prompts, reference, texts, strict=False)):
        if a != b:
            parted = divergence(model, prompt, a, b)
            return f"first at item {index}, token {parted['token']}, log-probability gap {parted['gap']}"
    return ""


def concurrent_chat_answers(model, questions: list[str], budget: int) -> tuple[float, float, bool]:
    """Seconds for chat answers asked as concurrent `acomplete` calls, and for the same in one
    `generate` call, and whether their texts are equal."""
    chats = [Chat("", f"Shorten this text: {question}") for question in questions]

    async def ask_all():
        return await asyncio.gather(*(model.acomplete(chat, max_tokens=budget) for chat in chats))

    start = time.perf_counter()
    concurrent = [completion.text for completion in asyncio.run(ask_all())]
    middle = time.perf_counter()
    together = model.generate([GenerationRequest(chat, budget) for chat in chats], batch_size=len(chats))
    return middle - start, time.perf_counter() - middle, concurrent == together


def compare_paths(model, name: str, items: int, batch_size: int, fixed: bool) -> None:
    """The benchmark's prompts by fixed batches (where `fixed`), then continuously batched: padded
    rows (the engine for models outside packed passes) without and with shared prefixes, and packed
    passes: a line each (seconds, tokens/s, the speed-up over the first path, texts equal to its)."""
    texts, budget, stop = generation_prompts(name, items)
    prompts = [model.generation_prompt(GenerationRequest(text, budget, stop)) for text in texts]

    def continuous(prefix_sharing: bool, packed: bool):
        batcher = ContinuousBatcher(
            model.network,
            model.batcher.decode,
            model._lock,
            prefix_sharing=prefix_sharing,
            packed=packed,
            prefill_tokens=model.max_batch_tokens,  # as the model's own batcher
        )
        return lambda: batcher.generate(prompts, [budget] * len(prompts), [stop] * len(prompts), batch_size)

    paths = {
        **({"fixed batches": lambda: fixed_batches(model, prompts, budget, stop, batch_size)} if fixed else {}),
        "padded rows": continuous(False, packed=False),
        "padded rows + shared prefixes": continuous(True, packed=False),
        "packed passes + shared prefixes": continuous(True, packed=True),
    }
    reference, baseline = None, None
    for label, run in paths.items():
        start = time.perf_counter()
        outputs = run()
        seconds = time.perf_counter() - start
        tokens = sum(len(model.encode_piece(text)) for text in outputs)
        reference = reference or outputs
        baseline = baseline or tokens / seconds
        same = sum(a == b for a, b in zip(reference, outputs, strict=False))
        parted = first_difference(model, texts, outputs, reference)
        print(
            f"{name:<11}{label:<34}{seconds:>8.1f}{tokens:>8}{tokens / seconds:>10.1f}"
            f"{tokens / seconds / baseline:>8.2f}x  {same}/{len(outputs)} {parted}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=48)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--benchmarks", nargs="*", default=["gsm8k", "gsm8k_cot"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--concurrent", type=int, default=5, help="Chat answers asked at once (0: none).")
    parser.add_argument("--fixed", action="store_true", help="Also fixed batches, as the harness batches.")
    args = parser.parse_args(argv)
    model = load_local_model(DEFAULT_LOCAL_MODEL, placement=Placement(args.device, args.dtype))
    print(f"{model.fingerprint} ({args.dtype}, {args.device}), batch size {args.batch_size}, first {args.items} rows")
    print(f"{'benchmark':<11}{'path':<34}{'seconds':>8}{'tokens':>8}{'tokens/s':>10}{'speed-up':>9}  same texts")
    for name in args.benchmarks:
        compare_paths(model, name, args.items, args.batch_size, args.fixed)
    if args.concurrent:
        questions = harness_texts("gsm8k_questions", args.concurrent)
        apart, together, same = concurrent_chat_answers(model, questions, 64)
        print(
            f"{args.concurrent} chat answers of up to 64 tokens: {apart:.1f} s as concurrent calls, {together:.1f} s "
            f"in one call ({apart / together:.2f}x its time), texts {'equal' if same else 'DIFFERENT'}"
        )


if __name__ == "__main__":
    main()
