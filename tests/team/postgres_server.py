"""A throwaway PostgreSQL 15 server for a test: a new cluster in a temporary folder, run as the
`postgres` user (PostgreSQL refuses to run as root), listening on 127.0.0.1 at a free port with its
socket in that folder, and stopped, its whole process group, even when the test fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.processes import STARTED, free_port, stop_group

USER = "postgres"


def _as_postgres(command: Sequence[str]) -> list[str]:
    """`command` as the postgres user when this process is root (as CI is), else as this user."""
    return ["runuser", "-u", USER, "--", *command] if os.geteuid() == 0 else list(command)


def _binary(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))), None)
    if not found:
        raise RuntimeError(f"PostgreSQL's {name} is not installed (Debian: apt-get install postgresql)")
    return str(found)


@contextmanager
def postgres_server(databases: Sequence[str] = ("dagster",), timeout_s: float = 60) -> Iterator[str]:
    """A running server with `databases` created: its URL for the first one's user, without a
    password (trust authentication, on 127.0.0.1 only)."""
    folder = Path(tempfile.mkdtemp(prefix="eval-postgres-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(folder, USER)
        data, port = folder / "data", free_port()
        subprocess.run(
            _as_postgres([_binary("initdb"), "-D", str(data), "-A", "trust", "-U", USER, "--no-sync", "-E", "UTF8"]),
            check=True,
            capture_output=True,
        )
        log = open(folder / "server.log", "wb")
        process = subprocess.Popen(
            _as_postgres(
                [
                    _binary("postgres"),
                    "-D",
                    str(data),
                    "-p",
                    str(port),
                    "-k",
                    str(folder),
                    "-c",
                    "listen_addresses=127.0.0.1",
                    "-c",
                    "fsync=off",
                    "-c",
                    "max_connections=200",
                ]
            ),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        STARTED.append(process.pid)
        try:
            _wait_ready(port, process, folder / "server.log", timeout_s)
            for database in databases:
                subprocess.run(
                    _as_postgres([_binary("createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", USER, database]),
                    check=True,
                    capture_output=True,
                )
            yield f"postgresql://{USER}@127.0.0.1:{port}/{databases[0]}"
        finally:
            from eval_platform.common.connections import ATTACHED_LAKES

            ATTACHED_LAKES.close()  # this process's catalog connections, which a stopping server waits for
            stop_group(process, grace_s=10)
            log.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _wait_ready(port: int, process: subprocess.Popen, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"PostgreSQL exited with {process.returncode}: {log.read_text()[-2000:]}")
        ready = subprocess.run([_binary("pg_isready"), "-h", "127.0.0.1", "-p", str(port)], capture_output=True)
        if ready.returncode == 0:
            return
        time.sleep(0.2)
    raise TimeoutError(
        f"PostgreSQL on 127.0.0.1:{port} was not ready within {timeout_s:.0f} s: {log.read_text()[-2000:]}"
    )
