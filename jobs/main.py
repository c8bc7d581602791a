"""`eval-platform`, the main command.

    eval-platform run                                   (every declared benchmark, whole)
    eval-platform run --limit 5 --max-gen-toks 96       (what `make run` does: the first 5 rows, 96 new tokens)
    eval-platform run --benchmarks arc_easy leaderboard_ifeval
    eval-platform run --protocol open_llm_leaderboard_v1
    eval-platform ui                                    (Dagster's UI and the sample viewer)
    eval-platform viewer                                (the sample viewer alone, on 127.0.0.1:3010)
    eval-platform move-warehouse --from data/warehouse.duckdb

`run` executes, in this process, the runs the nightly schedule and the sensors request: each
benchmark's inputs (`inputs_run_requests`), then on their success every roster model's evaluation
(`evaluation_run_requests`, as roster_evaluation_sensor requests them), the protocols and the
leaderboard, the blind evaluation's demo, judging (the shipped sets with their recorded judges, the
local model judging a slice of them and of MT-Bench, every judge against the humans), and each era
of data/evolution/eras/ (as the era sensor requests it). Runs are recorded in the Dagster instance at
$DAGSTER_HOME, so the UI shows them.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dagster import DagsterInstance, RunRequest

from eval_platform.benchmarks.declarations import Benchmark
from eval_platform.benchmarks.leaderboard import leaderboard_table
from eval_platform.benchmarks.protocols import Protocol, protocol_table
from eval_platform.benchmarks.store import ComparisonStore, EvaluationStore, LeaderboardStore
from eval_platform.blind.raters import demo_rater_fill
from eval_platform.blind.sheets import SHEET_FILE
from eval_platform.blind.store import BlindStore
from eval_platform.common.warehouse import export_tables, import_tables, registered_stores
from eval_platform.environment import PROJECT_ROOT, environment
from eval_platform.evolution.eras import era_files, era_run_config
from eval_platform.evolution.store import EraAnalysisStore
from eval_platform.judging.store import JudgingStore
from evaluation_assets.definitions import defs
from evaluation_assets.partitions import era_partitions
from schedules import add_missing, evaluation_run_requests, inputs_run_requests

# The console shows warnings (rejected rows) and the summary; every log line, the per-item reports
# included, is kept in the run's event log in the Dagster UI.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
HEARTBEAT_S = 30.0  # a running step's line, this often
NEWER_FILE = "newer version of DuckDB"
RESOURCES: Mapping[str, Any] = defs.resources or {}


class Runner:
    """Executes run requests in this process, one after another: a line as each starts (its number
    of those planned), one every `HEARTBEAT_S` seconds while it runs, and its outcome and time."""

    def __init__(self, instance: DagsterInstance, planned: int = 0) -> None:
        self.instance, self.failed, self.started = instance, [], time.perf_counter()
        self.planned, self.done = planned, 0

    def run(self, job_name: str, partition: str | None = None, ops: dict[str, Any] | None = None,
            tags: dict[str, str] | None = None) -> bool:  # fmt: skip
        start = time.perf_counter()
        label = f"{job_name} [{partition}]" if partition else job_name
        self.done += 1
        of = f" of {max(self.planned, self.done)}" if self.planned else ""
        print(f"{self.done}{of}: {label} ...", flush=True)
        with heartbeat(label, start):
            result = defs.resolve_job_def(job_name).execute_in_process(
                partition_key=partition,
                instance=self.instance,
                raise_on_error=False,
                run_config={**QUIET, "ops": ops or {}},
                tags=tags,
            )
        print(
            f"{self.done}{of}: {label}: {'success' if result.success else 'FAILED'} in "
            f"{time.perf_counter() - start:.1f} s ({time.perf_counter() - self.started:.0f} s in all)",
            flush=True,
        )
        if not result.success:
            self.failed.append(label)
        return result.success

    def request(self, request: RunRequest, ops: dict[str, Any] | None = None) -> bool:
        config_ops = (request.run_config or {}).get("ops", {})
        partition = request.partition_key
        return self.run(str(request.job_name), str(partition) if partition else None, {**config_ops, **(ops or {})},
                        dict(request.tags))  # fmt: skip


@contextmanager
def heartbeat(label: str, start: float) -> Iterator[None]:
    """While in use, a line every HEARTBEAT_S seconds: the step still running, and for how long."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            print(f"    {label}: running, {time.perf_counter() - start:.0f} s so far", flush=True)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def quiet_libraries() -> None:
    """The libraries' informational warnings (lm-evaluation-harness's on every task it builds,
    transformers' and datasets' progress) stay out of the console; the run's event log in the
    Dagster UI keeps every line of its own."""
    for name in ("lm_eval", "transformers", "datasets", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)


def evaluate(
    runner: Runner,
    benchmarks: Sequence[str],
    limit: int | None,
    job: str | None = None,
    max_gen_toks: int | None = None,
) -> None:
    """Each benchmark's inputs, then every roster model on it, as the nightly refresh and
    roster_evaluation_sensor run them (`job`: a protocol's job instead of model_evaluation), on the
    first `limit` documents, generation tasks within `max_gen_toks` (each result's settings say so)."""
    roster = RESOURCES["roster"]
    protocols, entries = roster.protocols(), roster.entries()
    for inputs in inputs_run_requests(runner.instance, list(benchmarks), "main"):
        name = str(inputs.partition_key)
        if not runner.request(inputs, {"benchmark_raw_rows": {"config": {"limit": limit}}} if limit else None):
            continue
        settings: dict[str, Any] = {"limit": limit} if limit else {}
        if max_gen_toks:  # kept by the evaluation plan for a generation task only
            settings["max_gen_toks"] = max_gen_toks
        ops = {"benchmark_evaluation": {"config": settings}} if settings else None
        for request in evaluation_run_requests(runner.instance, entries, [name], protocols, "main"):
            runner.request(request._replace(job_name=job) if job else request, ops)


def runnable(protocol: Protocol, declared: dict[str, Benchmark]) -> list[str]:
    """The protocol's benchmarks that can run here, saying why each other one is skipped."""
    offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1"
    names = []
    for task in protocol.tasks:
        benchmark = declared.get(task.benchmark)
        if benchmark is None and offline:
            print(f"{protocol.name} [{task.name}]: skipped: {task.unavailable_offline or 'not declared'} (with hub "
                  "access, run it without HF_HUB_OFFLINE: the harness loads it by its hub id)", flush=True)  # fmt: skip
        elif benchmark is not None and task.num_fewshot and benchmark.fewshot and not benchmark.fewshot.file:
            print(f"{protocol.name} [{task.name}]: skipped: its few-shot split ({benchmark.fewshot.describe()}) is "
                  "not shipped; with hub access, run benchmark_inputs with benchmark_fewshot_rows' source set to it, "
                  f"then the job {protocol.name}", flush=True)  # fmt: skip
        else:
            names.append(task.benchmark)
    return names


def summary(benchmarks: Sequence[str] | None = None) -> None:
    """The results, comparisons and leaderboard (of `benchmarks` only, where given)."""
    warehouse = RESOURCES["warehouse"]
    declared = RESOURCES["roster"].benchmarks()
    with warehouse.store(EvaluationStore) as store:
        results = store.result_table(benchmarks)
    with warehouse.store(ComparisonStore) as store:
        comparisons = store.comparison_table()
    with warehouse.store(LeaderboardStore) as store:
        headlines = [h for h in store.load_headlines() if benchmarks is None or h["benchmark"] in benchmarks]
        averages = [r for r in store.load_protocol_scores() if r["task"] == "average"]
    shown = {name: b for name, b in declared.items() if benchmarks is None or name in benchmarks}
    print(f"\nResults ({environment().warehouse}):\n{results.to_markdown(index=False)}")
    if benchmarks is None:
        print(
            f"\nModel against its baseline (a minus b, on the same documents):\n{comparisons.to_markdown(index=False)}"
        )
    board = leaderboard_table(headlines, averages, shown)
    print(f"\nLeaderboard (headline score [95% interval]):\n{board.to_markdown(index=False, disable_numparse=True)}")


def run(args: argparse.Namespace) -> int:
    quiet_libraries()
    roster = RESOURCES["roster"]
    declared, protocols = roster.benchmarks(), roster.protocols()
    entries = roster.entries()
    evaluations = sum(
        1 + sum(entry.evaluates(name, protocols) for entry in entries.values()) for name in args.benchmarks or declared
    )
    runner = Runner(
        DagsterInstance.get(),
        evaluations + (1 if args.benchmarks or args.protocol else 6 + len(era_files(environment().eras_dir))),
    )
    if args.benchmarks:
        unknown = [name for name in args.benchmarks if name not in declared]
        if unknown:
            print(f"unknown benchmark(s) {', '.join(unknown)}: declared in {environment().benchmarks_dir} are "
                  f"{', '.join(declared)}", file=sys.stderr)  # fmt: skip
            return 2
        evaluate(runner, args.benchmarks, args.limit, max_gen_toks=args.max_gen_toks)
        runner.run("score_protocols")
        summary(args.benchmarks)
        return 1 if runner.failed else 0
    if args.protocol:
        protocol = protocols[args.protocol]
        evaluate(runner, runnable(protocol, declared), args.limit, job=protocol.name)
        runner.run("score_protocols")
        with RESOURCES["warehouse"].store(LeaderboardStore) as store:
            rows = store.load_protocol_scores(protocol.name)
        print(f"\n{protocol.title} ({environment().warehouse}):\n{protocol_table(rows).to_markdown(index=False)}")
        return 1 if runner.failed else 0
    evaluate(runner, list(declared), args.limit, max_gen_toks=args.max_gen_toks)
    runner.run("score_protocols")
    runner.run("blind_evaluation_sheet")
    blind = environment().blind_dir  # DEMO: a programmatic stand-in for a human rater (it says so in Notes)
    demo_rater_fill(blind / "issued" / SHEET_FILE, blind / "filled" / "demo-rater.xlsx")
    runner.run("blind_evaluation_tally")
    runner.run("judging_inputs")  # the judges measured (and an era's panel flagged) before the eras run
    runner.run("judging")
    runner.run("evolution_inputs")
    for era, path in era_files(environment().eras_dir).items():  # as the era sensor requests them
        add_missing(runner.instance, era_partitions, [era])
        runner.run("prompt_evolution_era", era, era_run_config(path)["ops"])
    summary()
    warehouse = RESOURCES["warehouse"]
    with warehouse.store(EraAnalysisStore) as store:
        era_stats = store.load_generation_stats()[
            ["era", "generation", "population", "mean_fitness", "max_fitness", "calls", "cache_hits"]
        ]
    with warehouse.store(BlindStore) as store:
        sentence = store.pooled_sentence() or "(no tally)"
    with warehouse.store(JudgingStore) as store:
        judges = store.judge_vs_human_table()
    print(f"\nPrompt evolution, fitness per generation:\n{era_stats.round(4).to_markdown(index=False)}")
    print(f"\nBlind evaluation (demo rater): {sentence}")
    print("\nJudges against humans (the local model judged a few items; docs/judging.md has the whole table):")
    print(judges.to_markdown(index=False))
    return 1 if runner.failed else 0


def ui(args: argparse.Namespace) -> int:
    """Dagster's UI (and its daemon) on this code location, and beside it the sample viewer that
    its materialisations link to, until interrupted (Ctrl-C, or SIGTERM): both stop together."""
    command = [str(Path(sys.executable).with_name("dagster")), "dev", "-w", str(PROJECT_ROOT / "workspace.yaml")]
    settings = environment()
    address = ["--host", settings.viewer_host, "--port", str(settings.viewer_port)]
    # Handlers of its own (which a child does not inherit: it starts with the default one, even where
    # this process was started with SIGINT ignored, in the background): a SIGTERM ends both as Ctrl-C does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    viewer_process = subprocess.Popen([sys.executable, "-m", "jobs.main", "viewer", *address], cwd=PROJECT_ROOT)
    dagster = None
    try:
        dagster = subprocess.Popen(command + (["-p", str(args.port)] if args.port else []))
        return dagster.wait()
    except KeyboardInterrupt:  # a terminal's Ctrl-C reached every process of its group
        return 130
    finally:
        # Dagster's UI stops its webserver, daemon and code servers on SIGINT; the viewer on SIGTERM
        for process, stop in ((dagster, signal.SIGINT), (viewer_process, signal.SIGTERM)):
            if process is not None and process.poll() is None:
                process.send_signal(stop)
        for process in (dagster, viewer_process):
            if process is None:
                continue
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def viewer(args: argparse.Namespace) -> int:
    """The sample viewer alone, reading the configured warehouse, until interrupted."""
    from eval_platform.viewer.app import serve

    settings = environment()
    host, port = args.host or settings.viewer_host, args.port or settings.viewer_port
    print(f"The sample viewer of {settings.warehouse}: http://{host}:{port}", flush=True)
    serve(host, port)
    return 0


def move_warehouse(args: argparse.Namespace) -> int:
    """Move a warehouse into the configured one (a DuckDB file into a team's lake), every row kept;
    or export the configured one's tables as Parquet. The team's install runs DuckDB 1.4.4
    (DuckLake's), which cannot open a file written by DuckDB 2.0: export such a file first in the
    default install, and move the folder."""
    warehouse = RESOURCES["warehouse"]
    stores = registered_stores()
    if args.export:
        with warehouse.get_connection() as conn:
            counts = export_tables(conn, stores, args.export)
        print(
            f"Exported {sum(counts.values())} rows of {len(counts)} tables from {warehouse.database} to {args.export}"
        )
        return 0
    if not Path(args.source).is_dir():
        try:  # migrated to this version's schema, under the file's lock
            with type(warehouse)(database=args.source).get_connection():
                pass
        except Exception as error:
            if NEWER_FILE not in str(error):
                raise
            print(f"{args.source} was written by a newer DuckDB than this install's: in the install that wrote it "
                  f"(.venv), run `eval-platform move-warehouse --export FOLDER` with EVAL_WAREHOUSE={args.source}, "
                  "then here `eval-platform move-warehouse --from FOLDER`.", file=sys.stderr)  # fmt: skip
            return 2
    with warehouse.get_connection() as conn:
        counts = import_tables(conn, stores, args.source)
    print(f"Moved {sum(counts.values())} rows of {len(counts)} tables from {args.source} into {warehouse.database}:")
    for table, rows in counts.items():
        print(f"  {table}: {rows}")
    return 0


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="eval-platform", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    commands = main.add_subparsers(dest="command", required=True)
    runs = commands.add_parser("run", help="Materialise the whole graph offline (the nightly refresh's runs).")
    chosen = runs.add_mutually_exclusive_group()
    chosen.add_argument(
        "--protocol", help="A declared protocol's benchmarks (with its solver and shots) and its score."
    )
    chosen.add_argument("--benchmarks", nargs="+", metavar="NAME", help="Only these benchmarks, and their leaderboard.")
    runs.add_argument("--limit", type=int, help="Only each benchmark's first N rows (a quick run).")
    runs.add_argument(
        "--max-gen-toks", type=int, help="Generation tasks within N new tokens each (a quick run; its results say so)."
    )
    runs.set_defaults(handler=run)
    shown = commands.add_parser("ui", help="Dagster's UI on this code location.")
    shown.add_argument("--port", type=int, help="The UI's port (Dagster's default 3000).")
    shown.set_defaults(handler=ui)
    viewed = commands.add_parser("viewer", help="The sample viewer alone (every answer behind every score).")
    viewed.add_argument("--host", help="The interface to listen on (default EVAL_VIEWER_HOST, else 127.0.0.1).")
    viewed.add_argument("--port", type=int, help="The port (default EVAL_VIEWER_PORT, else 3010).")
    viewed.set_defaults(handler=viewer)
    moves = commands.add_parser("move-warehouse", help="Move a warehouse into the configured one, every row kept.")
    action = moves.add_mutually_exclusive_group(required=True)
    action.add_argument("--from", dest="source", help="A warehouse file, or a folder --export wrote.")
    action.add_argument("--export", help="A folder to write the configured warehouse's tables to, as Parquet.")
    moves.set_defaults(handler=move_warehouse)
    return main


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
