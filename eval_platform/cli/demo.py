"""The main command's demo: what `eval-platform run` walks, step by step. Each step asks the planner
(schedules/planner.py) for the runs production's trigger would request, so the demo runs what
production runs; what only the demo does (a sampled run launched by hand, a stand-in rater's sheet)
is here, apart from production's planning."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dagster import RunRequest

from eval_platform.blind.raters import demo_rater_fill
from eval_platform.blind.sheets import SHEET_FILE
from eval_platform.jobs import (
    blind_evaluation_sheet_job,
    evolution_inputs_job,
    judging_inputs_job,
    judging_job,
    protocol_scores_job,
)
from eval_platform.schedules.planner import Planner, evaluation_run_requests

# The demo's sampled evaluation: a small generation benchmark, 4 answers a document at temperature 0.7
SAMPLED_BENCHMARK = "gsm8k_cot"
SAMPLED_DEMO = {"repeats": 4, "temperature": 0.7}


def sampled(planner: Planner) -> list[RunRequest]:
    """A sampled evaluation launched by hand with its launchpad config (`SAMPLED_DEMO`): the first
    roster entry compared with no baseline, on `SAMPLED_BENCHMARK`."""
    roster = planner.roster
    entries = {name: entry for name, entry in roster.entries().items() if entry.baseline is None}
    requests = evaluation_run_requests(planner.instance, entries, [SAMPLED_BENCHMARK], roster.protocols(), "sampled")
    config = {"ops": {"benchmark_evaluation": {"config": SAMPLED_DEMO}}}
    return [
        RunRequest(
            run_key=r.run_key, partition_key=r.partition_key, job_name=r.job_name, tags=r.tags, run_config=config
        )
        for r in requests[:1]
    ]


def fill_demo_sheet(planner: Planner) -> None:
    """A programmatic stand-in for a human rater fills the issued sheet (it says so in Notes)."""
    demo_rater_fill(planner.blind_dir / "issued" / SHEET_FILE, planner.blind_dir / "filled" / "demo-rater.xlsx")


def job_run(job_name: str) -> Callable[[Planner], list[RunRequest]]:
    """One run of an unpartitioned job, as launched from the UI."""
    return lambda _: [RunRequest(job_name=job_name)]


@dataclass(frozen=True)
class Step:
    """A step of the demo: the runs production's trigger for it requests, and what the demo does first."""

    title: str
    trigger: str
    requests: Callable[[Planner], list[RunRequest]]
    before: Callable[[Planner], None] | None = None


NIGHTLY = Step(
    "each benchmark's inputs, then every roster model on it",
    "nightly_benchmark_refresh, then roster_evaluation_sensor",
    lambda planner: planner.nightly("main"),
)
SCORES = Step(
    "the protocols' scores and the leaderboard",
    "their assets' eager automation condition",
    job_run(protocol_scores_job.name),
)
DEMO = (
    NIGHTLY,
    SCORES,
    Step(
        f"a sampled evaluation: {SAMPLED_BENCHMARK}, {SAMPLED_DEMO['repeats']} answers a document at temperature "
        f"{SAMPLED_DEMO['temperature']}",
        "launched by hand",
        sampled,
    ),
    Step("the blind evaluation's sheet", "launched by hand", job_run(blind_evaluation_sheet_job.name)),
    Step(
        "the blind evaluation's tally (a demo rater's sheet)",
        "blind_eval_filled_sheet_sensor",
        Planner.tally,
        before=fill_demo_sheet,
    ),
    # the judges are measured (and an era's panel flagged) before the eras run
    Step("judging's sets and recorded verdicts", "launched by hand", job_run(judging_inputs_job.name)),
    Step("the judging panels and their agreement with humans", "launched by hand", job_run(judging_job.name)),
    Step("prompt evolution's inputs", "launched by hand", job_run(evolution_inputs_job.name)),
    Step("each era of the eras folder", "era_config_sensor", Planner.eras),
)
