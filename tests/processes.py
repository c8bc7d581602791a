"""Start a server process for a test and stop it whatever it does with SIGTERM.

Every process runs in its own session (process group), so stopping it reaches its children too:
SIGTERM to the group, then SIGKILL to the group if it is still there after `grace_s`.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

STARTED: list[int] = []  # process-group ids this test session started

# How long a test waits for anything that should come (a server to answer, a page or a dialog to
# show, a process to end, a client's answer): the one setting, EVAL_TEST_WAIT_S, raised on a slow
# machine. A wait ends as soon as its condition holds, so a generous value costs nothing when all
# is well. Where a test must sit out a client's timeout, that timeout is a stated fraction of it.
WAIT_S = float(os.environ.get("EVAL_TEST_WAIT_S") or 240)


# Test processes run side by side (`make test`: two pytest-xdist workers, slots 0 and 1, and the
# team tests, slot 5 by TEST_PORT_SLOT), each picking ports for the servers it starts. Each takes
# them from a range of its own, below the kernel's ephemeral ports (32768 and up, which any bind to port 0 may get),
# so that no two pick the same port before its server binds it.
PORT_SLOT = int(os.environ.get("TEST_PORT_SLOT") or os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
PORTS_PER_SLOT = 1000
_next_ports = iter(range(20000 + PORT_SLOT * PORTS_PER_SLOT, 20000 + (PORT_SLOT + 1) * PORTS_PER_SLOT))


def free_port() -> int:
    """A port on 127.0.0.1 that is free now, from this test process's own range."""
    for port in _next_ports:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port left in test port slot {PORT_SLOT}")


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL it if anything in it outlives `grace_s`."""
    pgid = process.pid
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            process.poll()
            if not group_alive(pgid):
                break
            time.sleep(0.1)
        else:
            continue
        break
    process.wait(timeout=10)


def in_processes(target: Callable[..., None], arguments: Sequence[tuple], timeout_s: float) -> list[int | None]:
    """`target(*args)` in a spawned process for each args, all at once: their exit codes (None: still
    running at the bound). Whatever a process does with its signals, it ends: what outlives the bound
    is killed (SIGKILL), so no join waits without one."""
    import multiprocessing

    processes = [multiprocessing.get_context("spawn").Process(target=target, args=args) for args in arguments]
    try:
        for process in processes:
            process.start()
        deadline = time.monotonic() + timeout_s
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
        return [process.exitcode for process in processes]
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join(10)


def wait_for_http(url: str, timeout_s: float, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode} before answering {url}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout_s:.0f} s")


def lines_until(stream: IO[Any], deadline: float) -> Iterator[str]:
    """The lines a child writes to `stream` (a pipe from it), decoded as they come, until it closes
    the pipe (the last line may lack its newline). At `deadline` (a `time.monotonic()` time),
    TimeoutError, whether or not the child writes anything meanwhile: a silent child cannot hold a
    test past its deadline. The pipe is read through its file descriptor, never its Python buffer."""
    import codecs

    decoder, pending, descriptor = codecs.getincrementaldecoder("utf-8")(errors="replace"), "", stream.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([descriptor], [], [], left)[0]:
            raise TimeoutError(f"the deadline passed; the child's unfinished line: {pending[-300:]!r}")
        chunk = os.read(descriptor, 65536)
        pending += decoder.decode(chunk, final=not chunk)
        while "\n" in pending:
            line, pending = pending.split("\n", 1)
            yield line + "\n"
        if not chunk:
            if pending:
                yield pending
            return


def default_signals() -> None:
    """In a server about to start (its `preexec_fn`): SIGTERM and SIGINT at their defaults, as a
    terminal starts it. A suite started in the background (SIGINT ignored, which Dagster maps onto
    SIGTERM) would hand its servers both signals ignored, and each stop would wait out its grace."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)


@contextmanager
def running(
    command: Sequence[str], ready_url: str, timeout_s: float = 120, grace_s: float = 10.0, **popen
) -> Iterator[subprocess.Popen]:
    """A server process, answering at `ready_url`, stopped (and its whole group) on exit: SIGTERM,
    then SIGKILL after `grace_s`. It starts with the default signal handling (`default_signals`)
    unless `popen` gives a `preexec_fn` of its own (one that ignores SIGTERM, say)."""
    process = subprocess.Popen(list(command), start_new_session=True, **{"preexec_fn": default_signals, **popen})
    STARTED.append(process.pid)
    try:
        wait_for_http(ready_url, timeout_s, process)
        yield process
    finally:
        stop_group(process, grace_s)


def run_to_end(command: Sequence[str], timeout_s: float, grace_s: float = 1.0, **popen) -> tuple[int, str]:
    """Run a command in its own session to its end: its exit code and its output (stdout and
    stderr). `timeout_s` bounds a hang; its whole group is stopped on the way out, whatever happens."""
    process = subprocess.Popen(
        list(command), start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen
    )
    STARTED.append(process.pid)
    try:
        output, _ = process.communicate(timeout=timeout_s)
    finally:
        stop_group(process, grace_s)
    return process.returncode, output


def left_running(groups: Sequence[int] = STARTED, wait_s: float = 10.0) -> list[str]:
    """What is still running, after up to `wait_s`: any process group in `groups`, and any live
    descendant of this process (Python's multiprocessing resource tracker excepted)."""
    import psutil

    deadline = time.monotonic() + wait_s
    while True:
        found = [f"process group {pgid}" for pgid in groups if group_alive(pgid)]
        for child in psutil.Process().children(recursive=True):
            try:
                if child.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(child.cmdline()):
                    found.append(f"pid {child.pid}: {' '.join(child.cmdline())[:120]}")
            except psutil.NoSuchProcess:
                continue
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


class Zygote:
    """Runs `python -m MODULE ARGS` for a test as a child forked from `tests.zygote`, a process that
    imported the heavy libraries once: each child starts in a fraction of a second instead of
    seconds of imports. A child runs in a session of its own, with the environment, working folder
    and stderr it is given. One child at a time; stop the zygote with `stop`."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.zygote"],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=default_signals,
        )
        STARTED.append(self.process.pid)
        self._buffer = b""

    def run(
        self, module: str, arguments: Sequence[str], timeout_s: float, env: dict | None = None, stderr: str = os.devnull
    ) -> int:
        """The child's exit code (negative: the signal that ended it). One still running after
        `timeout_s` is killed with its group, and TimeoutError says so."""
        request = {
            "module": module,
            "argv": list(arguments),
            "env": dict(os.environ if env is None else env),
            "cwd": self.cwd,
            "stderr": stderr,
        }
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        pid = json.loads(self._reply(300))["pid"]  # a hang guard: the zygote may still be importing
        STARTED.append(pid)
        try:
            return json.loads(self._reply(timeout_s))["exit"]
        except TimeoutError:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:  # it ended meanwhile
                pass
            self._reply(30)
            raise TimeoutError(f"python -m {module} {' '.join(arguments)} ran past {timeout_s:.0f} s") from None

    def _reply(self, timeout_s: float) -> bytes:
        """The zygote's next line, within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.process.stdout], [], [], left)[0]:
                raise TimeoutError(f"no answer from the zygote within {timeout_s:.0f} s")
            chunk = os.read(self.process.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(f"the zygote exited with {self.process.wait(10)}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def stop(self) -> None:
        self.process.stdin.close()
        stop_group(self.process)
