"""Model-written code run apart: the sandbox of the harness tasks whose metric executes the model's
answers (humaneval, humaneval_64, mbpp: Hugging Face evaluate's `code_eval`), used only where the
user opts in as the harness requires (`confirm_run_unsafe_code` and HF_ALLOW_CODE_EVAL=1).

Each program runs in a Python process of its own (`python -I -S`, a fresh temporary folder, an
empty environment) under limits it cannot raise: CPU seconds and a wall-clock limit, its address
space, the size of any file it writes. It has no network: a network namespace of its own where the
kernel lets an unprivileged user make one (`unshare --net`), and in every case an audit hook that
refuses to open a socket, start a process or load a C library. A program passes only when it runs
to its end without an exception; its own output goes nowhere.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from eval_platform.common.repeats import pass_at_k
from eval_platform.environment import CODE_EXECUTION_VARIABLE, code_execution_allowed


class CodeRun(TypedDict):
    """One candidate's run, as `code_eval` reports it."""

    task_id: int
    passed: bool
    result: str
    completion_id: int


STARTUP_SECONDS = 2.0  # the wall-clock allowance for starting the interpreter, beyond the program's own
PASSED = "passed"
TIMED_OUT = "timed out"

# What the program's process runs: its limits set for good, the audit hook installed, the program
# read from stdin and executed with its output sent nowhere, and the verdict written to the channel
# (the process's stdout, a file of the sandbox's folder, moved away from descriptor 1 first).
RUNNER = r"""
import os, resource, sys
seconds, memory, file_bytes = (int(value) for value in sys.argv[1:4])
del sys.argv[1:]
resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))  # SIGXCPU at the first, SIGKILL at the second
for limit, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_FSIZE, file_bytes), (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(limit, (value, value))
source = sys.stdin.read()
channel = os.dup(1)
nowhere = os.open(os.devnull, os.O_RDWR)
for descriptor in (0, 1, 2):
    os.dup2(nowhere, descriptor)
REFUSED = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
           "os.forkpty", "pty.", "ctypes.", "os.kill", "os.killpg", "signal.pthread_kill", "_posixsubprocess")
def refuse(event, args):
    if event.startswith(REFUSED):
        raise PermissionError(f"the sandbox refuses {event}")
sys.addaudithook(refuse)
try:
    exec(compile(source, "<model code>", "exec"), {"__name__": "__main__"})
    verdict = "passed"
except BaseException as error:
    verdict = f"failed: {type(error).__name__}: {error}"[:500]
os.write(channel, verdict.encode("utf-8", "replace"))
"""


@dataclass(frozen=True)
class Limits:
    """What one program may use: CPU and wall-clock seconds (code_eval's own 3 s by default), its
    address space and the bytes of any file it writes."""

    seconds: float = 3.0
    memory_bytes: int = 1 << 30
    file_bytes: int = 1 << 20


@functools.cache
def network_isolation() -> tuple[str, ...]:
    """The command prefix that gives a process a network namespace of its own (nothing but a
    loopback that is down), or none where this kernel refuses it to an unprivileged user."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    command = (unshare, "--net", "--map-root-user")
    probe = subprocess.run([*command, "true"], capture_output=True, timeout=30, check=False)
    return command if probe.returncode == 0 else ()


def run_program(program: str, limits: Limits = Limits()) -> str:
    """`program` run in the sandbox: `passed`, `timed out`, or `failed: <the exception>` (a process
    killed by a limit: `failed: killed by <signal>`). Its process, and anything it left, is gone
    when this returns."""
    cpu_seconds = max(1, int(limits.seconds + 0.999))
    command = [
        *network_isolation(),
        sys.executable,
        "-I",
        "-S",
        "-c",
        RUNNER,
        str(cpu_seconds),
        str(limits.memory_bytes),
        str(limits.file_bytes),
    ]
    with tempfile.TemporaryDirectory(prefix="sandbox-") as folder:
        channel = Path(folder) / "verdict"
        with channel.open("wb") as verdict:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=verdict,
                stderr=subprocess.DEVNULL,
                cwd=folder,
                env={},
                start_new_session=True,
            )
            try:
                process.communicate(program.encode("utf-8", "replace"), timeout=limits.seconds + STARTUP_SECONDS)
            except subprocess.TimeoutExpired:
                return TIMED_OUT
            finally:
                _kill_group(process)
        said = channel.read_bytes()[:500].decode("utf-8", "replace")
    if process.returncode in (-signal.SIGXCPU, -signal.SIGKILL):  # past its CPU seconds
        return TIMED_OUT
    if process.returncode != 0 or not said:
        ended = f"killed by {signal.Signals(-process.returncode).name}" if process.returncode < 0 else "no verdict"
        return said or f"failed: {ended}"
    return said


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """The process and its group killed (SIGKILL: nothing ignores it), and reaped."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


class CodeEvalInSandbox:
    """What the harness's task utils get for `evaluate.load("code_eval")`: the same `compute`
    (each candidate followed by its test, pass@k over each problem's candidates for every k all
    problems have, and each run's result), each program run in the sandbox."""

    def __init__(self, limits: Limits = Limits(), workers: int | None = None) -> None:
        self.limits, self.workers = limits, workers or os.cpu_count() or 1

    def compute(
        self,
        references: Sequence[str],
        predictions: Sequence[Sequence[str]],
        k: Sequence[int] = (1, 10, 100),
        num_workers: int = 4,
        timeout: float = 3.0,
    ) -> tuple[dict[str, float], dict[int, list[tuple[int, CodeRun]]]]:
        if not code_execution_allowed():
            raise PermissionError(
                f"executing model-written code needs {CODE_EXECUTION_VARIABLE}=1 in the environment, as code_eval's"
            )
        if len(references) != len(predictions):
            raise ValueError(f"{len(predictions)} problems' candidates for {len(references)} tests")
        limits = Limits(timeout, self.limits.memory_bytes, self.limits.file_bytes)
        programs = [
            (problem, index, f"{candidate}\n{test}")
            for problem, (candidates, test) in enumerate(zip(predictions, references, strict=True))
            for index, candidate in enumerate(candidates)
        ]
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            verdicts = list(pool.map(lambda program: run_program(program[2], limits), programs))
        results: dict[int, list[tuple[int, CodeRun]]] = defaultdict(list)
        for (problem, index, _), verdict in zip(programs, verdicts, strict=True):
            outcome: CodeRun = {
                "task_id": problem,
                "passed": verdict == PASSED,
                "result": verdict,
                "completion_id": index,
            }
            results[problem].append((index, outcome))
        counts = [(len(runs), sum(run["passed"] for _, run in runs)) for runs in results.values()]
        chances = {
            f"pass@{size}": sum(pass_at_k(n, correct, size) for n, correct in counts) / len(counts)
            for size in ([k] if isinstance(k, int) else k)
            if counts and all(n >= size for n, _ in counts)
        }
        return chances, results
