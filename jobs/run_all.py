"""The main command: materialise the whole graph offline on the embedded defaults, then print results.

    python -m jobs.run_all        (what `make run` does)

Runs are recorded in the Dagster instance at $DAGSTER_HOME, so `dagster dev` shows them afterwards.
"""

import sys

from dagster import DagsterInstance

from evaluation_assets.benchmarks import benchmark_partitions
from evaluation_assets.definitions import defs
from evaluation_assets.blind_evaluation import SHEET_FILE
from evaluation_logic.blind_evaluation import demo_rater_fill
from resources import BLIND_EVAL_DIR, DEFAULT_WAREHOUSE

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
    with defs.resources["warehouse"].get_connection() as conn:
        table = conn.execute("""
            SELECT benchmark, mode || ' / ' || prompt_format || ' / ' || metric AS metric, n,
                   round(accuracy, 3) AS accuracy,
                   '[' || round(ci_low, 3) || ', ' || round(ci_high, 3) || ']' AS ci95
            FROM scores ORDER BY benchmark, metric""").df()
        era = conn.execute("""SELECT era, generation, population, round(mean_fitness, 4) AS mean_fitness,
                                     round(max_fitness, 4) AS max_fitness FROM generation_stats
                              ORDER BY era, generation""").df()
        (sentence,) = conn.execute("SELECT sentence FROM blind_results WHERE scope = 'pooled' "
                                   "ORDER BY sheet_id LIMIT 1").fetchone() or ("(no tally)",)
    print(f"\nAccuracy ({DEFAULT_WAREHOUSE}):\n{table.to_markdown(index=False)}")
    print(f"\nPrompt evolution, fitness per generation:\n{era.to_markdown(index=False)}")
    print(f"\nBlind evaluation (demo rater): {sentence}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
