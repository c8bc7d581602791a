"""The team setup of the README on one machine, for tests and the scaling script: Dagster on a
throwaway PostgreSQL (deploy/team/dagster.yaml), the daemon starting queued runs, and Celery on a
Redis broker, with worker processes standing in for hosts (deploy/team/celery.yaml). Every process
is stopped on exit, its whole process group, SIGKILL after a grace period."""

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
    stack: ExitStack = field(default_factory=ExitStack)

    def dagster(self, *arguments: str, timeout_s: float = 300) -> str:
        """A `dagster` CLI command as a user runs it on a host of the team: its output."""
        done = subprocess.run(
            [str(BIN / "dagster"), *arguments],
            cwd=PROJECT_ROOT,
            env=self.env,
            text=True,
            capture_output=True,
            timeout=timeout_s,
        )
        if done.returncode:
            raise RuntimeError(
                f"dagster {' '.join(arguments)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
            )
        return done.stdout

    def start_worker(self, name: str) -> subprocess.Popen:
        """A Celery worker (one task at a time) as each host starts one; killing its process group
        loses it, as a lost host is lost."""
        log = open(self.folder / f"worker-{name}.log", "wb")
        self.stack.callback(log.close)
        process = subprocess.Popen(
            [
                str(BIN / "dagster-celery"),
                "worker",
                "start",
                "-A",
                "dagster_celery.app",
                "-y",
                self.env["EVAL_CELERY_CONFIG"],
                "-q",
                "dagster",
                "--name",
                name,
                "--",
                "--concurrency",
                "1",
            ],
            cwd=PROJECT_ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        STARTED.append(process.pid)
        self.stack.callback(stop_group, process)
        self.workers[name] = process
        return process

    def wait_for_workers(self, count: int, timeout_s: float = 120) -> None:
        """Until `count` workers answer the broker's ping."""
        from celery import Celery

        app = Celery(broker=self.env["EVAL_CELERY_BROKER"], backend=self.env["EVAL_CELERY_BACKEND"])
        deadline = time.monotonic() + timeout_s
        while len(app.control.ping(timeout=1.0) or []) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"fewer than {count} Celery workers after {timeout_s:.0f} s: "
                    f"{(self.folder / 'worker-host-1.log').read_text()[-3000:]}"
                )

    def start_daemon(self) -> None:
        """The daemon (`dagster-daemon run`): it starts queued runs, and runs the sensors and schedules."""
        _start(self, "daemon", [str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"])

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
                        f"daemon log: {(self.folder / 'daemon.log').read_text()[-3000:]}"
                    )
                time.sleep(1)


def _start(deployment: TeamDeployment, name: str, command: list[str]) -> subprocess.Popen:
    log = open(deployment.folder / f"{name}.log", "wb")
    deployment.stack.callback(log.close)
    process = subprocess.Popen(
        command, cwd=PROJECT_ROOT, env=deployment.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
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
            _start(
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
            for number in range(1, workers + 1):
                deployment.start_worker(f"host-{number}")
            deployment.wait_for_workers(workers)
            if daemon:
                deployment.start_daemon()
            yield deployment
