"""Named evaluation protocols: which benchmarks, with how many shots, in which mode and format,
scored by which metric, and how the protocol's number is made from them.

`open_llm_leaderboard_v1` is the Open LLM Leaderboard's first protocol: ARC-Challenge 25-shot
acc_norm, HellaSwag 10-shot acc_norm, MMLU 5-shot acc, TruthfulQA 0-shot mc2, Winogrande 5-shot
acc and GSM8K 5-shot (strict-match), all in lm-evaluation-harness's format, and their average.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Any

from eval_platform.benchmarks.specs import BENCHMARKS


@dataclass(frozen=True)
class ProtocolTask:
    benchmark: str
    mode: str
    metric: str
    fewshot: bool = True  # with the number of shots of the benchmark's few-shot source, else zero-shot
    prompt_format: str = "harness"

    @property
    def num_fewshot(self) -> int:
        source = BENCHMARKS[self.benchmark].fewshot
        return source.shots if self.fewshot and source else 0


@dataclass(frozen=True)
class Protocol:
    name: str
    title: str
    tasks: tuple[ProtocolTask, ...]

    def task_for(self, benchmark: str) -> ProtocolTask:
        for task in self.tasks:
            if task.benchmark == benchmark:
                return task
        raise ValueError(
            f"{benchmark} is not part of the {self.name} protocol "
            f"(its benchmarks: {', '.join(t.benchmark for t in self.tasks)})"
        )


PROTOCOLS: dict[str, Protocol] = {
    protocol.name: protocol
    for protocol in [
        Protocol(
            "open_llm_leaderboard_v1",
            "Open LLM Leaderboard (v1)",
            (
                ProtocolTask("arc_challenge", "loglikelihood", "acc_norm"),
                ProtocolTask("hellaswag", "loglikelihood", "acc_norm"),
                ProtocolTask("mmlu", "loglikelihood", "acc"),
                ProtocolTask("truthfulqa_mc2", "loglikelihood", "mc2", fewshot=False),
                ProtocolTask("winogrande", "loglikelihood", "acc"),
                ProtocolTask("gsm8k", "generate", "strict-match"),
            ),
        ),
    ]
}


def protocol_results(protocol: Protocol, scores: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For every model with any score of the protocol: one row per task (its score, or why it is
    missing) and an `average` row, complete only when every task is scored."""
    models = {(s["model"], s["model_fingerprint"]) for s in scores}
    rows = []
    for model, fingerprint in sorted(models):
        values = []
        for task in protocol.tasks:
            match = [
                s
                for s in scores
                if s["model_fingerprint"] == fingerprint
                and s["benchmark"] == task.benchmark
                and s["mode"] == task.mode
                and s["prompt_format"] == task.prompt_format
                and s["num_fewshot"] == task.num_fewshot
                and s["metric"] == task.metric
            ]
            row = {
                "protocol": protocol.name,
                "model": model,
                "model_fingerprint": fingerprint,
                "benchmark": task.benchmark,
                "num_fewshot": task.num_fewshot,
                "mode": task.mode,
                "prompt_format": task.prompt_format,
                "metric": task.metric,
            }
            if match:
                values.append(match[0]["accuracy"])
                rows.append(
                    {**row, **{k: match[0][k] for k in ("n", "accuracy", "ci_low", "ci_high")}, "status": "scored"}
                )
            else:
                rows.append(
                    {
                        **row,
                        "n": None,
                        "accuracy": None,
                        "ci_low": None,
                        "ci_high": None,
                        "status": f"missing: no {task.num_fewshot}-shot {task.metric} score",
                    }
                )
        missing = [r["benchmark"] for r in rows[-len(protocol.tasks) :] if r["status"] != "scored"]
        rows.append(
            {
                "protocol": protocol.name,
                "model": model,
                "model_fingerprint": fingerprint,
                "benchmark": "average",
                "num_fewshot": None,
                "mode": None,
                "prompt_format": None,
                "metric": "mean of the tasks",
                "n": len(values),
                "accuracy": mean(values) if values else None,
                "ci_low": None,
                "ci_high": None,
                "status": "complete"
                if not missing
                else f"partial: {len(values)} of {len(protocol.tasks)} tasks (missing {', '.join(missing)})",
            }
        )
    return rows
