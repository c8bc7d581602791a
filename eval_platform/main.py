"""The main command: materialise the whole graph offline on the embedded defaults (every model of the
roster in data/roster/ on its benchmarks), then print the results and the leaderboard.

    python -m jobs.run_all                                      (what `make run` does: zero-shot)
    python -m jobs.run_all --limit 5                            (the same on each benchmark's first 5 rows)
    python -m jobs.run_all --protocol open_llm_leaderboard_v1   (a named protocol: few-shot)
    python -m jobs.run_all --protocol open_llm_leaderboard_v2   (lm-evaluation-harness's leaderboard tasks)
    python -m jobs.run_all --benchmarks arc_easy leaderboard_ifeval   (only these, of either kind)

Runs are recorded in the Dagster instance at $DAGSTER_HOME, so `dagster dev` shows them afterwards.
"""

import argparse
import os
import sys
import time

from dagster import DagsterInstance

from eval_platform.benchmarks.harness_tasks import declarations_folder, load_declarations
from eval_platform.benchmarks.leaderboard import PRIMARY_PROTOCOL, leaderboard_table, short_fingerprint
from eval_platform.benchmarks.leaderboard_v2 import PROTOCOL as V2_PROTOCOL
from eval_platform.benchmarks.leaderboard_v2 import TITLE as V2_TITLE
from eval_platform.benchmarks.leaderboard_v2 import V2_TASKS
from eval_platform.benchmarks.protocols import PROTOCOLS
from eval_platform.benchmarks.resources import ROSTER_DIR
from eval_platform.benchmarks.schedules import evaluation_run_requests
from eval_platform.benchmarks.specs import BENCHMARKS
from eval_platform.benchmarks.store import BenchmarkStore
from eval_platform.blind.assets import SHEET_FILE
from eval_platform.blind.raters import demo_rater_fill
from eval_platform.blind.store import BlindStore
from eval_platform.common.resources import BLIND_EVAL_DIR, DEFAULT_WAREHOUSE
from eval_platform.definitions import defs
from eval_platform.evolution.partitions import era_partitions
from eval_platform.evolution.sensors import era_files, era_run_config
from eval_platform.evolution.store import EvolutionStore

# The console shows warnings (rejected rows) and the summary; every log line, the per-item reports
# included, is kept in the run's event log in the Dagster UI.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--protocol",
        choices=sorted([*PROTOCOLS, V2_PROTOCOL]),
        help="Run a named protocol's benchmarks (with its shots) and its average instead.",
    )
    chosen.add_argument(
        "--benchmarks",
        nargs="+",
        metavar="NAME",
        help="Run only these benchmarks, of either kind (a spec's, or one declared in data/harness/), "
        "for each roster model evaluated on them, and show their leaderboard.",
    )
    parser.add_argument("--limit", type=int, help="Only each benchmark's first N rows (a quick run).")
    args = parser.parse_args(argv)
    declared = load_declarations() if args.benchmarks or args.protocol == V2_PROTOCOL else {}
    unknown = [name for name in args.benchmarks or () if name not in BENCHMARKS and name not in declared]
    if unknown:
        parser.error(
            f"unknown benchmark(s) {', '.join(unknown)}: a spec's ({', '.join(BENCHMARKS)}) or one declared "
            f"in {declarations_folder()} ({', '.join(declared) or 'none'})"
        )
    rows = {"benchmark_raw_rows": {"config": {"limit": args.limit}}} if args.limit else {}
    instance = DagsterInstance.get()
    roster = defs.resources["roster"].entries()
    failed, started = [], time.perf_counter()

    def run(job_name: str, partition: str | None = None, ops: dict | None = None) -> bool:
        start = time.perf_counter()
        result = defs.resolve_job_def(job_name).execute_in_process(
            partition_key=partition, instance=instance, raise_on_error=False, run_config={**QUIET, "ops": ops or {}}
        )
        label = f"{job_name} [{partition}]" if partition else job_name
        print(
            f"{label}: {'success' if result.success else 'FAILED'} in {time.perf_counter() - start:.1f} s "
            f"({time.perf_counter() - started:.0f} s in all)",
            flush=True,
        )
        if not result.success:
            failed.append(label)
        return result.success

    def evaluate_roster(job_name: str, benchmarks: list[str]) -> None:
        """Each spec's inputs, then every roster model on it, as the nightly refresh runs them."""
        for benchmark in benchmarks:
            requests = evaluation_run_requests(instance, roster, [benchmark], "main")  # the partitions added
            if run("benchmark_inputs", benchmark, rows):
                for request in requests:
                    run(job_name, request.partition_key)

    def evaluate_harness(benchmarks: list[str]) -> None:
        """Every roster model on each harness benchmark, as the nightly refresh runs them."""
        ops = {"harness_evaluation": {"config": {"limit": args.limit}}} if args.limit else {}
        for request in evaluation_run_requests(instance, roster, benchmarks, "main"):
            run("model_evaluation", request.partition_key, ops)

    warehouse = defs.resources["warehouse"]
    if args.benchmarks:
        evaluate_roster("model_evaluation", [name for name in args.benchmarks if name in BENCHMARKS])
        evaluate_harness([name for name in args.benchmarks if name in declared])
        run("score_protocols")
        with warehouse.store(BenchmarkStore) as store:
            board = leaderboard_table(
                store.load_headlines(), store.load_protocol_averages(PRIMARY_PROTOCOL), benchmarks=args.benchmarks
            )
        print(
            f"\nLeaderboard ({DEFAULT_WAREHOUSE}; headline score [95% interval]):\n"
            f"{board.to_markdown(index=False, disable_numparse=True)}"
        )
        return 1 if failed else 0
    if args.protocol == V2_PROTOCOL:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1"
        for task in V2_TASKS:
            if task.task not in declared and offline:
                print(
                    f"{V2_PROTOCOL} [{task.task}]: skipped: {task.unavailable_offline} (with hub access, run it "
                    f"without HF_HUB_OFFLINE: the harness loads it by its hub id)",
                    flush=True,
                )
        evaluate_harness([task.task for task in V2_TASKS if task.task in declared or not offline])
        run("score_protocols")
        with warehouse.store(BenchmarkStore) as store:
            results = store.load_normalized_scores(V2_PROTOCOL)
        shown = results[["model", "benchmark", "metric", "raw", "normalized", "status"]].round(4)
        print(
            f"\n{V2_TITLE} ({DEFAULT_WAREHOUSE}; raw score, and normalised between the random baseline and 1 "
            f"as 0 to 100):\n{shown.to_markdown(index=False)}"
        )
        return 1 if failed else 0
    if args.protocol:
        protocol = PROTOCOLS[args.protocol]
        benchmarks = []
        for task in protocol.tasks:
            fewshot = BENCHMARKS[task.benchmark].fewshot
            if task.num_fewshot and fewshot.data_file is None:
                print(
                    f"{protocol.name} [{task.benchmark}]: skipped: its few-shot split ({fewshot.hub_path} "
                    f"{fewshot.hub_split}) is not shipped; with hub access, run benchmark_inputs with "
                    f"benchmark_fewshot_rows' source set to it, then the job {protocol.name}",
                    flush=True,
                )
            else:
                benchmarks.append(task.benchmark)
        evaluate_roster(protocol.name, benchmarks)
        run("score_protocols")
        with warehouse.store(BenchmarkStore) as store:
            results = store.load_protocol_results(protocol.name)
        shown = results.assign(model_fingerprint=results["model_fingerprint"].map(short_fingerprint))[
            ["model", "model_fingerprint", "benchmark", "num_fewshot", "metric", "n", "accuracy", "status"]
        ]
        print(f"\n{protocol.title} ({DEFAULT_WAREHOUSE}):\n{shown.round(4).to_markdown(index=False)}")
        return 1 if failed else 0

    evaluate_roster("model_evaluation", list(BENCHMARKS))
    run("score_protocols")
    run("evolution_inputs")
    for era, path in era_files().items():  # each era of data/evolution/eras/, as the era sensor runs it
        if era not in instance.get_dynamic_partitions(era_partitions.name):
            instance.add_dynamic_partitions(era_partitions.name, [era])
        run("prompt_evolution_era", era, era_run_config(path)["ops"])
    run("blind_evaluation_sheet")
    # DEMO: a programmatic stand-in for a human rater fills the issued sheet (it says so in Notes).
    demo_rater_fill(BLIND_EVAL_DIR / "issued" / SHEET_FILE, BLIND_EVAL_DIR / "filled" / "demo-rater.xlsx")
    run("blind_evaluation_tally")
    with warehouse.store(BenchmarkStore) as store:
        table = store.score_table()
        comparisons = store.comparison_table()
        board = leaderboard_table(store.load_headlines(), store.load_protocol_averages(PRIMARY_PROTOCOL))
    with warehouse.store(EvolutionStore) as store:
        era = store.load_generation_stats()[
            ["era", "generation", "population", "mean_fitness", "max_fitness", "calls", "cache_hits"]
        ]
    with warehouse.store(BlindStore) as store:
        sentence = store.pooled_sentence() or "(no tally)"
    print(f"\nAccuracy ({DEFAULT_WAREHOUSE}):\n{table.to_markdown(index=False)}")
    print(f"\nModel against its baseline (a minus b, on the same items):\n{comparisons.to_markdown(index=False)}")
    print(f"\nPrompt evolution, fitness per generation:\n{era.round(4).to_markdown(index=False)}")
    print(f"\nBlind evaluation (demo rater): {sentence}")
    print(
        f"\nLeaderboard (the roster, {ROSTER_DIR}; headline score [95% interval]):\n"
        f"{board.to_markdown(index=False, disable_numparse=True)}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
