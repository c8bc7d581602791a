"""Items per second and forward passes per item, batched vs a naive one-item-at-a-time loop.

    python speed/prediction_throughput.py --benchmark arc_easy --items 200
    python speed/prediction_throughput.py --benchmark mmlu --items 200 --source ../shared/benchmarks/mmlu.jsonl

Both runs use the same model and documents in the same process; the ratio is the figure to quote.
The naive letter loop (the letter solver at batch size 1) does one forward pass per item; the naive
log-likelihood loop (the harness's requests of each document) one full pass per choice. The batched
paths are the ones the solvers use (the shared-prefix cache: a prefix the prompts share, and an
item's context, encoded once and reused by every continuation or label).
"""

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_engine import DEFAULT_LOCAL_MODEL, load_local_model  # noqa: E402
from eval_platform.benchmarks.declarations import Benchmark, declared_benchmarks  # noqa: E402
from eval_platform.benchmarks.documents import Document, build_documents  # noqa: E402
from eval_platform.benchmarks.solvers import EvaluationJob, solver  # noqa: E402
from eval_platform.benchmarks.solvers.harness import built_requests  # noqa: E402
from eval_platform.common.ingestion import load_rows  # noqa: E402
from eval_platform.common.models import LoglikelihoodRequest  # noqa: E402
from eval_platform.environment import environment  # noqa: E402
from tests.reference_scoring import naive_loglikelihoods  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATASETS = {
    name: b
    for name, b in declared_benchmarks(environment().benchmarks_dir).items()
    if b.is_dataset and "letter" in b.solvers
}


def timed(model, work):
    model.forward_passes = 0
    start = time.perf_counter()
    result = work()
    return result, time.perf_counter() - start, model.forward_passes


def document_requests(benchmark: Benchmark, documents: Sequence[Document]) -> list[list[LoglikelihoodRequest]]:
    """Each document's harness requests (its task's own prompts, the declaration's shots), as the
    harness solver asks them."""
    job = EvaluationJob(benchmark, benchmark.evaluation_settings(), None, documents=documents)  # type: ignore[arg-type]
    return [[LoglikelihoodRequest(c, k) for c, k in asked] for asked, _ in built_requests(job).values()]


def argmax(values) -> int:
    return max(range(len(values)), key=values.__getitem__)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="arc_easy", choices=sorted(DATASETS))
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--source", help="Data file (default: the full split beside the project, else data/).")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--model", default=DEFAULT_LOCAL_MODEL)
    args = parser.parse_args()
    benchmark = DATASETS[args.benchmark]
    assert benchmark.dataset is not None and benchmark.dataset.file is not None
    shipped = Path(benchmark.dataset.file)
    full = ROOT.parent / "shared" / "benchmarks" / shipped.name
    source = args.source or str(full if full.exists() else shipped)
    documents = build_documents(benchmark, load_rows(source, limit=args.items).rows).documents
    model = load_local_model(args.model)
    settings = benchmark.evaluation_settings()
    job = EvaluationJob(benchmark, settings, model, args.batch_size, documents=documents)
    requests = document_requests(benchmark, documents)
    letter = solver("letter")
    work = {  # (naive, batched) per mode
        "letter": (
            lambda: letter.evaluate(EvaluationJob(benchmark, settings, model, 1, documents=documents)),
            lambda: letter.evaluate(job),
        ),
        "loglikelihood": (
            lambda: [naive_loglikelihoods(model, asked) for asked in requests],
            lambda: model.loglikelihoods([r for asked in requests for r in asked], args.batch_size),
        ),
    }
    print(
        f"{benchmark.title}: {len(documents)} items from {source}, model {model.fingerprint}, batch {args.batch_size}"
    )
    print(f"{'mode':<14}{'path':<9}{'items/s':>9}{'passes/item':>13}{'seconds':>9}{'speed-up':>10}{'agree':>7}")
    for mode, (naive_work, batched_work) in work.items():
        n = len(documents) if mode == "letter" else len(requests)  # a document of no harness task has no requests
        batched, batched_s, batched_passes = timed(model, batched_work)
        naive, naive_s, naive_passes = timed(model, naive_work)
        if mode == "letter":
            predicted = [[s.filtered_responses for s in run.samples] for run in (batched, naive)]
            agree = sum(a == b for a, b in zip(*predicted, strict=True)) / n
        else:
            offsets = [sum(len(asked) for asked in requests[:i]) for i in range(len(requests) + 1)]
            chosen = [argmax(batched[start:end]) for start, end in zip(offsets, offsets[1:], strict=False)]
            agree = sum(argmax(scores) == c for scores, c in zip(naive, chosen, strict=True)) / n
        print(f"{mode:<14}{'naive':<9}{n / naive_s:>9.2f}{naive_passes / n:>13.3f}{naive_s:>9.1f}{1:>10.2f}")
        print(
            f"{mode:<14}{'batched':<9}{n / batched_s:>9.2f}{batched_passes / n:>13.3f}{batched_s:>9.1f}"
            f"{naive_s / batched_s:>10.2f}{agree:>7.0%}"
        )


if __name__ == "__main__":
    main()
