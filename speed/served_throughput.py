"""Log-likelihoods from a served model (OpenAI-compatible completions over HTTP) against the same
model in process, and the gateway's concurrency against a server with a fixed latency.

    python speed/served_throughput.py --benchmark arc_easy --items 50 --batch-size 8 --latency 0.25

The server (tests/completions_server.py, a separate process) answers from the local SmolLM2 one
prompt at a time with a full forward pass, as a plain completions server does; in process, the
shared-prefix cache encodes each item's context once. Both at the same batch size, in the same run.
Then the gateway's concurrency: the same requests against a server with `--latency` seconds added
to every HTTP request, which answers them from memory after a first pass (so a request costs the
latency alone, as with a fast remote GPU server), with one request in flight, then eight. Last,
replicas: the same requests spread over 1, 2 and 4 such servers (`api_base` naming them all), one
request in flight per server, as a data-parallel evaluation over engine replicas runs.
"""

import argparse
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_engine import load_local_model  # noqa: E402
from eval_platform.benchmarks.documents import build_documents  # noqa: E402
from eval_platform.common.gateway import ModelGateway  # noqa: E402
from eval_platform.common.ingestion import load_rows  # noqa: E402
from eval_platform.common.models.served import ServedCompletionsModel  # noqa: E402
from speed.prediction_throughput import DATASETS, document_requests  # noqa: E402
from tests.processes import free_port, running  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def timed(function):
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmark", default="arc_easy", choices=sorted(DATASETS))
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "benchmark-key-not-a-secret")
    benchmark = DATASETS[args.benchmark]
    assert benchmark.dataset is not None and benchmark.dataset.file is not None
    documents = build_documents(benchmark, load_rows(benchmark.dataset.file, limit=args.items).rows).documents
    per_item = document_requests(benchmark, documents)  # the harness task's requests (its declared shots)
    requests = [r for item in per_item for r in item]
    model = load_local_model()
    print(f"{benchmark.title}: {len(per_item)} items ({len(requests)} requests), batch size {args.batch_size}")
    rows = []
    local, local_s = timed(lambda: model.loglikelihoods(requests, args.batch_size))
    rows.append(("in process (shared-prefix cache)", local_s, 0.0))
    port = free_port()
    command = [sys.executable, "-m", "tests.completions_server", "--port", str(port), "--memo"]
    with running(command, f"http://127.0.0.1:{port}/health", cwd=ROOT):
        served = ServedCompletionsModel(
            "served/smollm2", ModelGateway(api_base=f"http://127.0.0.1:{port}/v1", timeout_s=600), tokenizer=model
        )
        values, served_s = timed(lambda served=served: served.loglikelihoods(requests, args.batch_size))
        rows.append(
            ("served (computed by the server)", served_s, max(abs(a - b) for a, b in zip(values, local, strict=False)))
        )
    port = free_port()
    command += ["--latency", str(args.latency)]
    command[command.index("--port") + 1] = str(port)
    with running(command, f"http://127.0.0.1:{port}/health", cwd=ROOT):
        warm = ModelGateway(api_base=f"http://127.0.0.1:{port}/v1", max_concurrency=8, timeout_s=600)
        ServedCompletionsModel("served/smollm2", warm, tokenizer=model).loglikelihoods(requests, args.batch_size)
        for concurrency in (1, 8):
            gateway = ModelGateway(api_base=f"http://127.0.0.1:{port}/v1", max_concurrency=concurrency, timeout_s=600)
            served = ServedCompletionsModel("served/smollm2", gateway, tokenizer=model)
            values, served_s = timed(lambda served=served: served.loglikelihoods(requests, args.batch_size))
            rows.append(
                (
                    f"served from memory, {args.latency:.2f}s latency, concurrency {concurrency}",
                    served_s,
                    max(abs(a - b) for a, b in zip(values, local, strict=False)),
                )
            )
    print(f"{'path':<52}{'seconds':>9}{'items/s':>9}{'vs in process':>15}{'max|Δll|':>10}")
    for label, seconds, difference in rows:
        print(
            f"{label:<52}{seconds:>9.1f}{len(per_item) / seconds:>9.2f}{local_s / seconds:>14.2f}x{difference:>10.1e}"
        )
    one, eight = rows[2][1], rows[3][1]
    print(
        f"concurrency 8 vs 1 at {args.latency:.2f}s latency per request: {one / eight:.2f}x "
        f"({len(requests) // args.batch_size + 1} HTTP requests of up to {args.batch_size} prompts)"
    )
    replica_scaling(model, requests, len(per_item), args)


def replica_scaling(model, requests, items: int, args) -> None:
    """Items/s over 1, 2, 4 ... replicas that add `args.latency` to every request, one in flight each."""
    with ExitStack() as stack:
        bases = []
        for _ in range(max(args.replicas)):
            port = free_port()
            stack.enter_context(
                running(
                    [
                        sys.executable,
                        "-m",
                        "tests.completions_server",
                        "--port",
                        str(port),
                        "--memo",
                        "--latency",
                        str(args.latency),
                    ],
                    f"http://127.0.0.1:{port}/health",
                    cwd=ROOT,
                )
            )
            bases.append(f"http://127.0.0.1:{port}/v1")
        for base in bases:  # each server answers from memory afterwards
            warm = ModelGateway(api_base=base, max_concurrency=8, timeout_s=600)
            ServedCompletionsModel("served/smollm2", warm, tokenizer=model).loglikelihoods(requests, args.batch_size)
        print(f"\nreplicas ({args.latency:.2f}s latency per request, one request in flight per replica)")
        print(f"{'replicas':>8}{'seconds':>9}{'items/s':>9}{'vs 1':>8}")
        first = None
        for count in args.replicas:
            gateway = ModelGateway(api_base=",".join(bases[:count]), max_concurrency=1, timeout_s=600)
            served = ServedCompletionsModel("served/smollm2", gateway, tokenizer=model)
            served.check_server()  # once per model, outside the timing
            _, seconds = timed(lambda served=served: served.loglikelihoods(requests, args.batch_size))
            first = first or seconds
            print(f"{count:>8}{seconds:>9.1f}{items / seconds:>9.2f}{first / seconds:>7.2f}x")


if __name__ == "__main__":
    main()
