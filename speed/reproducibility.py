"""How far log-likelihood results move when only the computation around them changes.

    python speed/reproducibility.py                          # 10 items per benchmark and shots
    python speed/reproducibility.py --items 20 --benchmarks arc_challenge mmlu --dtype bfloat16

Every log-likelihood benchmark, zero-shot and with its few-shot number where the shipped slices hold
a few-shot split (data/benchmarks/), is scored by the local model in 20 ways: batch sizes 1, 4, 8,
16 and 32, in source and reversed item order, with the items alone and mixed with as many other
items of the benchmark. Two more runs of the reference way (batch 1, source order, alone) go in
fresh processes: one with torch's, MKL's and oneDNN's kernels held to AVX2 (another CPU
generation's kernels, on this one) and one on a single thread. Printed per benchmark and shots,
against the reference: the largest |difference| of a choice's log-likelihood and of `mc2`, the
decisions (`acc`: argmax log-likelihood, `acc_norm`: argmax per character) that flip, and the
smallest margin between an item's best and second-best choice (a flip needs a move of at least
half of it). The last line checks the largest difference against LOGLIKELIHOOD_TOLERANCE.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_platform.benchmarks.harness_format import harness_item_scores  # noqa: E402
from eval_platform.benchmarks.prediction import MODES, PredictionSettings  # noqa: E402
from eval_platform.benchmarks.specs import BENCHMARKS, BenchmarkSpec, preprocess_rows  # noqa: E402
from eval_platform.common.ingestion import load_rows  # noqa: E402
from eval_platform.common.models.local import DEFAULT_LOCAL_MODEL, Placement, load_local_model  # noqa: E402
from eval_platform.common.reproducibility import LOGLIKELIHOOD_TOLERANCE, cpu_name  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "benchmarks"
BATCH_SIZES = (1, 4, 8, 16, 32)
LOGLIKELIHOOD_BENCHMARKS = [name for name, spec in BENCHMARKS.items() if spec.multiple_choice]
# Another CPU generation's kernels on this one: torch's own, MKL's and oneDNN's held to AVX2.
AVX2_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
PROCESS_RUNS = {"avx2 kernels": AVX2_KERNELS, "1 thread": {"EVAL_TORCH_THREADS": "1"}}


def prompts_for(spec: BenchmarkSpec, shots: int, count: int) -> list[dict]:
    """The first `count` rows' prompts with their harness requests for `shots` shots."""
    fewshot = load_rows(str(DATA / "fewshot" / spec.fewshot.data_file)).rows if shots else []
    rows = load_rows(str(DATA / spec.data_file), limit=count).rows
    raw = {row_id: json.dumps(row) for row_id, row in rows}
    return [
        {**p, "row_json": raw[p["source_row_id"]]} for p in preprocess_rows(spec, rows, fewshot).with_requests(shots)
    ]


def score(model, spec: BenchmarkSpec, prompts: list[dict], batch_size: int) -> dict[str, dict]:
    """prompt id -> its choices' log-likelihoods, decisions and metric values, scored in one call."""
    mode = MODES["loglikelihood"]
    predictions = mode.predict_chunk(model, prompts, "harness", spec, PredictionSettings(batch_size))
    scored = harness_item_scores(
        spec, [{**prompt, **vars(prediction)} for prompt, prediction in zip(prompts, predictions, strict=False)]
    )
    result = {}
    for prompt, prediction in zip(prompts, predictions, strict=False):
        metrics = scored[prompt["prompt_id"]]
        result[prompt["prompt_id"]] = {
            "lls": prediction.choice_loglikelihoods,
            "acc": prediction.predicted,
            "acc_norm": prediction.predicted_norm,
            "mc2": metrics["mc2"].value if "mc2" in metrics else None,
        }
    return result


def ways(items: list[dict], others: list[dict]) -> dict[str, list[dict]]:
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
    model = load_local_model(DEFAULT_LOCAL_MODEL, placement=Placement("cpu", args.dtype))
    if args.reference_only:  # one run of the reference way, for a fresh process
        spec = BENCHMARKS[args.benchmarks[0]]
        print(json.dumps(score(model, spec, prompts_for(spec, args.shots, args.items), 1)))
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
        spec = BENCHMARKS[name]
        shot_counts = (0, spec.fewshot.shots) if spec.fewshot and spec.fewshot.data_file else (0,)
        for shots in shot_counts:
            start = time.perf_counter()
            pool = prompts_for(spec, shots, 2 * args.items)
            items, others = pool[: args.items], pool[args.items :]
            reference = score(model, spec, items, 1)
            runs = [
                score(model, spec, arrangement, size)
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
