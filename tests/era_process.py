"""One era in its own process, so a test can kill it: the inputs, then the era partition.

    python -m tests.era_process WAREHOUSE ERA CONFIG_JSON [API_BASE]
"""

import json
import sys

from dagster import DagsterInstance, materialize

from eval_platform.assets.evolution import evolution_era, gene_pools, source_paragraphs
from eval_platform.resources import ModelGatewayResource, WarehouseResource


def main(warehouse: str, era: str, config: dict, api_base: str | None) -> int:
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("eras", [era])
    resources = {"warehouse": WarehouseResource(database=warehouse),
                 "gateway": ModelGatewayResource(api_base=api_base, timeout_s=5, max_retries=2, backoff_s=0.05)}
    assert materialize([source_paragraphs, gene_pools], resources=resources, instance=instance).success
    result = materialize([evolution_era], partition_key=era, resources=resources, instance=instance,
                         run_config={"ops": {"evolution_era": {"config": config}}}, raise_on_error=False)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None))
