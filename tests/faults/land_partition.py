"""One benchmark partition's rows and prompts, materialised in its own process (a parallel run).

    python -m tests.faults.land_partition WAREHOUSE BENCHMARK
"""

import sys

from dagster import DagsterInstance, materialize

from eval_platform.benchmarks.assets import benchmark_fewshot_rows, benchmark_prompts, benchmark_raw_rows
from eval_platform.common.resources import WarehouseResource

if __name__ == "__main__":
    path, benchmark = sys.argv[1:]
    result = materialize([benchmark_raw_rows, benchmark_fewshot_rows, benchmark_prompts], partition_key=benchmark,
                         resources={"warehouse": WarehouseResource(database=path, lock_timeout_s=120)},
                         instance=DagsterInstance.ephemeral())
    sys.exit(0 if result.success else 1)
