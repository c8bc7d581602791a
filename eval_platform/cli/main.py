"""`eval-platform`, the main command.

    eval-platform run                                   (every declared benchmark, whole)
    eval-platform run --limit 5 --max-gen-toks 96       (what `make run` does: the first 5 rows, 96 new tokens)
    eval-platform run --benchmarks arc_easy leaderboard_ifeval
    eval-platform run --protocol open_llm_leaderboard_v1
    eval-platform run --tables                          (every table at the end, not the one-screen summary)
    eval-platform results                               (every table of the warehouse, at any time)
    eval-platform ui                                    (Dagster's UI and the sample viewer)
    eval-platform viewer                                (the sample viewer alone, on 127.0.0.1:3010)
    eval-platform move-warehouse --from data/warehouse.duckdb
    eval-platform migrate                               (a team's storage, once, before any host starts)

`run` walks the demo's steps (demo.py's DEMO) in this process: each asks the planner
for the runs its production trigger requests (the nightly schedule, the sensors, the eager
automation conditions, a launch by hand), and each successful run is followed by the runs the
sensors follow it with. Runs are recorded in the Dagster instance at $DAGSTER_HOME, so the UI
shows them.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, cast, overload

from dagster import DagsterInstance

from eval_platform.benchmarks.declarations import Benchmark
from eval_platform.benchmarks.protocols import Protocol
from eval_platform.cli.demo import DEMO, NIGHTLY, SCORES, Step
from eval_platform.cli.moving import export_warehouse, move_warehouse
from eval_platform.cli.runner import Overrides, Runner
from eval_platform.cli.summary import print_protocol, print_results, print_summary, print_tables
from eval_platform.cli.supervisor import supervise
from eval_platform.definitions import defs
from eval_platform.environment import environment, hub_offline
from eval_platform.jobs import benchmark_inputs_job, model_evaluation_job
from eval_platform.resources import RESOURCES, RosterResource, WarehouseResource
from eval_platform.schedules.planner import Planner


@dataclass(frozen=True)
class RunOptions:
    """`eval-platform run`'s options."""

    benchmarks: Sequence[str] | None = None
    protocol: str | None = None
    limit: int | None = None
    max_gen_toks: int | None = None
    tables: bool = False

    def described(self) -> str:
        """The run's limits in words (`first 5 documents, 96 new tokens`), or `whole benchmarks`."""
        parts = [f"first {self.limit} documents"] if self.limit else []
        parts += [f"{self.max_gen_toks} new tokens"] if self.max_gen_toks else []
        return ", ".join(parts) or "whole benchmarks"

    def overrides(self, protocol: Protocol | None) -> Overrides:
        """The first `limit` rows of each benchmark; generation within `max_gen_toks` (each result's
        settings say so, kept by the evaluation plan for a generation task only); a protocol's job."""
        evaluation: dict[str, int] = {"limit": self.limit} if self.limit else {}
        if self.max_gen_toks and protocol is None:
            evaluation["max_gen_toks"] = self.max_gen_toks
        ops: dict[str, dict[str, dict[str, dict[str, int]]]] = {}  # job -> op -> its config
        if self.limit:
            ops[benchmark_inputs_job.name] = {"benchmark_raw_rows": {"config": {"limit": self.limit}}}
        if evaluation:
            ops[model_evaluation_job.name] = {"benchmark_evaluation": {"config": evaluation}}
        return Overrides(ops, {model_evaluation_job.name: protocol.name} if protocol else {})


@overload
def resource(name: Literal["roster"]) -> RosterResource: ...


@overload
def resource(name: Literal["warehouse"]) -> WarehouseResource: ...


def resource(name: Literal["roster", "warehouse"]) -> RosterResource | WarehouseResource:
    """The code location's resource (its settings unset: the environment's, read when it is used)."""
    return cast(RosterResource | WarehouseResource, RESOURCES[name])


def quiet_libraries() -> None:
    """The libraries' informational warnings (lm-evaluation-harness's on every task it builds,
    transformers' and datasets' progress) stay out of the console; the run's event log in the
    Dagster UI keeps every line of its own."""
    for name in ("lm_eval", "transformers", "datasets", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)


def runnable(protocol: Protocol, declared: dict[str, Benchmark]) -> list[str]:
    """The protocol's benchmarks that can run here, saying why each other one is skipped."""
    names = []
    for task in protocol.tasks:
        benchmark = declared.get(task.benchmark)
        if benchmark is None and hub_offline():
            print(f"{protocol.name} [{task.name}]: skipped: {task.unavailable_offline or 'not declared'} (with hub "
                  "access, run it without HF_HUB_OFFLINE: the harness loads it by its hub id)", flush=True)  # fmt: skip
        elif benchmark is not None and task.num_fewshot and benchmark.fewshot and not benchmark.fewshot.file:
            print(f"{protocol.name} [{task.name}]: skipped: its few-shot split ({benchmark.fewshot.describe()}) is "
                  "not shipped; with hub access, run benchmark_inputs with benchmark_fewshot_rows' source set to it, "
                  f"then the job {protocol.name}", flush=True)  # fmt: skip
        else:
            names.append(task.benchmark)
    return names


def only(benchmarks: Sequence[str]) -> Step:
    """The nightly step restricted to `benchmarks`."""
    return replace(NIGHTLY, requests=lambda planner: planner.nightly("main", benchmarks))


def run(options: RunOptions) -> int:
    """The demo's steps (or only some benchmarks', or a protocol's), then what they stored."""
    quiet_libraries()
    roster: RosterResource = resource("roster")
    warehouse: WarehouseResource = resource("warehouse")
    declared, protocols = roster.benchmarks(), roster.protocols()
    unknown = [name for name in options.benchmarks or () if name not in declared]
    if unknown:
        print(f"unknown benchmark(s) {', '.join(unknown)}: declared in {environment().benchmarks_dir} are "
              f"{', '.join(declared)}", file=sys.stderr)  # fmt: skip
        return 2
    protocol = protocols[options.protocol] if options.protocol else None
    if protocol:
        steps: Sequence[Step] = (only(runnable(protocol, declared)), SCORES)
    else:
        steps = (only(options.benchmarks), SCORES) if options.benchmarks else DEMO
    runner = Runner(defs(), Planner.of(DagsterInstance.get(), roster), options.overrides(protocol))
    succeeded = runner.walk(steps)
    if protocol:
        print_protocol(warehouse, protocol)
    elif options.benchmarks:
        print_results(warehouse, declared, options.benchmarks)
    elif options.tables:
        print_tables(warehouse, declared)
    else:
        print_summary(warehouse, declared, options.described())
    return 0 if succeeded else 1


def quiet_teardown() -> None:
    """No DuckDB noise after the last line: its bindings (nanobind) report their own module's type
    constants as leaked when the interpreter's teardown frees modules in some orders, as after an
    evaluation run in this process ("nanobind: leaked 27 instances! ... DuckDBPyType", 30 lines; the
    report is documented as benign at shutdown, and DuckDB's wheels do not switch it off). Registered
    first, this exit handler runs after every other one: both streams flushed, stderr then goes to
    /dev/null for the teardown alone."""

    def silenced() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())

    atexit.register(silenced)


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
    runs.add_argument("--tables", action="store_true", help="Every table at the end, not the one-screen summary.")
    commands.add_parser("results", help="Every table of the warehouse: results, comparisons, leaderboard, domains.")
    commands.add_parser("ui", help="Dagster's UI on this code location.").add_argument(
        "--port", type=int, help="The UI's port (Dagster's default 3000)."
    )
    viewed = commands.add_parser("viewer", help="The sample viewer alone (every answer behind every score).")
    viewed.add_argument("--host", help="The interface to listen on (default EVAL_VIEWER_HOST, else 127.0.0.1).")
    viewed.add_argument("--port", type=int, help="The port (default EVAL_VIEWER_PORT, else 3010).")
    commands.add_parser(
        "migrate",
        help="Create or migrate Dagster's storage and the warehouse (a lake's catalog), once, before any host starts.",
    )
    exported = commands.add_parser("export", help="An evaluation partition as inspect_ai logs (the inspect_log asset).")
    exported.add_argument("benchmark", help="The benchmark.")
    exported.add_argument("model", help="The roster model (or import).")
    exported.add_argument("--to", help="The folder to write to (default EVAL_EXPORTS_DIR/<benchmark>).")
    moves = commands.add_parser("move-warehouse", help="Move a warehouse into the configured one, every row kept.")
    action = moves.add_mutually_exclusive_group(required=True)
    action.add_argument("--from", dest="source", help="A warehouse file, or a folder --export wrote.")
    action.add_argument("--export", help="A folder to write the configured warehouse's tables to, as Parquet.")
    return main


def viewer(host: str | None, port: int | None) -> int:
    """The sample viewer alone, reading the configured warehouse, until interrupted."""
    from eval_platform.viewer.app import serve
    from eval_platform.viewer.warehouse import WarehouseSource

    settings = environment()
    host, port = host or settings.viewer_host, port or settings.viewer_port
    print(f"The sample viewer of {settings.warehouse}: http://{host}:{port}", flush=True)
    serve(host, port, WarehouseSource.from_settings(settings))
    return 0


def migrate() -> int:
    """Dagster's storage created or migrated (what `dagster instance migrate` does), then the
    warehouse (a lake's catalog and every store's tables), in this one process: hosts started
    afterwards, all at once, find both made and create nothing. (Hosts that each create a new
    database's storage race: PostgreSQL refuses the second `CREATE TABLE runs` and that host dies.)"""
    with DagsterInstance.get() as instance:
        instance.upgrade(print)
    warehouse: WarehouseResource = resource("warehouse")
    with warehouse.get_connection():
        pass
    print(f"Dagster's storage ({type(instance.run_storage).__name__}) and the warehouse {warehouse.location} are ready")
    return 0


def export(benchmark: str, model: str, folder: str | None) -> int:
    """An evaluation partition written as inspect_ai logs, each file named with its sample count."""
    from eval_platform.evaluation_assets.benchmarks.assets import ExportConfig, export_partition

    written = export_partition(
        resource("warehouse"), benchmark, model, ExportConfig(folder=folder).benchmark_folder(benchmark)
    )
    for path, count in written.items():
        print(f"{path}: {count} samples (inspect view --log-dir {path.parent})")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = environment()
    match args.command:
        case "run":
            quiet_teardown()
            return run(RunOptions(args.benchmarks, args.protocol, args.limit, args.max_gen_toks, args.tables))
        case "results":
            roster: RosterResource = resource("roster")
            print_tables(resource("warehouse"), roster.benchmarks())
            return 0
        case "ui":
            return supervise(args.port, settings.viewer_host, settings.viewer_port)
        case "viewer":
            return viewer(args.host, args.port)
        case "migrate":
            return migrate()
        case "export":
            return export(args.benchmark, args.model, args.to)
        case _:
            warehouse: WarehouseResource = resource("warehouse")
            return export_warehouse(warehouse, args.export) if args.export else move_warehouse(warehouse, args.source)


if __name__ == "__main__":
    sys.exit(main())
