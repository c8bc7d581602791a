"""Start a console script when told, so that processes started together do their first work at the
same instant, not whenever each finishes importing:

    python -m tests.team.at_once READY_FD GO_FD SCRIPT [ARGUMENT ...]

imports SCRIPT's entry point (the slow, variable part of a start), writes a byte to READY_FD, waits
until every holder of GO_FD's write end has closed it, then runs SCRIPT with the arguments in this
process. `started_at_once` is the starter's side."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points


def started_at_once(start: Callable[[list[str], tuple[int, ...]], subprocess.Popen], commands: Sequence[list[str]],
                    timeout_s: float = 300) -> list[subprocess.Popen]:  # fmt: skip
    """`start(argv, pass_fds)` for each command (a console script and its arguments), each told to
    go once every one has imported its entry point: the processes started. A process that exits
    before it is ready stops the wait at once (its own log says why)."""
    ready_read, ready_write = os.pipe()
    go_read, go_write = os.pipe()
    try:
        processes = [
            start([sys.executable, "-m", __name__, str(ready_write), str(go_read), *command], (ready_write, go_read))
            for command in commands
        ]
        os.close(ready_write)
        ready_write = -1
        for _ in processes:
            if not select.select([ready_read], [], [], timeout_s)[0] or not os.read(ready_read, 1):
                exited = [p.args for p in processes if p.poll() is not None]
                raise RuntimeError(f"not every process got ready to start within {timeout_s:.0f} s; exited: {exited}")
        return processes
    finally:
        for descriptor in (ready_read, ready_write, go_read, go_write):  # closing go_write says go
            if descriptor >= 0:
                os.close(descriptor)


def main() -> int:
    ready, go, script, *arguments = sys.argv[1:]
    (entry,) = entry_points(group="console_scripts", name=script)
    function = entry.load()
    os.write(int(ready), b"1")
    os.close(int(ready))
    os.read(int(go), 1)  # end of file: the starter has closed its end
    os.close(int(go))
    sys.argv = [script, *arguments]
    return function()


if __name__ == "__main__":
    sys.exit(main())
