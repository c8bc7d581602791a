"""Dagster's UI (and its daemon) on the code location, and beside it the sample viewer that its
materialisations link to, started and stopped together."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from eval_platform.environment import PROJECT_ROOT

STOP_WAIT_S = 60.0  # how long a process may take to stop before it is killed


def supervise(port: int | None, viewer_host: str, viewer_port: int) -> int:
    """Both processes until interrupted (Ctrl-C, or SIGTERM); either ends both."""
    command = [str(Path(sys.executable).with_name("dagster")), "dev", "-w", str(PROJECT_ROOT / "workspace.yaml")]
    # Handlers of its own (which a child does not inherit: it starts with the default one, even where
    # this process was started with SIGINT ignored, in the background): a SIGTERM ends both as Ctrl-C does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    address = ["--host", viewer_host, "--port", str(viewer_port)]
    viewer = subprocess.Popen([sys.executable, "-m", "eval_platform.cli", "viewer", *address], cwd=PROJECT_ROOT)
    dagster = None
    try:
        dagster = subprocess.Popen(command + (["-p", str(port)] if port else []))
        return dagster.wait()
    except KeyboardInterrupt:  # a terminal's Ctrl-C reached every process of its group
        return 130
    finally:
        # Dagster's UI stops its webserver, daemon and code servers on SIGINT; the viewer on SIGTERM
        for process, stop in ((dagster, signal.SIGINT), (viewer, signal.SIGTERM)):
            if process is not None and process.poll() is None:
                process.send_signal(stop)
        for process in (dagster, viewer):
            if process is not None:
                stop_within(process, STOP_WAIT_S)


def stop_within(process: subprocess.Popen[bytes], seconds: float) -> None:
    """Wait for a process to end, killing it after `seconds`."""
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
