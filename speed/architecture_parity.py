"""Every causal-LM family users evaluate: this platform's engine against lm-evaluation-harness's HF
model, item by item, on tiny models with random weights; and perplexity tasks, both tools.

    python speed/architecture_parity.py                          # every family, then the perplexity parity
    python speed/architecture_parity.py --families gemma3_text mistral --items 3
    python speed/architecture_parity.py --perplexity-only

Each family's model is tiny (engine/eval_engine/tiny_models.py: built from its transformers config, no
download, seeded random weights, SmolLM2's tokenizer, every sliding attention window WINDOW tokens:
every prompt here is longer than every window, and none is cut to the model's length), saved to a
folder. On each, the harness's own ARC-Challenge 25-shot and gsm8k_cot tasks (local data, its own
YAML) run twice: by lm-evaluation-harness alone (speed/harness_alone.py: a process that never
imports this platform, its HF model loading the saved folder) and by this platform's harness route
(its task building, `EngineLM` over a `LocalCausalLM` on the same weights). Printed per family: the
longest window and the shortest prompt, the largest |difference| of a log-likelihood, whether every
per-item metric is equal (both sides logging exactly EXPECTED_METRICS), how many generated texts are
identical (and, for one that is not, the token where the two part and the gap between the two
tokens' log-probabilities there), the tokens each tool's forward passes took (prefixes shared take
fewer), and the engine's path for the model.

Then perplexity: the harness's `loglikelihood_rolling` on a local text task (data/benchmarks/perplexity:
each paragraph scored whole, word_perplexity, byte_perplexity and bits_per_byte), both tools, on
SmolLM2-135M-Instruct (the harness converting the wheel's GGUF itself) and on tiny models
PERPLEXITY_LENGTH positions long, whose paragraphs take several rolling windows each.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_engine import DEFAULT_LOCAL_MODEL, LocalCausalLM, load_local_model  # noqa: E402
from eval_engine.tiny_models import FAMILIES, TINY, WINDOW, Family, smollm2_tokenizer, tiny_model  # noqa: E402
from eval_platform.benchmarks.declarations import EvaluationSettings, declared_benchmarks  # noqa: E402
from eval_platform.benchmarks.harness import HarnessOutcome, HarnessRun, build_tasks, evaluate  # noqa: E402
from eval_platform.common.models import GenerationRequest  # noqa: E402
from eval_platform.environment import environment  # noqa: E402
from speed.harness_alone import HarnessSide, TokenCounter, run_alone  # noqa: E402
from speed.lm_eval_parity import (  # noqa: E402
    FEWSHOT_FILES,
    compare_samples,
    harness_data_files,
    harness_model_spec,
    jsonl,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "benchmarks"
BENCHMARKS = declared_benchmarks(environment().benchmarks_dir)
# the declared perplexity task (data/benchmarks/paragraph_perplexity.yaml), its own folder's registry only
PERPLEXITY = BENCHMARKS["paragraph_perplexity"]
PERPLEXITY_RUN = HarnessRun((PERPLEXITY.task,), PERPLEXITY.evaluation_settings(), include_defaults=False)
PERPLEXITY_LENGTH = 48  # the perplexity models' positions: each paragraph takes several rolling windows
GENERATED_TOKENS = 16  # gsm8k_cot's budget here (its own is 256): a random model seldom stops earlier
# a perplexity metric (exp or a ratio of summed log-likelihoods) moves relatively by about what the
# summed log-likelihood moves: LOGLIKELIHOOD_TOLERANCE per token at most, relative to the sum's size
PERPLEXITY_RELATIVE_TOLERANCE = 1e-5


# what each comparison's samples must carry, on both sides ("metric" or "metric,filter")
EXPECTED_METRICS = {"acc", "acc_norm", "exact_match,strict-match", "exact_match,flexible-extract"}
PERPLEXITY_METRICS = {"word_perplexity", "byte_perplexity", "bits_per_byte"}


def saved(model: LocalCausalLM, folder: Path) -> dict[str, Any]:
    """The model's weights and its tokenizer in folders of their own, as the harness alone loads
    them (the tokenizer apart: transformers picks a tokenizer class by the model's config.json when
    one lies beside it, Qwen 2's for a tiny Qwen 2, which splits text otherwise)."""
    model.network.save_pretrained(folder / "model")
    model.tokenizer.save_pretrained(folder / "tokenizer")
    return {"pretrained": str(folder / "model"), "tokenizer": str(folder / "tokenizer"), "dtype": "float32"}


def benchmark_settings(items: int, shots: int, folder: Path) -> EvaluationSettings:
    """The harness's ARC-Challenge (`shots`-shot) and gsm8k_cot (its 8 exemplars, GENERATED_TOKENS at
    most: its YAML's generation arguments with that budget) on the first `items` rows of the shipped
    slices, as local files and overrides both tools take."""
    import lm_eval
    from lm_eval.tasks._yaml_loader import load_yaml

    files: dict[str, dict[str, str]] = {}
    for name in ("arc_challenge", "gsm8k_cot"):
        dataset = BENCHMARKS[name].dataset
        assert dataset is not None and dataset.file is not None
        fewshot = jsonl(DATA / "fewshot" / FEWSHOT_FILES[name])
        files |= harness_data_files(name, jsonl(Path(dataset.file), items), fewshot, folder)
    cot = load_yaml(Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / "gsm8k-cot.yaml", resolve_func=False)
    budget = {**cot["generation_kwargs"], "max_gen_toks": GENERATED_TOKENS}
    overrides = {"arc_challenge": {"num_fewshot": shots}, "gsm8k_cot": {"generation_kwargs": budget}}
    return EvaluationSettings(data_files=files, overrides=overrides, bootstrap_iters=0)


def alone(run: HarnessRun, name: str, model: dict[str, Any], batch_size: int) -> dict[str, Any]:
    """The run as the harness alone runs it (speed/harness_alone.py)."""
    settings = run.settings
    return {
        "name": name,
        "model": model,
        "tasks": list(run.tasks),
        "include_path": list(settings.include_path),
        "data_files": settings.data_files,
        "overrides": settings.overrides,
        "batch_size": batch_size,
    }


def ours(run: HarnessRun, model: LocalCausalLM, batch_size: int) -> HarnessOutcome:
    """The run by this platform's harness route, answered by its engine."""
    from eval_platform.benchmarks.engine_lm import EngineLM

    return evaluate(run, build_tasks(run), EngineLM(model, batch_size))


def keyed(outcome: HarnessOutcome) -> dict[tuple, dict]:
    return {(task, int(s["doc_id"]), s["filter"]): s for task, rows in outcome.samples.items() for s in rows}


def shortest_prompt(outcome: HarnessOutcome, model: LocalCausalLM) -> int:
    """The shortest prompt in tokens, as the engine feeds it."""
    lengths = []
    for sample in keyed(outcome).values():
        for arguments in sample["arguments"]:
            if isinstance(arguments[1], dict):
                lengths.append(
                    len(model.generation_prompt(GenerationRequest(arguments[0], arguments[1]["max_gen_toks"])))
                )
            else:
                lengths.append(len(model.encode(arguments[0])[-model.max_length :]))
    return min(lengths)


@dataclass
class FamilyCase:
    """A family's tiny model, saved for the harness alone, and the run both tools evaluate."""

    family: Family
    model: LocalCausalLM
    run: HarnessRun
    spec: dict[str, Any]


def family_case(family: Family, tokenizer: Any, items: int, shots: int, batch_size: int, folder: Path) -> FamilyCase:
    model = tiny_model(family, tokenizer)
    settings = benchmark_settings(items, shots, folder)
    run = HarnessRun(("arc_challenge", "gsm8k_cot"), settings)
    spec = alone(run, family.name, saved(model, folder / family.name), batch_size)
    return FamilyCase(family, model, run, spec)


def compare_family(case: FamilyCase, side: HarnessSide, batch_size: int) -> dict:
    """The family's tiny model on ARC-Challenge and gsm8k_cot: the harness alone's side against ours."""
    start, model = time.perf_counter(), case.model
    counter = TokenCounter(model.network)
    outcome = ours(case.run, model, batch_size)
    windows = [w for w in model.attention.windows if w is not None]
    return {
        "family": case.family.title,
        "model_type": case.family.model_type,
        "covers": case.family.covers,
        "window": max(windows, default=None),
        **compare_samples(side.samples, keyed(outcome), model),
        "shortest_prompt": shortest_prompt(outcome, model),
        "harness_tokens": side.forward_tokens,
        "ours_tokens": counter.tokens,
        **model.describe_placement()["engine"],
        "seconds": time.perf_counter() - start + side.model_seconds,
    }


def compare_perplexity(model: LocalCausalLM, side: HarnessSide, batch_size: int) -> dict:
    """The local perplexity task, both tools: per document, and the aggregated metrics."""
    outcome = ours(PERPLEXITY_RUN, model, batch_size)
    task = PERPLEXITY.task
    report = compare_samples(side.samples, keyed(outcome), model)
    report["windows"] = sum(
        math.ceil(len(model.encode(s["arguments"][0][0])) / model.max_length) for s in outcome.samples[task]
    )
    report["aggregates"] = {
        metric: (side.results[task][f"{metric},none"], outcome.results["results"][task][f"{metric},none"])
        for metric in sorted(PERPLEXITY_METRICS)
    }
    report["max_relative_difference"] = max(abs(a - b) / abs(a) for a, b in report["aggregates"].values())
    return {"model": model.name, "length": model.max_length, **report}


def perplexity_runs(models: dict[str, LocalCausalLM], folder: Path, batch_size: int) -> list[dict[str, Any]]:
    """The harness alone's perplexity runs of the models (SmolLM2: the wheel's GGUF, converted by
    the harness itself; a tiny model: saved to `folder`)."""
    runs = []
    for name, model in models.items():
        spec = harness_model_spec() if name == "smollm2" else saved(model, folder / f"perplexity-{name}")
        runs.append(alone(PERPLEXITY_RUN, f"perplexity-{name}", spec, batch_size))
    return runs


FAMILY_HEADER = (
    f"{'family':<24}{'window':>7}{'prompt≥':>8}{'LLs':>5}{'max|Δll|':>10}  {'metrics equal':<14}"
    f"{'texts identical':<16}{'tokens harness/ours':>20}{'s':>6}  shared prefixes (engine path)"
)


def family_row(r: dict) -> str:
    """A family's line of the table, and a line for each text that parts from the harness's."""
    metrics_equal = "yes" if all(v["agreement"] == 1.0 for v in r["metrics"].values()) else "NO"
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
    with tempfile.TemporaryDirectory() as tmp:  # the data files both tools read, the models the harness loads
        folder = Path(tmp)
        cases = (
            []
            if args.perplexity_only
            else [
                family_case(FAMILIES[name], tokenizer, args.items, args.shots, args.batch_size, folder)
                for name in args.families
            ]
        )
        perplexity_models = {
            "smollm2": load_local_model(DEFAULT_LOCAL_MODEL),
            **{name: tiny_model(FAMILIES[name], tokenizer, PERPLEXITY_LENGTH) for name in ("llama", "gemma2")},
        }
        runs = [case.spec for case in cases] + perplexity_runs(perplexity_models, folder, args.batch_size)
        sides = run_alone(runs, folder / "harness")
        print(
            f"lm-eval {next(iter(sides.values())).lm_eval_version} alone in its own process, transformers "
            f"{__import__('transformers').__version__}; tiny models: {TINY}, windows {WINDOW}, SmolLM2's "
            f"tokenizer; ARC-Challenge {args.shots}-shot and gsm8k_cot ({GENERATED_TOKENS} tokens), {args.items} "
            "rows each"
        )
        families = []
        if cases:
            print(FAMILY_HEADER)
        for case in cases:
            families.append(compare_family(case, sides[case.family.name], args.batch_size))
            print(family_row(families[-1]), flush=True)
        perplexity = [
            compare_perplexity(model, sides[f"perplexity-{name}"], args.batch_size)
            for name, model in perplexity_models.items()
        ]
    print_perplexity(perplexity)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"families": families, "perplexity": perplexity}, indent=1, default=sorted)
        )


if __name__ == "__main__":
    main()
