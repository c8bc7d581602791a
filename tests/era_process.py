"""One era in its own process, so a test can kill it: the inputs, then the era partition.

    python -m tests.era_process WAREHOUSE ERA CONFIG_JSON [API_BASE]

With EVAL_TEST_DIE_AFTER_EVALUATIONS=N set, the process SIGKILLs itself right after its N-th
prompt evaluation completes: with N = population + 1, in the middle of generation 1 (generation 0
checkpointed, none of generation 1 stored), however fast or slow the machine.
"""

import json
import os
import signal
import sys

from dagster import DagsterInstance, materialize

from eval_platform.evaluation_assets.evolution.assets import evolution_era, gene_pools, source_paragraphs
from eval_platform.evolution import genetic
from eval_platform.resources import LanguageModelResource, ModelGatewayResource, WarehouseResource
from tests.openai_stub_server import CLIENT_TIMEOUT_S

DIE_AFTER_EVALUATIONS = "EVAL_TEST_DIE_AFTER_EVALUATIONS"


def die_after_evaluations(count: int) -> None:
    evaluate, completed = genetic.evaluate_prompt_fitness, [0]

    async def evaluate_then_maybe_die(*args, **kwargs):
        result = await evaluate(*args, **kwargs)
        completed[0] += 1
        if completed[0] == count:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    genetic.evaluate_prompt_fitness = evaluate_then_maybe_die


def main(warehouse: str, era: str, config: dict, api_base: str | None) -> int:
    if os.environ.get(DIE_AFTER_EVALUATIONS):
        die_after_evaluations(int(os.environ[DIE_AFTER_EVALUATIONS]))
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("eras", [era])
    # The local model answers in this process: on a loaded machine a call can take many seconds.
    resources = {
        "warehouse": WarehouseResource(database=warehouse),
        "evaluation_model": LanguageModelResource(),
        "gateway": ModelGatewayResource(api_base=api_base, timeout_s=CLIENT_TIMEOUT_S, max_retries=2, backoff_s=0.05),
    }
    assert materialize([source_paragraphs, gene_pools], resources=resources, instance=instance).success
    result = materialize(
        [evolution_era],
        partition_key=era,
        resources=resources,
        instance=instance,
        run_config={"ops": {"evolution_era": {"config": config}}},
        raise_on_error=False,
    )
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None))
