"""Runs the planner's run requests in this process, one after another, each followed by the runs its
success leads to (as the sensors follow it in production); a line as each starts, one every
`HEARTBEAT_S` seconds while it runs, and its outcome and time."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from dagster import Definitions, RunRequest

from eval_platform.cli.demo import Step
from eval_platform.schedules.planner import Planner

# The console shows warnings (rejected rows) and the summary; every log line, the per-item reports
# included, is kept in the run's event log in the Dagster UI.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
HEARTBEAT_S = 30.0  # a running step's line, this often
OpConfig = Mapping[str, Mapping[str, object]]  # an op's run config: {"config": {field: value}}


@dataclass(frozen=True)
class Overrides:
    """What the command changes in the runs it is asked for: a job's op config on top of the
    request's, and a job run in another's place (a protocol's job for model_evaluation)."""

    ops: Mapping[str, Mapping[str, OpConfig]] = field(default_factory=dict)  # job -> op -> its config
    jobs: Mapping[str, str] = field(default_factory=dict)

    def run_config(self, request: RunRequest) -> dict[str, object]:
        """The request's run config with the command's op config over it, field by field (a
        request's own settings kept where the command sets others)."""
        ops = {name: dict(op) for name, op in (request.run_config or {}).get("ops", {}).items()}
        for name, op in self.ops.get(str(request.job_name), {}).items():
            mine = ops.setdefault(name, {})
            mine["config"] = {**mine.get("config", {}), **op.get("config", {})}
        return {**QUIET, "ops": ops}


@contextmanager
def heartbeat(label: str, start: float) -> Iterator[None]:
    """While in use, a line every HEARTBEAT_S seconds: the run still going, and for how long."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_S):
            print(f"    {label}: running, {time.perf_counter() - start:.0f} s so far", flush=True)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@dataclass
class Runner:
    """Walks steps through `planner`, executing each run in this process and recording it in the
    planner's Dagster instance (so the UI shows it): a line as each run starts, its number of those
    planned, and one as it ends, with its outcome and time."""

    defs: Definitions
    planner: Planner
    overrides: Overrides = field(default_factory=Overrides)
    failed: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    planned: int = 0
    done: int = 0

    def walk(self, steps: Sequence[Step]) -> bool:
        """Every step in turn; True when every run succeeded."""
        self.planned = sum(self.expected(step) for step in steps)
        for step in steps:
            print(f"{step.title} ({step.trigger}):", flush=True)
            if step.before:
                step.before(self.planner)
            self.run_all(step.requests(self.planner))
        return not self.failed

    def expected(self, step: Step) -> int:
        """The runs a step makes when each succeeds (one, for a step whose runs wait on what it prepares)."""
        return 1 if step.before else self.with_follow_ups(step.requests(self.planner))

    def with_follow_ups(self, requests: Sequence[RunRequest]) -> int:
        after = self.planner.after_success
        return sum(1 + self.with_follow_ups(after(str(r.job_name), r.partition_key, "main")) for r in requests)

    def run_all(self, requests: Sequence[RunRequest]) -> None:
        for request in requests:
            if self.run(request):
                self.run_all(self.planner.after_success(str(request.job_name), request.partition_key, "main"))

    def run(self, request: RunRequest) -> bool:
        job_name = self.overrides.jobs.get(str(request.job_name), str(request.job_name))
        partition = str(request.partition_key) if request.partition_key else None
        self.done += 1
        label = f"{self.done} of {max(self.planned, self.done)}: {job_name}" + (f" [{partition}]" if partition else "")
        start = time.perf_counter()
        print(f"{label} ...", flush=True)
        with heartbeat(label, start):
            result = self.defs.resolve_job_def(job_name).execute_in_process(
                partition_key=partition,
                instance=self.planner.instance,
                raise_on_error=False,
                run_config=self.overrides.run_config(request),
                tags=dict(request.tags),
            )
        outcome = "success" if result.success else "FAILED"
        took, total = time.perf_counter() - start, time.perf_counter() - self.started
        print(f"{label}: {outcome} in {took:.1f} s ({total:.0f} s in all)", flush=True)
        if not result.success:
            self.failed.append(label)
        return result.success
