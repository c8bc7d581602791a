"""How far log-likelihood results move when only the computation around them changes.

    python speed/reproducibility.py                          # 10 items per benchmark and shots
    python speed/reproducibility.py --items 20 --benchmarks arc_challenge mmlu --dtype bfloat16

Every multiple-choice dataset, zero-shot and with its headline's shots where the shipped slices hold
a few-shot split (data/benchmarks/), is asked its harness task's requests by the local model in 20
ways: batch sizes 1, 4, 8, 16 and 32, in source and reversed item order, with the items alone and
mixed with as many other items of the benchmark. Two more runs of the reference way (batch 1,
source order, alone) go in fresh processes: one with torch's, MKL's and oneDNN's kernels held to
AVX2 (another CPU generation's kernels, on this one) and one on a single thread. Printed per
benchmark and shots, against the reference: the largest |difference| of a choice's log-likelihood
and of `mc2` (truthfulqa_mc2's `acc`, by the harness task's own process_results), the decisions
(`acc`: argmax log-likelihood, `acc_norm`: argmax per character) that flip, and the smallest margin
between an item's best and second-best choice (a flip needs a move of at least half of it). The
last line checks the largest difference against LOGLIKELIHOOD_TOLERANCE.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_engine import DEFAULT_LOCAL_MODEL, LOGLIKELIHOOD_TOLERANCE, Placement, cpu_name, load_local_model  # noqa: E402
from eval_platform.benchmarks.declarations import Benchmark, declared_benchmarks  # noqa: E402
from eval_platform.benchmarks.documents import build_documents  # noqa: E402
from eval_platform.benchmarks.parsers import parser  # noqa: E402
from eval_platform.benchmarks.solvers import EvaluationJob  # noqa: E402
from eval_platform.benchmarks.solvers.harness import built_instances  # noqa: E402
from eval_platform.common.ingestion import load_rows  # noqa: E402
from eval_platform.common.models import LoglikelihoodRequest  # noqa: E402
from eval_platform.environment import environment  # noqa: E402

BATCH_SIZES = (1, 4, 8, 16, 32)
BENCHMARKS = declared_benchmarks(environment().benchmarks_dir)
LOGLIKELIHOOD_BENCHMARKS = [
    name for name, b in BENCHMARKS.items() if b.is_dataset and parser(b.parser or "").multiple_choice
]
# A task metric that is a probability mass, not a decision: TruthfulQA's mc2 (truthfulqa_mc2's acc).
MASSES = {"truthfulqa_mc2": "acc"}
# Another CPU generation's kernels on this one: torch's own, MKL's and oneDNN's held to AVX2.
AVX2_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
PROCESS_RUNS = {"avx2 kernels": AVX2_KERNELS, "1 thread": {"EVAL_TORCH_THREADS": "1"}}


@dataclass(frozen=True)
class Item:
    """A document's harness requests for its shots, and its task's scoring of their answers."""

    name: str  # its source row id
    requests: list[LoglikelihoodRequest]
    process_results: Callable[[list[tuple[float, bool]]], dict[str, Any]]


def items_for(benchmark: Benchmark, shots: int, count: int) -> list[Item]:
    """The first `count` rows' documents with their harness requests for `shots` shots."""
    assert benchmark.dataset is not None and benchmark.dataset.file is not None
    fewshot = load_rows(benchmark.fewshot.file).rows if shots and benchmark.fewshot and benchmark.fewshot.file else []
    built = build_documents(benchmark, load_rows(benchmark.dataset.file, limit=count).rows, fewshot)
    settings = benchmark.evaluation_settings().model_copy(update={"num_fewshot": shots})
    job = EvaluationJob(benchmark, settings, None, documents=built.documents, pool=built.pool)  # type: ignore[arg-type]
    by_task = defaultdict(list)  # each task's documents in order: a harness doc_id is a position in them
    for document in built.documents:
        by_task[document.task].append(document)
    return [
        Item(
            by_task[task.config.task][doc_id].source_row_id,
            [LoglikelihoodRequest(*instance.args) for instance in asked],
            partial(task.process_results, asked[0].doc),
        )
        for task, doc_id, asked, _ in built_instances(job)
    ]


def score(model, benchmark: Benchmark, items: list[Item], batch_size: int) -> dict[str, dict]:
    """item -> its choices' log-likelihoods, decisions (argmax, and argmax per character) and the
    task's probability mass where it has one, its requests answered in one call."""
    answers = model.loglikelihoods([r for item in items for r in item.requests], batch_size)
    result, offset = {}, 0
    for item in items:
        lls = [float(ll) for ll in answers[offset : offset + len(item.requests)]]
        offset += len(item.requests)
        lengths = [len(request.continuation) for request in item.requests]
        mass = MASSES.get(benchmark.task)
        result[item.name] = {
            "lls": lls,
            "acc": max(range(len(lls)), key=lls.__getitem__),
            "acc_norm": max(range(len(lls)), key=lambda i: lls[i] / lengths[i]),
            "mc2": float(item.process_results([(ll, False) for ll in lls])[mass]) if mass else None,
        }
    return result


def ways(items: list[Item], others: list[Item]) -> dict[str, list[Item]]:
    """Each order and company of the items (others interleaved with them for `mixed`)."""
    mixed = [p for pair in zip(others, items, strict=False) for p in pair] + items[len(others) :]
    return {
        "source, alone": items,
        "reversed, alone": items[::-1],
        "source, mixed": mixed,
        "reversed, mixed": mixed[::-1],
    }


def differences(reference: dict[str, dict], other: dict[str, dict]) -> dict[str, float]:
    ids = list(reference)
    return {
        "ll": max(abs(a - b) for i in ids for a, b in zip(reference[i]["lls"], other[i]["lls"], strict=False)),
        "mc2": max(
            (abs(reference[i]["mc2"] - other[i]["mc2"]) for i in ids if reference[i]["mc2"] is not None), default=None
        ),
        "acc": [i for i in ids if reference[i]["acc"] != other[i]["acc"]],
        "acc_norm": [i for i in ids if reference[i]["acc_norm"] != other[i]["acc_norm"]],
    }


def smallest_margin(reference: dict[str, dict]) -> float:
    """The smallest gap between an item's best and second-best choice log-likelihood."""
    return min(sorted(r["lls"], reverse=True)[0] - sorted(r["lls"], reverse=True)[1] for r in reference.values())


def reference_in_a_process(environment: dict[str, str], args: argparse.Namespace, name: str, shots: int) -> dict:
    command = [
        sys.executable,
        __file__,
        "--reference-only",
        "--benchmarks",
        name,
        "--shots",
        str(shots),
        "--items",
        str(args.items),
        "--dtype",
        args.dtype,
    ]
    output = subprocess.run(command, env={**os.environ, **environment}, capture_output=True, text=True, check=True)
    return json.loads(output.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--benchmarks", nargs="*", default=LOGLIKELIHOOD_BENCHMARKS)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--shots", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--reference-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    settings = environment()  # EVAL_TORCH_THREADS: the "1 thread" run's
    model = load_local_model(
        DEFAULT_LOCAL_MODEL, settings.model_cache, Placement("cpu", args.dtype), settings.torch_threads
    )
    if args.reference_only:  # one run of the reference way, for a fresh process
        benchmark = BENCHMARKS[args.benchmarks[0]]
        print(json.dumps(score(model, benchmark, items_for(benchmark, args.shots, args.items), 1)))
        return
    import torch

    print(
        f"model {model.fingerprint} ({args.dtype}) on {cpu_name()}, torch {torch.__version__} "
        f"({torch.backends.cpu.get_cpu_capability()} kernels, {torch.get_num_threads()} threads); "
        f"{args.items} items per benchmark and shots, against batch 1, source order, alone"
    )
    print(f"{'':<20}{'max|Δll| by':>35}")
    print(
        f"{'benchmark':<15}{'shots':>5}{'batch,order,company':>20}{'avx2':>8}{'1 thread':>9}{'max|Δmc2|':>10}"
        f"{'acc flips':>10}{'acc_norm flips':>15}{'min margin':>11}{'seconds':>9}"
    )
    overall = 0.0
    for name in args.benchmarks:
        benchmark = BENCHMARKS[name]
        shipped = benchmark.fewshot is not None and benchmark.fewshot.file is not None
        shot_counts = (0, benchmark.headline.num_fewshot) if shipped and benchmark.headline.num_fewshot else (0,)
        for shots in shot_counts:
            start = time.perf_counter()
            pool = items_for(benchmark, shots, 2 * args.items)
            items, others = pool[: args.items], pool[args.items :]
            reference = score(model, benchmark, items, 1)
            runs = [
                score(model, benchmark, arrangement, size)
                for size in BATCH_SIZES
                for arrangement in ways(items, others).values()
            ]
            runs += [reference_in_a_process(environment, args, name, shots) for environment in PROCESS_RUNS.values()]
            found = [differences(reference, run) for run in runs]
            in_process, *by_process = [d["ll"] for d in found[: -len(PROCESS_RUNS)]], *found[-len(PROCESS_RUNS) :]
            largest_ll = max(d["ll"] for d in found)
            largest_mc2 = max((d["mc2"] for d in found if d["mc2"] is not None), default=None)
            flips = {metric: sorted({i for d in found for i in d[metric]}) for metric in ("acc", "acc_norm")}
            overall = max(overall, largest_ll, largest_mc2 or 0.0)
            mc2 = f"{largest_mc2:>10.1e}" if largest_mc2 is not None else f"{'-':>10}"
            print(
                f"{name:<15}{shots:>5}{max(in_process):>20.1e}{by_process[0]['ll']:>8.1e}{by_process[1]['ll']:>9.1e}"
                f"{mc2}{len(flips['acc']):>10}"
                f"{len(flips['acc_norm']):>15}{smallest_margin(reference):>11.1e}"
                f"{time.perf_counter() - start:>9.0f}",
                flush=True,
            )
            for metric, ids in flips.items():
                for item in ids:
                    print(f"{'':<15}{metric} flips on {item}: choice log-likelihoods {reference[item]['lls']}")
    verdict = "below" if overall < LOGLIKELIHOOD_TOLERANCE else "ABOVE"
    print(f"largest |difference| {overall:.1e}: {verdict} LOGLIKELIHOOD_TOLERANCE {LOGLIKELIHOOD_TOLERANCE:.0e}")


if __name__ == "__main__":
    main()
