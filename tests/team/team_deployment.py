"""The team setup of the README on one machine, for tests and the scaling script: Dagster on a
throwaway PostgreSQL (deploy/team/dagster.yaml), the daemon starting queued runs, and Celery on a
Redis broker, with worker processes standing in for hosts (deploy/team/celery.yaml). Every process
is stopped on exit, its whole process group, SIGKILL after a grace period. It is set up as the docs
say: `eval-platform migrate` once, then every host, the workers (and the daemon) at the same instant."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.processes import STARTED, free_port, stop_group
from tests.team.at_once import started_at_once
from tests.team.postgres_server import postgres_server

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TEAM_INSTANCE = PROJECT_ROOT / "deploy" / "team" / "dagster.yaml"
CELERY_SETTINGS = PROJECT_ROOT / "deploy" / "team" / "celery.yaml"
BIN = Path(sys.executable).parent
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")


@dataclass
class TeamDeployment:
    """A running team setup: its environment (every host's), and its Celery workers by name."""

    folder: Path
    env: dict[str, str]
    workers: dict[str, subprocess.Popen] = field(default_factory=dict)
    daemon: subprocess.Popen | None = None
    migrated_before: int = 0  # a PostgreSQL transaction id after the migration and before any host started
    stack: ExitStack = field(default_factory=ExitStack)

    def command(self, program: str, *arguments: str, timeout_s: float = 300) -> str:
        """A command of the install (`dagster`, `eval-platform`) as a user runs it on a host of the
        team: its output."""
        done = subprocess.run(
            [str(BIN / program), *arguments],
            cwd=PROJECT_ROOT,
            env=self.env,
            text=True,
            capture_output=True,
            timeout=timeout_s,
        )
        if done.returncode:
            raise RuntimeError(
                f"{program} {' '.join(arguments)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
            )
        return done.stdout

    def dagster(self, *arguments: str, timeout_s: float = 300) -> str:
        return self.command("dagster", *arguments, timeout_s=timeout_s)

    def start_at_once(self, workers: list[str], daemon: bool = False) -> None:
        """Celery workers (one task at a time each), as each host starts one, and the daemon if asked,
        all at the same instant (tests/team/at_once.py). Killing a worker's process group loses it,
        as a lost host is lost."""
        hosts = {f"worker-{name}": worker_command(name, self.env["EVAL_CELERY_CONFIG"]) for name in workers}
        if daemon:
            hosts["daemon"] = DAEMON
        logs = iter(hosts)
        processes = started_at_once(lambda argv, fds: start_logged(self, next(logs), argv, fds), list(hosts.values()))
        self.workers.update(zip(workers, processes, strict=False))
        self.daemon = processes[-1] if daemon else None

    def log(self, name: str, characters: int = 3000) -> str:
        """The last lines of a process's log (`worker-host-1`, `daemon`)."""
        return (self.folder / f"{name}.log").read_text(errors="replace")[-characters:]

    def wait_for_workers(self, timeout_s: float = 300) -> None:
        """Until every started worker answers the broker's ping; a worker that exits first stops the
        wait at once, with its log's last lines."""
        from celery import Celery

        app = Celery(broker=self.env["EVAL_CELERY_BROKER"], backend=self.env["EVAL_CELERY_BACKEND"])
        deadline = time.monotonic() + timeout_s
        while True:
            exited = {name: process.returncode for name, process in self.workers.items() if process.poll() is not None}
            if exited:
                raise RuntimeError(
                    "".join(
                        f"Celery worker {name} exited ({code}) at start-up:\n{self.log('worker-' + name)}\n"
                        for name, code in exited.items()
                    )  # fmt: skip
                )
            answering = {
                reply_name.split("@")[0] for reply in app.control.ping(timeout=1.0) or [] for reply_name in reply
            }
            if answering >= set(self.workers):
                return
            if time.monotonic() > deadline:
                silent = sorted(set(self.workers) - answering)
                raise TimeoutError(
                    f"Celery workers {', '.join(silent)} running but not answering after {timeout_s:.0f} s: "
                    + "".join(f"\n{name}:\n{self.log('worker-' + name)}" for name in silent)
                )

    def start_daemon(self) -> None:
        """The daemon (`dagster-daemon run`): it starts queued runs, and runs the sensors and schedules."""
        self.daemon = start_logged(self, "daemon", [str(BIN / DAEMON[0]), *DAEMON[1:]])

    def kill_worker(self, name: str) -> None:
        """Kill a worker and its pool at once (SIGKILL), as a host that is lost."""
        stop_group(self.workers.pop(name), grace_s=0)

    def instance(self):
        """The team's Dagster instance (on PostgreSQL), as every host opens it."""
        from unittest import mock

        from dagster import DagsterInstance

        with mock.patch.dict(os.environ, {"DAGSTER_PG_URL": self.env["DAGSTER_PG_URL"]}):
            return DagsterInstance.from_config(self.env["DAGSTER_HOME"])

    def wait_for_runs(self, job: str, count: int, timeout_s: float = 900) -> list:
        """The job's runs once `count` of them have finished (and none is still queued or running)."""
        from dagster import RunsFilter

        deadline = time.monotonic() + timeout_s
        with self.instance() as instance:
            while True:
                runs = instance.get_runs(RunsFilter(job_name=job))
                if len(runs) >= count and all(run.status.value in FINISHED for run in runs):
                    return runs
                if time.monotonic() > deadline:
                    states = {run.run_id[:8]: run.status.value for run in runs}
                    raise TimeoutError(
                        f"{job}: {len(runs)} runs after {timeout_s:.0f} s, not all finished: {states}; "
                        f"daemon log: {self.log('daemon')}"
                    )
                time.sleep(1)


def dagster_query(deployment: TeamDeployment, sql: str) -> list[tuple]:
    """A query of the PostgreSQL database that holds the team's Dagster storage: its rows."""
    import psycopg2

    with psycopg2.connect(deployment.env["DAGSTER_PG_URL"].replace("+psycopg2", "")) as conn, conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall()


DAEMON = ["dagster-daemon", "run", "-w", "workspace.yaml"]


def worker_command(name: str, celery_settings: str) -> list[str]:
    """A host's Celery worker, one task at a time, listening on the `dagster` queue."""
    return ["dagster-celery", "worker", "start", "-A", "dagster_celery.app", "-y", celery_settings, "-q", "dagster",
            "--name", name, "--", "--concurrency", "1"]  # fmt: skip


def start_logged(
    deployment: TeamDeployment, name: str, command: list[str], pass_fds: tuple[int, ...] = ()
) -> subprocess.Popen:
    log = open(deployment.folder / f"{name}.log", "wb")
    deployment.stack.callback(log.close)
    process = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        env=deployment.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        pass_fds=pass_fds,
    )
    STARTED.append(process.pid)
    deployment.stack.callback(stop_group, process)
    return process


@contextmanager
def team_deployment(
    folder: Path,
    workers: int = 2,
    daemon: bool = True,
    celery_settings: Path = CELERY_SETTINGS,
    lake: bool = True,
    **env: str,
) -> Iterator[TeamDeployment]:
    """The team setup in `folder` (its DAGSTER_HOME, logs, and the lake's data files): PostgreSQL (the
    Dagster instance, and the lake's catalog), Redis, `workers` Celery workers, and the daemon; the
    warehouse a DuckLake (or, without `lake`, a file); `env` adds to every process's environment."""
    folder.mkdir(parents=True, exist_ok=True)
    home = folder / "dagster_home"
    home.mkdir(exist_ok=True)
    shutil.copy(TEAM_INSTANCE, home / "dagster.yaml")
    with ExitStack() as outer:
        url = outer.enter_context(postgres_server(("dagster", "lake")))
        warehouse = (
            {
                "EVAL_WAREHOUSE": f"ducklake:postgres:{url.rsplit('/', 1)[0]}/lake",
                "EVAL_LAKE_DATA_PATH": str(folder / "lake_data"),
            }
            if lake
            else {"EVAL_WAREHOUSE": str(folder / "warehouse.duckdb")}
        )
        broker = f"redis://127.0.0.1:{free_port()}"
        deployment = TeamDeployment(
            folder,
            {
                **os.environ,
                "DAGSTER_HOME": str(home),
                "DAGSTER_PG_URL": url.replace("postgresql://", "postgresql+psycopg2://"),
                "EVAL_CELERY_BROKER": f"{broker}/0",
                "EVAL_CELERY_BACKEND": f"{broker}/1",
                "EVAL_CELERY_CONFIG": str(celery_settings),
                **warehouse,
                "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
                "HF_HUB_OFFLINE": "1",
                "HF_DATASETS_OFFLINE": "1",
                **env,
            },
        )
        with deployment.stack:
            start_logged(
                deployment,
                "redis",
                [
                    shutil.which("redis-server") or "/usr/bin/redis-server",
                    "--port",
                    broker.rsplit(":", 1)[1],
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ],
            )
            # The team's storage made once, before any host starts (docs/operations/team.md).
            deployment.command("eval-platform", "migrate")
            deployment.migrated_before = int(dagster_query(deployment, "SELECT txid_current()")[0][0])
            deployment.start_at_once([f"host-{number}" for number in range(1, workers + 1)], daemon)
            deployment.wait_for_workers()
            yield deployment
