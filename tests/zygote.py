"""A process that imports the heavy libraries once and forks a child for each module a test runs
(`tests.processes.Zygote` drives it): a test's own process, a run it kills or an era it resumes,
starts in a fraction of a second instead of importing Dagster, DuckDB, pandas, torch and
transformers again, seconds of CPU each. Nothing of this project is imported here, so a child
imports it after its own environment is set.

    python -m tests.zygote    (requests and replies: JSON lines on stdin and stdout)

A request {"module", "argv", "env", "cwd", "stderr"} is answered {"pid": ...} once the child is
forked, then {"exit": ...} when it ends (negative: the signal that ended it), one child at a time.
"""

import json
import os
import runpy
import signal
import sys
import traceback

import dagster  # noqa: F401
import duckdb  # noqa: F401
import pandas  # noqa: F401
import torch  # noqa: F401
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401


def run_child(request: dict) -> None:
    """In the forked child: a session, environment, working folder and stderr of its own, then the
    module as `python -m` runs it; never returns."""
    code = 1
    try:
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)  # the zygote's replies go to stdout: never the child's output
        os.dup2(os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), 2)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        sys.argv = [request["module"], *request["argv"]]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            run_child(request)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"exit": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    main()
