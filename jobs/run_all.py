"""The main command: materialise the whole graph offline on the embedded defaults, then print results.

    python -m jobs.run_all        (what `make run` does)

Runs are recorded in the Dagster instance at $DAGSTER_HOME, so `dagster dev` shows them afterwards.
"""

import sys

from dagster import DagsterInstance

from evaluation_assets.benchmarks import benchmark_partitions
from evaluation_assets.definitions import defs
from resources import DEFAULT_WAREHOUSE

# The console shows warnings (rejected rows) and the summary; every log line, the per-item reports
# included, is kept in the run's event log in the Dagster UI.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def main() -> int:
    instance = DagsterInstance.get()
    failed = []
    for partition in benchmark_partitions.get_partition_keys():
        result = defs.resolve_job_def("benchmark_refresh").execute_in_process(
            partition_key=partition, instance=instance, raise_on_error=False, run_config=QUIET
        )
        print(f"benchmark_refresh [{partition}]: {'success' if result.success else 'FAILED'}", flush=True)
        if not result.success:
            failed.append(partition)
    with defs.resources["warehouse"].get_connection() as conn:
        table = conn.execute("""
            SELECT benchmark, mode || ' / ' || prompt_format || ' / ' || metric AS metric, n,
                   round(accuracy, 3) AS accuracy,
                   '[' || round(ci_low, 3) || ', ' || round(ci_high, 3) || ']' AS ci95
            FROM scores ORDER BY benchmark, metric""").df()
    print(f"\nAccuracy ({DEFAULT_WAREHOUSE}):\n{table.to_markdown(index=False)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
