"""The protocol `open_llm_leaderboard_v2`: the Open LLM Leaderboard's second protocol (June 2024),
computed as the leaderboard computed it from lm-evaluation-harness's `leaderboard` tasks.

Each score is rescaled between the random baseline and 1, as 0 to 100, a score below the baseline
counting 0. BBH and MuSR are rescaled per subtask (each with its own number of choices) and then
averaged unweighted; MMLU-Pro's baseline is 0.1, GPQA's 0.25; MATH-hard and IFEval have none, and
IFEval's score is the mean of prompt-level and instruction-level strict accuracy. The protocol's
number is the mean of the six normalised scores, labelled partial when any is missing (GPQA is
gated on the Hub, MATH-hard and MuSR are not available offline: each runs by hub id where a user
has access, and is otherwise skipped with its reason).

A task counts only where it was evaluated as the leaderboard evaluated it: with the harness's own
shots for each of its tasks, no system instruction and no task config overridden beyond where its
data comes from. A run with other settings (a 0-shot MMLU-Pro from the launchpad, say) is kept
beside the benchmark's other runs (each under its settings key), and the protocol names the task
missing, with what differs, unless another run of it, of the same benchmark or of another (one
declared with other shots beside the task's own, say), was run as the protocol says.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Any

from eval_platform.benchmarks.harness_tasks import DATA_LOCATION_KEYS

PROTOCOL = "open_llm_leaderboard_v2"
TITLE = "Open LLM Leaderboard (v2)"


@dataclass(frozen=True)
class V2Task:
    task: str  # the harness's task or group
    metrics: tuple[str, ...]  # averaged (IFEval: prompt- and instruction-level strict accuracy)
    shots: int  # each of its tasks' own, in the harness's YAML (none given: 0)
    baseline: float | None = None  # None with per_subtask: each subtask's own (1 / its choices)
    per_subtask: bool = False
    unavailable_offline: str = ""
    subtask_prefix: str = ""  # how its subtasks' names begin, where not with the task's name and "_"

    def covers(self, task: str) -> bool:
        """Whether a harness task or group is this task or one of its subtasks."""
        return task == self.task or task.startswith(self.subtask_prefix or self.task + "_")


V2_TASKS = (
    V2Task("leaderboard_bbh", ("acc_norm",), 3, per_subtask=True),
    V2Task(
        "leaderboard_gpqa",
        ("acc_norm",),
        0,
        baseline=0.25,
        unavailable_offline="GPQA (Idavidrein/gpqa) is gated on the Hub and not redistributed",
    ),
    V2Task("leaderboard_ifeval", ("prompt_level_strict_acc", "inst_level_strict_acc"), 0, baseline=0.0),
    V2Task(
        "leaderboard_math_hard",
        ("exact_match",),
        4,
        baseline=0.0,
        unavailable_offline="MATH-hard (lighteval/MATH-Hard) was taken down after a DMCA notice; not available offline",
        subtask_prefix="leaderboard_math_",
    ),
    V2Task("leaderboard_mmlu_pro", ("acc",), 5, baseline=0.1),
    V2Task(
        "leaderboard_musr",
        ("acc_norm",),
        0,
        per_subtask=True,
        unavailable_offline="MuSR (TAUR-Lab/MuSR) is not available offline",
    ),
)


def normalize(value: float, baseline: float) -> float:
    """A score rescaled from [baseline, 1] to [0, 100]; below the baseline, 0."""
    return max(0.0, (value - baseline) / (1.0 - baseline)) * 100.0


def settings_differences(spec: V2Task, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """How a model's harness results of the task (and its subtasks) were evaluated otherwise than
    the leaderboard evaluated it: other shots, a system instruction, task config overridden."""
    own = [r for r in rows if spec.covers(r["task"])]
    shots = sorted(
        {r["num_fewshot"] for r in own if not r["is_group"] and r.get("num_fewshot") is not None} - {spec.shots}
    )
    differences = (
        [f"evaluated {', '.join(map(str, shots))}-shot, not the protocol's {spec.shots}-shot"] if shots else []
    )
    for settings in {r["settings"] for r in own if r.get("settings")}:
        settings = json.loads(settings)
        if settings.get("system_instruction"):
            differences.append("evaluated with a system instruction")
        overridden = sorted(
            {key for task, config in (settings.get("overrides") or {}).items() if spec.covers(task) for key in config}
            - DATA_LOCATION_KEYS
        )
        if overridden:
            differences.append(f"evaluated with its task config overridden ({', '.join(overridden)})")
    return sorted(set(differences))


def _value(rows: Sequence[Mapping[str, Any]], task: str, metric: str) -> Mapping[str, Any] | None:
    return next(
        (
            r
            for r in rows
            if r["task"] == task and r["metric"] == metric and r["filter"] == "none" and r["value"] is not None
        ),
        None,
    )


def task_score(spec: V2Task, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """One model's raw and normalised score on a v2 task from its harness results, or None where
    they do not hold it."""
    if spec.per_subtask:
        subtasks = [
            r
            for r in rows
            if r["task"] != spec.task
            and spec.covers(r["task"])
            and not r["is_group"]
            and r["metric"] == spec.metrics[0]
            and r["filter"] == "none"
            and r["value"] is not None
        ]
        if not subtasks:
            return None
        if any(r["random_baseline"] is None for r in subtasks):
            missing = [r["task"] for r in subtasks if r["random_baseline"] is None]
            raise ValueError(f"{spec.task}: no random baseline for {missing} (not multiple choice)")
        group = _value(rows, spec.task, spec.metrics[0])
        raw = group["value"] if group else mean(r["value"] for r in subtasks)
        return {
            "metric": spec.metrics[0],
            "raw": raw,
            "subtasks": len(subtasks),
            "normalized": mean(normalize(r["value"], r["random_baseline"]) for r in subtasks),
        }
    found = [_value(rows, spec.task, metric) for metric in spec.metrics]
    if any(f is None for f in found):
        return None
    raw = mean(f["value"] for f in found)
    return {
        "metric": " + ".join(spec.metrics),
        "raw": raw,
        "subtasks": None,
        "normalized": normalize(raw, spec.baseline),
    }


def protocol_run(
    spec: V2Task, rows: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, Any] | None, list[str], list[Mapping[str, Any]]]:
    """A model's score on a v2 task from the first run (a benchmark partition's results under one
    settings key) that evaluated it with the protocol's settings, those of the benchmark named after
    the task first (another, declared with other shots say, may hold the same task): the score,
    else how the runs differ from the protocol, and the rows the score or the first difference came
    from."""
    runs: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        if spec.covers(row["task"]):
            runs.setdefault((str(row.get("benchmark")), str(row.get("settings_key"))), []).append(row)
    first_differences: tuple[list[str], list[Mapping[str, Any]]] = ([], [])
    for _, evaluated in sorted(runs.items(), key=lambda run: (run[0][0] != spec.task, run[0])):
        differences = settings_differences(spec, evaluated)
        score = None if differences else task_score(spec, evaluated)
        if score is not None:
            return score, [], evaluated
        if differences and not first_differences[0]:
            first_differences = (differences, evaluated)
    differences, evaluated = first_differences
    return None, differences, evaluated or next(iter(runs.values()), [])


def protocol_rows(
    results: Sequence[Mapping[str, Any]], skipped: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """For every model with harness results: one row per v2 task (its raw and normalised score, or
    why it is missing, evaluated otherwise than the protocol says included) and the `average` of
    the normalised scores, complete or partial."""
    skipped = skipped or {}
    rows = []
    for model in sorted({r["model"] for r in results}):
        own = [r for r in results if r["model"] == model]
        scored = []
        for spec in V2_TASKS:
            score, differences, evaluated = protocol_run(spec, own)
            fingerprint = next((r["model_fingerprint"] for r in evaluated), None)
            base = {"protocol": PROTOCOL, "model": model, "model_fingerprint": fingerprint, "benchmark": spec.task}
            if score is None:
                reason = (
                    "; ".join(differences) or skipped.get(spec.task) or spec.unavailable_offline or "not evaluated yet"
                )
                rows.append(
                    {
                        **base,
                        "metric": " + ".join(spec.metrics),
                        "raw": None,
                        "normalized": None,
                        "subtasks": None,
                        "status": f"missing: {reason}",
                    }
                )
            else:
                scored.append((spec.task, score["normalized"]))
                rows.append({**base, **score, "status": "scored"})
        missing = [spec.task for spec in V2_TASKS if spec.task not in dict(scored)]
        rows.append(
            {
                "protocol": PROTOCOL,
                "model": model,
                "model_fingerprint": None,
                "benchmark": "average",
                "metric": "mean of the normalised scores",
                "raw": None,
                "normalized": mean(v for _, v in scored) if scored else None,
                "subtasks": len(scored),
                "status": "complete"
                if not missing
                else f"partial: {len(scored)} of {len(V2_TASKS)} tasks (missing {', '.join(missing)})",
            }
        )
    return rows


def v2_table(rows: Any) -> Any:
    """Models as rows; each task's normalised score (raw in brackets) and the average with its
    status, as the leaderboard shows them."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    if not len(frame):
        return frame
    table = []
    for model, own in frame.groupby("model", sort=True):
        row: dict[str, Any] = {"model": model}
        for r in own.itertuples():
            if r.benchmark == "average":
                row["average (normalised)"] = (
                    f"{r.normalized:.2f} ({r.status})"
                    if r.normalized == r.normalized and r.normalized is not None
                    else r.status
                )
            else:
                row[r.benchmark] = (
                    f"{r.normalized:.2f} (raw {r.raw:.4f})" if r.status == "scored" else r.status.split(":")[0]
                )
        table.append(row)
    return pd.DataFrame(table)
