"""Named evaluation protocols, declared as data (one YAML file each in data/protocols/): which
harness tasks count, with how many shots, which solver, metric and filter, and how the protocol's
number is made from them.

`open_llm_leaderboard_v1` averages six raw scores (ARC-Challenge 25-shot acc_norm, HellaSwag 10-shot
acc_norm, MMLU 5-shot acc, TruthfulQA mc2 0-shot, Winogrande 5-shot acc, GSM8K 5-shot strict-match).
`open_llm_leaderboard_v2` (June 2024) rescales each score between the random baseline and 1, as 0
to 100 (a score below the baseline counts 0); BBH and MuSR are rescaled per subtask and then
averaged; IFEval is the mean of prompt- and instruction-level strict accuracy.

A task counts only where it was evaluated as the protocol says: by its solver, with its shots, no
system instruction and no task config overridden beyond where the data comes from. A run with
other settings is kept beside the benchmark's other runs, and the protocol names the task missing,
with what differs, unless another run of it (of the benchmark named after the task first, then of
any other benchmark that ran the same task) was run as the protocol says.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from eval_platform.benchmarks.declarations import DATA_LOCATION_KEYS, DeclarationError, declaration_files

if TYPE_CHECKING:
    import pandas as pd


class ProtocolTask(BaseModel):
    """One task of a protocol: the harness task (or group) whose results count, and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The task's name in the protocol (its column).")
    task: str = Field(default="", description="The harness task or group; default: the name.")
    benchmark: str = Field(default="", description="The benchmark tried first; default: the task's name.")
    metrics: tuple[str, ...] = Field(description="Averaged where several (IFEval's two strict accuracies).")
    filter: str = "none"
    num_fewshot: int = Field(description="The shots it is evaluated with.")
    solver: str = "harness"
    baseline: float | None = Field(default=None, description="The random baseline (None: 0, or per subtask).")
    per_subtask: bool = Field(default=False, description="Rescaled per subtask, each with its own baseline.")
    subtask_prefix: str = Field(default="", description="How its subtasks' names begin (default: task_).")
    unavailable_offline: str = Field(default="", description="Why it cannot run offline, if it cannot.")

    def model_post_init(self, context: object) -> None:
        object.__setattr__(self, "task", self.task or self.name)
        object.__setattr__(self, "benchmark", self.benchmark or self.task)

    def covers(self, task: str) -> bool:
        """Whether a harness task or group is this task or one of its subtasks."""
        return task == self.task or task.startswith(self.subtask_prefix or self.task + "_")


class Protocol(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    title: str
    normalized: bool = Field(default=False, description="Scores rescaled from [baseline, 1] to [0, 100].")
    tasks: tuple[ProtocolTask, ...]

    def task_for(self, benchmark: str) -> ProtocolTask:
        for task in self.tasks:
            if benchmark in (task.benchmark, task.task):
                return task
        raise ValueError(
            f"{benchmark} is not part of the {self.name} protocol (its benchmarks: "
            f"{', '.join(t.benchmark for t in self.tasks)})"
        )


def parse_protocol(path: Path) -> Protocol:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        return Protocol(**{"name": path.stem, **data})
    except (OSError, yaml.YAMLError, TypeError) as error:
        raise DeclarationError(f"{path}: not a protocol declaration: {error}") from error
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise DeclarationError(f"{path}: {problems}") from error


@functools.lru_cache(maxsize=32)
def _parsed_protocols(files: tuple[tuple[str, int, int], ...]) -> dict[str, Protocol]:
    return {Path(path).stem: parse_protocol(Path(path)) for path, _, _ in files}


def declared_protocols(folder: Path | str) -> dict[str, Protocol]:
    """Every protocol declared in the folder (`*.yaml`), by name (parsed again only when its files change)."""
    folder = Path(folder)
    return dict(_parsed_protocols(declaration_files(folder))) if folder.is_dir() else {}


def normalize(value: float, baseline: float) -> float:
    """A score rescaled from [baseline, 1] to [0, 100]; below the baseline, 0."""
    return max(0.0, (value - baseline) / (1.0 - baseline)) * 100.0


def settings_differences(spec: ProtocolTask, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """How a model's results of the task (and its subtasks) were evaluated otherwise than the
    protocol says: another solver, other shots, a system instruction, task config overridden."""
    own = [r for r in rows if spec.covers(r["task"])]
    differences = [
        f"evaluated by the {solver} solver, not the protocol's {spec.solver}"
        for solver in sorted({r["solver"] for r in own} - {spec.solver})
    ]
    shots = sorted(
        {r["num_fewshot"] for r in own if not r["is_group"] and r.get("num_fewshot") is not None} - {spec.num_fewshot}
    )
    if shots:
        differences.append(f"evaluated {', '.join(map(str, shots))}-shot, not the protocol's {spec.num_fewshot}-shot")
    for text in {r["settings"] for r in own if r.get("settings")}:
        settings = json.loads(text) if isinstance(text, str) else text
        if settings.get("limit") is not None:
            differences.append(f"evaluated on the first {settings['limit']} documents, not all")
        if settings.get("max_gen_toks") is not None:
            differences.append(f"generated within {settings['max_gen_toks']} new tokens, not the task's budget")
        if settings.get("system_instruction"):
            differences.append("evaluated with a system instruction")
        overridden = sorted(
            {key for task, config in (settings.get("overrides") or {}).items() if spec.covers(task) for key in config}
            - DATA_LOCATION_KEYS
        )
        if overridden:
            differences.append(f"evaluated with its task config overridden ({', '.join(overridden)})")
    return sorted(set(differences))


def _value(rows: Sequence[Mapping[str, Any]], task: str, metric: str, filter_name: str) -> Mapping[str, Any] | None:
    return next(
        (
            r
            for r in rows
            if r["task"] == task and r["metric"] == metric and r["filter"] == filter_name and r["value"] is not None
        ),
        None,
    )


def task_score(protocol: Protocol, spec: ProtocolTask, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """One model's raw (and, for a normalised protocol, rescaled) score on a task from one run's
    results, or None where they do not hold it."""
    if spec.per_subtask:
        subtasks = [
            r
            for r in rows
            if r["task"] != spec.task
            and spec.covers(r["task"])
            and not r["is_group"]
            and r["metric"] == spec.metrics[0]
            and r["filter"] == spec.filter
            and r["value"] is not None
        ]
        if not subtasks:
            return None
        missing = [r["task"] for r in subtasks if r["random_baseline"] is None]
        if missing:
            raise ValueError(f"{spec.task}: no random baseline for {missing} (not multiple choice)")
        group = _value(rows, spec.task, spec.metrics[0], spec.filter)
        raw = group["value"] if group else mean(r["value"] for r in subtasks)
        rescaled = mean(normalize(r["value"], r["random_baseline"]) for r in subtasks)
        return {"metric": spec.metrics[0], "raw": raw, "subtasks": len(subtasks), "normalized": rescaled,
                "n": sum(r["n"] or 0 for r in subtasks), "ci_low": None, "ci_high": None}  # fmt: skip
    looked_up = [_value(rows, spec.task, metric, spec.filter) for metric in spec.metrics]
    found = [f for f in looked_up if f is not None]
    if len(found) < len(looked_up):
        return None
    raw = mean(f["value"] for f in found)
    single = found[0] if len(found) == 1 else None
    return {
        "metric": " + ".join(spec.metrics) + ("" if spec.filter == "none" else f",{spec.filter}"),
        "raw": raw,
        "subtasks": None,
        "normalized": normalize(raw, spec.baseline or 0.0) if protocol.normalized else None,
        "n": single["n"] if single else None,
        "ci_low": single["ci_low"] if single and not protocol.normalized else None,
        "ci_high": single["ci_high"] if single and not protocol.normalized else None,
    }


def protocol_run(
    protocol: Protocol, spec: ProtocolTask, rows: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, Any] | None, list[str], list[Mapping[str, Any]]]:
    """A model's score on a task from the first run (a benchmark's results under one settings key
    and solver) that evaluated it as the protocol says, the benchmark named for the task first: the
    score, else how the runs differ from the protocol, and the rows the score or the first
    difference came from."""
    runs: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        if spec.covers(row["task"]):
            runs.setdefault((str(row["benchmark"]), str(row["settings_key"]), str(row["solver"])), []).append(row)
    first_differences: tuple[list[str], list[Mapping[str, Any]]] = ([], [])
    for _, evaluated in sorted(runs.items(), key=lambda run: (run[0][0] != spec.benchmark, run[0])):
        differences = settings_differences(spec, evaluated)
        score = None if differences else task_score(protocol, spec, evaluated)
        if score is not None:
            return score, [], evaluated
        if differences and not first_differences[0]:
            first_differences = (differences, evaluated)
    differences, evaluated = first_differences
    return None, differences, evaluated or next(iter(runs.values()), [])


def protocol_rows(protocol: Protocol, results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For every model with results: one row per task of the protocol (its score, or why it is
    missing) and the `average` of the scores, complete or partial."""
    rows = []
    for model in sorted({r["model"] for r in results}):
        own = [r for r in results if r["model"] == model]
        scored = []
        for spec in protocol.tasks:
            score, differences, evaluated = protocol_run(protocol, spec, own)
            first = evaluated[0] if evaluated else {}
            base = {
                "protocol": protocol.name,
                "model": model,
                "model_fingerprint": first.get("model_fingerprint"),
                "task": spec.name,
                "benchmark": first.get("benchmark"),
                "settings_key": first.get("settings_key"),
                "num_fewshot": spec.num_fewshot,
            }
            if score is None:
                reason = "; ".join(differences) or spec.unavailable_offline or "not evaluated yet"
                rows.append({**base, "metric": " + ".join(spec.metrics), "status": f"missing: {reason}"})
            else:
                value = score["normalized"] if protocol.normalized else score["raw"]
                scored.append((spec.name, value))
                rows.append({**base, **score, "score": value, "status": "scored"})
        missing = [spec.name for spec in protocol.tasks if spec.name not in dict(scored)]
        status = (
            "complete"
            if not missing
            else f"not measured: none of its {len(protocol.tasks)} tasks evaluated as it says"
            if not scored
            else f"partial: {len(scored)} of {len(protocol.tasks)} tasks (missing {', '.join(missing)})"
        )
        rows.append(
            {
                "protocol": protocol.name,
                "model": model,
                "task": "average",
                "metric": "mean of the normalised scores" if protocol.normalized else "mean of the tasks",
                "score": mean(v for _, v in scored) if scored else None,
                "n": len(scored),
                "status": status,
            }
        )
    return rows


def protocol_table(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """Models as rows; each task's score (a normalised one with its raw score in brackets) and the
    average with its status, as the leaderboard shows them."""
    import pandas as pd

    table = []
    for model in sorted({r["model"] for r in rows}):
        row: dict[str, str] = {"model": model}
        for r in (r for r in rows if r["model"] == model):
            if r["task"] == "average":
                row["average"] = f"{r['score']:.4g} ({r['status']})" if r.get("score") is not None else r["status"]
            elif r["status"] == "scored":
                normalized = r.get("normalized")
                row[r["task"]] = (
                    f"{normalized:.2f} (raw {r['raw']:.4f})" if normalized is not None else f"{r['raw']:.4f}"
                )
            else:
                row[r["task"]] = r["status"].split(":")[0]
        table.append(row)
    return pd.DataFrame(table)
