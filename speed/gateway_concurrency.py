"""One generation of prompt evolution through the gateway: sequential (as the fitness document does it) vs concurrent.

    python speed/gateway_concurrency.py --prompts 40 --latency 0.25

Each prompt is 1 compression + 3 judges (4 HTTP calls) against an OpenAI-compatible server on
127.0.0.1 that answers every call after a fixed latency. Sequential = the gateway limited to one
call in flight; concurrent = all judges of a prompt in parallel and all prompts at once within
--concurrency. Same code path, same server, same run.
"""

import argparse
import asyncio
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_platform.common.gateway import ModelGateway  # noqa: E402
from eval_platform.common.models import open_model  # noqa: E402
from eval_platform.evolution.genetic import TAGS, EraSettings, evaluate_prompt_fitness  # noqa: E402
from eval_platform.evolution.judging import panel_judge  # noqa: E402
from tests.openai_stub_server import StubServer  # noqa: E402

PARAGRAPH = " ".join(f"word{i}" for i in range(120))


async def generation(gateway: ModelGateway, prompts: int) -> list[dict]:
    config = EraSettings(
        population_size=prompts,
        generations=0,
        compression_model="openai/compressor",
        judge_panel={name: "openai/judge-fast" for name in ("openai", "claude", "gemini")},
    )
    rng = random.Random(0)
    genomes = [{tag: f"{tag} variant {rng.randrange(5)}" for tag in TAGS} for _ in range(prompts)]
    judges = {name: panel_judge(open_model(model, gateway=gateway)) for name, model in config.judge_panel.items()}
    compressor = open_model(config.compression_model, gateway=gateway)
    return await asyncio.gather(
        *(evaluate_prompt_fitness(compressor, judges, g, PARAGRAPH, config, lambda t: len(t.split())) for g in genomes)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=40)
    parser.add_argument("--latency", type=float, default=0.25, help="Seconds the server takes per call.")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "benchmark-key-not-a-secret")
    with StubServer(latency_s=args.latency) as server:
        timings = {}
        for label, limit in (("sequential", 1), ("concurrent", args.concurrency)):
            gateway = ModelGateway(api_base=server.api_base, max_concurrency=limit, timeout_s=30)
            start = time.perf_counter()
            results = asyncio.run(generation(gateway, args.prompts))
            timings[label] = time.perf_counter() - start
            failed = sum(v["error"] is not None for r in results for v in r["judge_details"].values())
            print(
                f"{label:<11} {args.prompts} prompts x 4 calls at {args.latency:.2f}s: {timings[label]:7.2f}s "
                f"({4 * args.prompts / timings[label]:6.1f} calls/s, {failed} judge failures)"
            )
    print(
        f"speed-up concurrent/sequential: {timings['sequential'] / timings['concurrent']:.1f}x "
        f"(ideal with unlimited concurrency: {4 * args.prompts / 2:.0f}x, the compression must precede its judges)"
    )


if __name__ == "__main__":
    main()
