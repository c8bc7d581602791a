"""The main command: materialise the whole graph offline on the embedded defaults, then print results.

    python -m jobs.run_all        (what `make run` does; the same as python -m eval_platform.main)

Runs are recorded in the Dagster instance at $DAGSTER_HOME, so `dagster dev` shows them afterwards.
"""

import sys

from dagster import DagsterInstance

from eval_platform.assets.blind_evaluation import SHEET_FILE
from eval_platform.core.blind import demo_rater_fill
from eval_platform.definitions import defs
from eval_platform.partitions import benchmark_partitions
from eval_platform.resources import BLIND_EVAL_DIR, DEFAULT_WAREHOUSE
from eval_platform.stores import BenchmarkStore, BlindStore, EvolutionStore

# The console shows warnings (rejected rows) and the summary; every log line, the per-item reports
# included, is kept in the run's event log in the Dagster UI.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def main() -> int:
    instance = DagsterInstance.get()
    failed = []

    def run(job_name: str, partition: str | None = None) -> None:
        result = defs.resolve_job_def(job_name).execute_in_process(
            partition_key=partition, instance=instance, raise_on_error=False, run_config=QUIET)
        label = f"{job_name} [{partition}]" if partition else job_name
        print(f"{label}: {'success' if result.success else 'FAILED'}", flush=True)
        if not result.success:
            failed.append(label)

    for partition in benchmark_partitions.get_partition_keys():
        run("benchmark_refresh", partition)
    run("prompt_evolution_era")
    run("blind_evaluation_sheet")
    # DEMO: a programmatic stand-in for a human rater fills the issued sheet (it says so in Notes).
    demo_rater_fill(BLIND_EVAL_DIR / "issued" / SHEET_FILE, BLIND_EVAL_DIR / "filled" / "demo-rater.xlsx")
    run("blind_evaluation_tally")
    warehouse = defs.resources["warehouse"]
    with warehouse.store(BenchmarkStore) as store:
        table = store.score_table()
    with warehouse.store(EvolutionStore) as store:
        era = store.load_generation_stats()[["era", "generation", "population", "mean_fitness", "max_fitness"]]
    with warehouse.store(BlindStore) as store:
        sentence = store.pooled_sentence() or "(no tally)"
    print(f"\nAccuracy ({DEFAULT_WAREHOUSE}):\n{table.to_markdown(index=False)}")
    print(f"\nPrompt evolution, fitness per generation:\n{era.round(4).to_markdown(index=False)}")
    print(f"\nBlind evaluation (demo rater): {sentence}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
