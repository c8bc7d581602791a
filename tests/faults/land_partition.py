"""One benchmark partition's rows and prompts, materialised in its own process (a parallel run).

python -m tests.faults.land_partition WAREHOUSE BENCHMARK
"""

import sys

from eval_platform.resources import WarehouseResource
from tests.evaluation import INPUTS, materialize_configured, with_partitions

if __name__ == "__main__":
    path, benchmark = sys.argv[1:]
    result = materialize_configured(
        INPUTS,
        {"warehouse": WarehouseResource(database=path, lock_timeout_s=120)},
        partition_key=benchmark,
        instance=with_partitions(None, benchmark),
    )
    sys.exit(0 if result.success else 1)
