"""Teardown: a server that ignores SIGTERM (by inheritance, as in some CI environments), its
children, and `dagster dev` with its webserver and daemon are stopped by escalating to SIGKILL on
the whole process group; a server a test starts where SIGTERM is ignored stops on SIGTERM; and the
check that ends every test session finds a process left behind."""

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import psutil

from tests.conftest import PROJECT_ROOT
from tests.processes import STARTED, free_port, group_alive, left_running, running, stop_group

SERVER = """
import http.server, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), http.server.SimpleHTTPRequestHandler).serve_forever()
"""


def ignore_sigterm():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # inherited by the server and everything it starts


def ignores_sigterm(pid: int) -> bool:
    """Whether the process ignores SIGTERM (its `SigIgn` mask in /proc)."""
    mask = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigIgn:"))
    return bool(int(mask.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_server_ignoring_sigterm_is_killed_with_its_children():
    port = free_port()
    with running(
        [sys.executable, "-c", SERVER, str(port)],
        f"http://127.0.0.1:{port}/",
        grace_s=1,
        preexec_fn=ignore_sigterm,
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
    ) as server:
        grandchild = int(server.stdout.readline())
        assert all(ignores_sigterm(pid) for pid in (server.pid, grandchild))
        os.kill(server.pid, signal.SIGTERM)
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=60).close()  # it ran on after the signal
        assert server.poll() is None and not gone(grandchild)  # SIGTERM alone stops nothing
    assert server.returncode == -signal.SIGKILL
    assert not group_alive(server.pid) and gone(grandchild)


def test_a_server_started_where_sigterm_is_ignored_still_stops_on_sigterm():
    """In a suite started in the background the test process ignores SIGTERM and SIGINT; the servers
    it starts get both back at their defaults, so they stop on SIGTERM instead of waiting out the grace."""
    port = free_port()
    before = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with running(
            [sys.executable, "-c", SERVER, str(port)],
            f"http://127.0.0.1:{port}/",
            grace_s=60,
            stdout=subprocess.PIPE,
            text=True,
            cwd=PROJECT_ROOT,
        ) as server:
            grandchild = int(server.stdout.readline())
            assert not any(ignores_sigterm(pid) for pid in (server.pid, grandchild))
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    assert server.returncode == -signal.SIGTERM and gone(grandchild)


def test_dagster_dev_ignoring_sigterm_is_stopped_with_everything_it_started(tmp_path):
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "EVAL_WAREHOUSE": str(tmp_path / "warehouse.duckdb")}
    dagster = Path(sys.executable).with_name("dagster")
    with running(
        [str(dagster), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        f"http://127.0.0.1:{port}/server_info",
        grace_s=5,
        preexec_fn=ignore_sigterm,
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as dev:
        family = [dev.pid] + [p.pid for p in psutil.Process(dev.pid).children(recursive=True)]
        assert len(family) >= 3  # dagster dev, its webserver and its daemon (and their code servers)
    assert not group_alive(dev.pid) and all(gone(pid) for pid in family)


def test_the_session_check_finds_a_process_left_behind():
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        found = left_running([sleeper.pid], wait_s=0)
        assert f"process group {sleeper.pid}" in found and any(f.startswith(f"pid {sleeper.pid}: ") for f in found)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert left_running([sleeper.pid], wait_s=0) == []


def ignore_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as `make test &`, nohup and some CI runners start the suite


def test_tests_that_start_processes_pass_in_a_suite_started_in_the_background(tmp_path):
    """With SIGINT ignored from the start, Dagster maps SIGTERM onto SIG_IGN in the pytest process,
    and every process it starts inherits both: the tests that start processes still end and pass."""
    tests = [
        "tests/code_location/test_checks_and_views.py::test_parallel_processes_share_the_warehouse",
        "tests/faults/test_teardown.py::test_a_server_ignoring_sigterm_is_killed_with_its_children",
    ]
    suite = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=PROJECT_ROOT,
        preexec_fn=ignore_sigint,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    STARTED.append(suite.pid)
    try:
        output, _ = suite.communicate(timeout=1800)  # a bound for a hang, far above the 1 to 2 minutes it takes
    finally:
        stop_group(suite, grace_s=1)
    assert suite.returncode == 0 and "2 passed" in output, output[-3000:]
