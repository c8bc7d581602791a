"""Items per second and forward passes per item, batched vs a naive one-item-at-a-time loop.

    python speed/prediction_throughput.py --benchmark arc_easy --items 200
    python speed/prediction_throughput.py --benchmark mmlu --items 200 --source ../shared/benchmarks/mmlu.jsonl

Both runs use the same model and prompts in the same process; the ratio is the figure to quote.
The naive letter loop does one forward pass per item; the naive log-likelihood loop one full pass
per choice. The batched paths are the ones the pipeline uses (the shared-prefix cache: a prefix the
prompts share, and an item's context, encoded once and reused by every continuation or label).
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_platform.benchmarks.prediction import MODES, PredictionSettings, loglikelihood_requests, predict  # noqa: E402
from eval_platform.benchmarks.specs import BENCHMARKS, preprocess_rows  # noqa: E402
from eval_platform.common.ingestion import load_rows  # noqa: E402
from eval_platform.common.models.local import DEFAULT_LOCAL_MODEL, load_local_model  # noqa: E402
from tests.reference_scoring import naive_loglikelihoods  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def timed(model, work):
    model.forward_passes = 0
    start = time.perf_counter()
    result = work()
    return result, time.perf_counter() - start, model.forward_passes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="arc_easy", choices=sorted(BENCHMARKS))
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--source", help="Data file (default: the full split beside the project, else data/).")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--model", default=DEFAULT_LOCAL_MODEL)
    args = parser.parse_args()
    spec = BENCHMARKS[args.benchmark]
    full = ROOT.parent / "shared" / "benchmarks" / spec.data_file
    source = args.source or str(full if full.exists() else ROOT / "data" / "benchmarks" / spec.data_file)
    prepared = preprocess_rows(spec, load_rows(source, limit=args.items).rows)
    prompts = prepared.with_requests(0)
    model = load_local_model(args.model)
    print(f"{spec.title}: {len(prompts)} items from {source}, model {model.fingerprint}, batch size {args.batch_size}")
    print(f"{'mode':<14}{'path':<9}{'items/s':>9}{'passes/item':>13}{'seconds':>9}{'speed-up':>10}{'agree':>7}")
    for mode in ("letter", "loglikelihood"):
        strategy, prompt_format = MODES[mode], "chat" if mode == "letter" else "harness"
        if mode == "letter":
            naive_work = lambda: predict(strategy, model, prompts, prompt_format, spec, PredictionSettings(1))  # noqa: E731
        else:
            naive_work = lambda: [
                naive_loglikelihoods(model, loglikelihood_requests(p, prompt_format))  # noqa: E731
                for p in prompts
            ]
        batched, batched_s, batched_passes = timed(
            model, lambda: predict(strategy, model, prompts, prompt_format, spec, PredictionSettings(args.batch_size))
        )
        naive, naive_s, naive_passes = timed(model, naive_work)
        if mode == "letter":
            agree = sum(a.predicted == b.predicted for a, b in zip(batched, naive, strict=False)) / len(prompts)
        else:
            agree = sum(
                max(range(len(s)), key=s.__getitem__)
                == max(range(len(b.choice_loglikelihoods)), key=b.choice_loglikelihoods.__getitem__)
                for s, b in zip(naive, batched, strict=False)
            ) / len(prompts)
        n = len(prompts)
        print(f"{mode:<14}{'naive':<9}{n / naive_s:>9.2f}{naive_passes / n:>13.3f}{naive_s:>9.1f}{1:>10.2f}")
        print(
            f"{mode:<14}{'batched':<9}{n / batched_s:>9.2f}{batched_passes / n:>13.3f}{batched_s:>9.1f}"
            f"{naive_s / batched_s:>10.2f}{agree:>7.0%}"
        )


if __name__ == "__main__":
    main()
