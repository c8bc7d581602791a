"""Every causal-LM family users evaluate: this platform's engine against lm-evaluation-harness's HF
model, item by item, on tiny models with random weights; and perplexity tasks, both tools.

    python speed/architecture_parity.py                          # every family, then the perplexity parity
    python speed/architecture_parity.py --families gemma3_text mistral --items 3
    python speed/architecture_parity.py --perplexity-only

Each family's model is tiny (speed/tiny_models.py: built from its transformers config, no
download, seeded random weights, SmolLM2's tokenizer, every sliding attention window WINDOW tokens:
every prompt here is longer than every window, and none is cut to the model's length). On each,
the harness's own ARC-Challenge 25-shot and gsm8k_cot tasks (local data, its own YAML) run through
`simple_evaluate` twice: with the harness's HF model (`HFLM` on the model object) and with this
platform's engine (`EngineLM` over a `LocalCausalLM` on the same object). Printed per family: the
longest window and the shortest prompt, the largest |difference| of a log-likelihood, whether every
per-item metric is equal, how many generated texts are identical (and, for one that is not, the
token where the two part and the gap between the two tokens' log-probabilities there), the tokens
each tool's forward passes took (prefixes shared take fewer), and the engine's path for the model.

Then perplexity: the harness's `loglikelihood_rolling` on a local text task (data/benchmarks/perplexity:
each paragraph scored whole, word_perplexity, byte_perplexity and bits_per_byte), both tools, on
SmolLM2-135M-Instruct and on tiny models PERPLEXITY_LENGTH positions long, whose paragraphs take
several rolling windows each.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_platform.benchmarks.declarations import declared_benchmarks  # noqa: E402
from eval_platform.benchmarks.harness import HarnessRun, build_tasks, task_manager  # noqa: E402
from eval_platform.common.models import GenerationRequest  # noqa: E402
from eval_platform.common.models.local import DEFAULT_LOCAL_MODEL, LocalCausalLM, load_local_model  # noqa: E402
from eval_platform.common.reproducibility import LOGLIKELIHOOD_TOLERANCE  # noqa: E402
from speed.harness_parity import TokenCounter  # noqa: E402
from speed.lm_eval_parity import FEWSHOT_FILES, divergence, harness_configs  # noqa: E402
from speed.tiny_models import FAMILIES, TINY, WINDOW, Family, smollm2_tokenizer, tiny_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "benchmarks"
BENCHMARKS = declared_benchmarks()
# the declared perplexity task (data/benchmarks/paragraph_perplexity.yaml), its own folder's registry only
PERPLEXITY = BENCHMARKS["paragraph_perplexity"]
PERPLEXITY_RUN = HarnessRun((PERPLEXITY.task,), PERPLEXITY.evaluation_settings(), include_defaults=False)
PERPLEXITY_LENGTH = 48  # the perplexity models' positions: each paragraph takes several rolling windows
GENERATED_TOKENS = 16  # gsm8k_cot's budget here (its own is 256): a random model seldom stops earlier
# a perplexity metric (exp or a ratio of summed log-likelihoods) moves relatively by about what the
# summed log-likelihood moves: LOGLIKELIHOOD_TOLERANCE per token at most, relative to the sum's size
PERPLEXITY_RELATIVE_TOLERANCE = 1e-5


def harness_lm(model: LocalCausalLM, batch_size: int) -> Any:
    """The harness's HF model on the same network and tokenizer."""
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=model.network, tokenizer=model.tokenizer, batch_size=batch_size)


def jsonl(path: Path, count: int | None = None) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[:count]]


def benchmark_configs(items: int, shots: int, folder: Path) -> list[dict]:
    """The harness's ARC-Challenge (`shots`-shot) and gsm8k_cot (its 8 exemplars, GENERATED_TOKENS
    at most) configs on the first `items` rows of the shipped slices."""
    configs = []
    for name, extra in (("arc_challenge", {"num_fewshot": shots}), ("gsm8k_cot", {})):
        dataset = BENCHMARKS[name].dataset
        assert dataset is not None and dataset.file is not None
        fewshot = jsonl(DATA / "fewshot" / FEWSHOT_FILES[name])
        for config in harness_configs(name, jsonl(Path(dataset.file), items), fewshot, folder):
            if config["output_type"] == "generate_until":
                config["generation_kwargs"] = {**config["generation_kwargs"], "max_gen_toks": GENERATED_TOKENS}
            configs.append({**config, **extra})
    return configs


def evaluate(lm: Any, tasks: list[Any], registry: Any) -> dict:
    """The harness's `simple_evaluate` of `lm` on the tasks, its seeds and samples."""
    from lm_eval import simple_evaluate

    return simple_evaluate(model=lm, tasks=tasks, task_manager=registry, log_samples=True, bootstrap_iters=0)


def agree(theirs: Any, ours: Any) -> bool:
    """Two per-item values alike: numbers within LOGLIKELIHOOD_TOLERANCE (a 0/1 metric is equal or
    not at all), sequences element by element, anything else equal."""
    if isinstance(theirs, (list, tuple)):
        return len(theirs) == len(ours) and all(map(agree, theirs, ours))
    if isinstance(theirs, (int, float)) and not isinstance(theirs, bool):
        return abs(float(theirs) - float(ours)) < LOGLIKELIHOOD_TOLERANCE
    return theirs == ours


def compare(theirs: dict, ours: dict, model: LocalCausalLM) -> dict:
    """Both tools' samples item by item: prompts, per-item metrics, and each request's answer once
    (a document's filters share them): log-likelihoods, generated texts; and the shortest prompt in
    tokens, as the engine feeds it."""
    a = {(task, s["doc_id"], s["filter"]): s for task, rows in theirs["samples"].items() for s in rows}
    b = {(task, s["doc_id"], s["filter"]): s for task, rows in ours["samples"].items() for s in rows}
    assert set(a) == set(b), f"different documents: {sorted(set(a) ^ set(b))[:5]}"
    report = {
        "documents": len({key[:2] for key in a}),
        "prompts_differ": 0,
        "shortest_prompt": model.max_length,
        "loglikelihoods": 0,
        "max_ll_diff": 0.0,
        "metrics": {},
        "texts": 0,
        "text_differences": [],
    }
    answered = set()
    for key, sample in a.items():
        other = b[key]
        report["prompts_differ"] += [list(x) for x in sample["arguments"]] != [list(x) for x in other["arguments"]]
        for metric in sample["metrics"]:
            report["metrics"].setdefault(metric, []).append(agree(sample[metric], other[metric]))
        if key[:2] in answered:
            continue
        answered.add(key[:2])
        for arguments, (x,), (y,) in zip(sample["arguments"], sample["resps"], other["resps"], strict=True):
            if isinstance(x, str):
                budget = arguments[1]["max_gen_toks"]
                prompt = model.generation_prompt(GenerationRequest(arguments[0], budget))
                report["texts"] += 1
                if x != y:
                    report["text_differences"].append({"item": key, **divergence(model, arguments[0], x, y, budget)})
            else:
                prompt = model.encode(arguments[0])[-model.max_length :]
                report["loglikelihoods"] += 1
                report["max_ll_diff"] = max(report["max_ll_diff"], abs(first(x) - first(y)))
            report["shortest_prompt"] = min(report["shortest_prompt"], len(prompt))
    report["metrics"] = {metric: sum(v) / len(v) for metric, v in report["metrics"].items()}
    return report


def first(answer: Any) -> float:
    """A log-likelihood answer's value: (log-likelihood, is_greedy), or a rolling one's number."""
    return float(answer[0] if isinstance(answer, (list, tuple)) else answer)


def compare_family(family: Family, tokenizer: Any, items: int, shots: int, batch_size: int, folder: Path) -> dict:
    """The family's tiny model on ARC-Challenge and gsm8k_cot, both tools."""
    from eval_platform.benchmarks.engine_lm import EngineLM

    start = time.perf_counter()
    model = tiny_model(family, tokenizer)
    counter = TokenCounter(model.network)
    configs = benchmark_configs(items, shots, folder)
    theirs = evaluate(harness_lm(model, batch_size), copy.deepcopy(configs), task_manager())
    harness_tokens = counter.tokens
    ours = evaluate(EngineLM(model, batch_size), copy.deepcopy(configs), task_manager())
    windows = [w for w in model.attention.windows if w is not None]
    return {
        "family": family.title,
        "model_type": family.model_type,
        "covers": family.covers,
        "window": max(windows, default=None),
        **compare(theirs, ours, model),
        "harness_tokens": harness_tokens,
        "ours_tokens": counter.tokens - harness_tokens,
        **model.describe_placement()["engine"],
        "seconds": time.perf_counter() - start,
    }


def compare_perplexity(model: LocalCausalLM, batch_size: int) -> dict:
    """The local perplexity task, both tools: per document, and the aggregated metrics."""
    from eval_platform.benchmarks.engine_lm import EngineLM

    theirs = evaluate(harness_lm(model, batch_size), build_tasks(PERPLEXITY_RUN), PERPLEXITY_RUN.registry())
    ours = evaluate(EngineLM(model, batch_size), build_tasks(PERPLEXITY_RUN), PERPLEXITY_RUN.registry())
    task = PERPLEXITY.task
    report = compare(theirs, ours, model)
    report["windows"] = sum(
        math.ceil(len(model.encode(s["arguments"][0][0])) / model.max_length) for s in ours["samples"][task]
    )
    report["aggregates"] = {
        metric: (theirs["results"][task][f"{metric},none"], ours["results"][task][f"{metric},none"])
        for metric in ("word_perplexity", "byte_perplexity", "bits_per_byte")
    }
    report["max_relative_difference"] = max(abs(a - b) / abs(a) for a, b in report["aggregates"].values())
    return {"model": model.name, "length": model.max_length, **report}


FAMILY_HEADER = (
    f"{'family':<24}{'window':>7}{'prompt≥':>8}{'LLs':>5}{'max|Δll|':>10}  {'metrics equal':<14}"
    f"{'texts identical':<16}{'tokens harness/ours':>20}{'s':>6}  shared prefixes (engine path)"
)


def family_row(r: dict) -> str:
    """A family's line of the table, and a line for each text that parts from the harness's."""
    metrics_equal = "yes" if all(v == 1.0 for v in r["metrics"].values()) else "NO"
    identical = f"{r['texts'] - len(r['text_differences'])} of {r['texts']}"
    tokens = f"{r['harness_tokens']}/{r['ours_tokens']}"
    lines = [
        f"{r['family']:<24}{r['window'] or '-':>7}{r['shortest_prompt']:>8}{r['loglikelihoods']:>5}"
        f"{r['max_ll_diff']:>10.1e}  {metrics_equal:<14}{identical:<16}{tokens:>20}{r['seconds']:>6.1f}  "
        f"{r['shared_prefixes']}"
    ]
    for d in r["text_differences"]:
        gap = "one text ends" if d["gap"] is None else f"log-probability gap {d['gap']:.1e}"
        lines.append(f"{'':<24}{d['item']} parts at token {d['token']}: {d['theirs']!r} / {d['ours']!r} ({gap})")
    return "\n".join(lines)


def print_perplexity(reports: list[dict]) -> None:
    """Per model: its length, documents, rolling windows, the largest |difference| of a document's
    log-likelihood, each metric by the harness and by the engine, and their largest relative
    difference."""
    metrics = "".join(f"{f'{name} harness / ours':>34}" for name in reports[0]["aggregates"])
    print(f"{'model':<28}{'length':>7}{'docs':>5}{'windows':>8}{'max|Δll|':>10}{metrics}{'max rel Δ':>11}")
    for r in reports:
        cells = "".join(f"{f'{a:.7g} / {b:.7g}':>34}" for a, b in r["aggregates"].values())
        print(
            f"{r['model']:<28}{r['length']:>7}{r['documents']:>5}{r['windows']:>8}{r['max_ll_diff']:>10.1e}"
            f"{cells}{r['max_relative_difference']:>11.1e}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="*", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--items", type=int, default=3, help="Rows of each task.")
    parser.add_argument("--shots", type=int, default=25, help="ARC-Challenge's shots.")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--perplexity-only", action="store_true")
    parser.add_argument("--json", help="Also write the reports to this file.")
    args = parser.parse_args(argv)
    tokenizer = smollm2_tokenizer()
    print(
        f"lm-eval {__import__('lm_eval').__version__}, transformers {__import__('transformers').__version__}; "
        f"tiny models: {TINY}, windows {WINDOW}, SmolLM2's tokenizer; ARC-Challenge {args.shots}-shot and "
        f"gsm8k_cot ({GENERATED_TOKENS} tokens), {args.items} rows each"
    )
    families = []
    if not args.perplexity_only:
        print(FAMILY_HEADER)
        with tempfile.TemporaryDirectory() as folder:
            for name in args.families:
                families.append(
                    compare_family(FAMILIES[name], tokenizer, args.items, args.shots, args.batch_size, Path(folder))
                )
                print(family_row(families[-1]), flush=True)
    perplexity = [compare_perplexity(load_local_model(DEFAULT_LOCAL_MODEL), args.batch_size)]
    for name in ("llama", "gemma2"):
        perplexity.append(compare_perplexity(tiny_model(FAMILIES[name], tokenizer, PERPLEXITY_LENGTH), args.batch_size))
    print_perplexity(perplexity)
    if args.json:
        Path(args.json).write_text(json.dumps({"families": families, "perplexity": perplexity}, indent=1, default=str))


if __name__ == "__main__":
    main()
