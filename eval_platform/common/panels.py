"""A judge panel and how far its judges are trusted, shared by the two domains that meet here: the
judging domain measures each judge against humans (a row per metric, judge and set:
`AgreementMetric`, its table `judge_human_agreement`), and the evolution domain's eras judge with a
panel (`JudgePanel`, the judge fields of an era's settings). From the measured rows: which panel
members fall below a bound on a chosen set (the asset check before an era), and weights for the
panel's average (the seed's "learned judge weights"; an era's default stays its plain average)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from eval_engine import DEFAULT_SEED, Sampling
from eval_platform.common.judges import judge_named
from eval_platform.common.models import DEFAULT_LOCAL_MODEL

WEIGHTINGS = ("average", "agreement")
AGREEMENT_METRICS = ("kappa", "accuracy")
FlagStatus = Literal["ok", "below", "unmeasured"]


@dataclass(frozen=True)
class AgreementMetric:
    """One metric of one judge on one human-labelled set, with its 95% interval and how it was made
    ("wilson", "bootstrap" or "none"), as the store keeps it (long format: a view pivots it)."""

    judge: str
    set_name: str
    metric: str
    value: float | None
    low: float | None
    high: float | None
    n: int
    method: str


class JudgeSampling(BaseModel):
    """How judges answer, declared once: greedy (the default), or k verdicts drawn with the sampling
    settings a benchmark's generations take (an era's panel, the pairwise panels)."""

    judge_temperature: float = Field(
        default=0, ge=0, description="Judges answer at this temperature (0: greedy, one verdict a question)."
    )
    judge_top_p: float | None = Field(default=None, gt=0, le=1, description="Judges' nucleus (top-p) mass; unset: off.")
    judge_top_k: int | None = Field(default=None, ge=0, description="Judges' k likeliest tokens only; unset: off.")
    judge_min_p: float | None = Field(default=None, ge=0, le=1, description="Judges' min-p threshold; unset: off.")
    judge_samples: int = Field(
        default=1,
        ge=1,
        description="Verdicts per judge and question (k, at a temperature above 0): a rubric score is their mean, "
        "a pairwise verdict their majority; their spread is the judge's self-consistency.",
    )
    judge_seed: int = Field(
        default=DEFAULT_SEED, description="The judges' samples' seed (the same seed, the same verdicts)."
    )

    @model_validator(mode="after")
    def _samples_need_a_temperature(self) -> JudgeSampling:
        if self.judge_samples > 1 and self.judge_temperature == 0:
            raise ValueError(
                f"judge_samples {self.judge_samples} at judge_temperature 0 would ask each judge the same greedy "
                "question again: set a judge_temperature above 0"
            )
        return self

    @property
    def judge_sampling(self) -> Sampling | None:
        """How the judges draw their verdicts; None where they answer greedily."""
        if self.judge_temperature == 0:
            return None
        return Sampling(self.judge_temperature, self.judge_top_k, self.judge_top_p, self.judge_min_p, self.judge_seed)


class JudgePanel(JudgeSampling):
    """A panel's judges and how far they are trusted, declared once: the judge fields of an era's
    settings (an era file's, the era's launchpad config)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    judge_panel: dict[str, str] = Field(
        default={"smollm2": DEFAULT_LOCAL_MODEL},
        description='Judge name -> model, e.g. {"openai": "openai/gpt-4o-mini", "claude": '
        '"anthropic/claude-3-5-sonnet-20241022", "gemini": "gemini/gemini-1.5-flash"}. The default is '
        "the offline panel: the local model judging by digit probabilities.",
    )
    judge_modes: dict[str, str] = Field(
        default={},
        description="Judge name -> the judge asking its model the rubric: written (it writes the rubric's JSON), "
        "probabilities (its next-digit distributions) or another registered judge (or module:Class). A judge "
        "not named is asked its model's own way: probabilities for a local model, written for any other.",
    )
    # Each judge's agreement with humans is its model's, measured on a human-labelled set.
    judge_weighting: str = Field(
        default="average",
        description="How the panel's scores combine: average (the seed's plain mean) or agreement (weighted by "
        "each judge's measured agreement with humans on agreement_set, read when the era runs).",
    )
    agreement_set: str = Field(
        default="pandalm_test",
        description="The human-labelled set a judge's agreement is measured on (PandaLM's: three annotators each).",
    )
    agreement_metric: str = Field(default="kappa", description="kappa (Cohen's, against the labels) or accuracy.")
    min_judge_agreement: float = Field(
        default=0.2,
        description="The flag_panel_judges check flags a panel judge whose agreement on agreement_set is below "
        "this, or unmeasured (0.2: the bottom of 'fair' agreement for kappa).",
    )

    @field_validator("judge_weighting", "agreement_metric")
    @classmethod
    def _choices(cls, value: str, info: ValidationInfo) -> str:
        name = str(info.field_name)
        allowed = {"judge_weighting": WEIGHTINGS, "agreement_metric": AGREEMENT_METRICS}[name]
        if value not in allowed:
            raise ValueError(f"{name}: {value!r} is not one of {', '.join(allowed)}")
        return value

    @model_validator(mode="after")
    def _panel_judge_modes(self) -> JudgePanel:
        unknown = sorted(set(self.judge_modes) - set(self.judge_panel))
        if unknown:
            raise ValueError(f"judge_modes names judges not in the panel: {', '.join(unknown)}")
        for mode in self.judge_modes.values():
            judge_named(mode)
        return self

    @property
    def models(self) -> list[str]:
        return sorted(set(self.judge_panel.values()))


def declared_panels(folder: Path) -> dict[str, JudgePanel]:
    """The panel of each era configured in `folder` (`<era>.json`), by era."""
    return {
        path.stem: JudgePanel(**{k: v for k, v in json.loads(path.read_text()).items() if k in JudgePanel.model_fields})
        for path in sorted(Path(folder).glob("*.json"))
    }


@dataclass(frozen=True)
class JudgeFlag:
    judge: str
    set_name: str
    metric: str
    measured: AgreementMetric | None  # None: the judge has no verdicts on the set
    bound: float
    status: FlagStatus

    @property
    def message(self) -> str:
        m = self.measured
        if m is None or m.value is None:
            return f"{self.judge} has no measured {self.metric} on {self.set_name}"
        interval = f" (95% {m.low:.3f}-{m.high:.3f}, n={m.n})" if m.low is not None and m.high is not None else ""
        relation = "below" if self.status == "below" else "at or above"
        return (
            f"{self.judge}: {self.metric} {m.value:.3f}{interval} on {self.set_name}, {relation} the bound {self.bound}"
        )


def _measured(rows: Sequence[AgreementMetric], set_name: str, metric: str) -> dict[str, AgreementMetric]:
    return {row.judge: row for row in rows if row.set_name == set_name and row.metric == metric}


def flag_judges(
    rows: Sequence[AgreementMetric],
    panel: Sequence[str],
    set_name: str,
    bound: float,
    metric: str = "kappa",
    side: Literal["value", "high"] = "value",
) -> list[JudgeFlag]:
    """Each panel judge's standing on one set: "below" when its metric (or, with side="high", even
    the top of its interval) is under the bound, "unmeasured" when it has no verdicts there."""
    measured = _measured(rows, set_name, metric)
    flags = []
    for judge in panel:
        found = measured.get(judge)
        if found is None or found.value is None:
            flags.append(JudgeFlag(judge, set_name, metric, found, bound, "unmeasured"))
            continue
        compared = found.high if side == "high" and found.high is not None else found.value
        flags.append(JudgeFlag(judge, set_name, metric, found, bound, "below" if compared < bound else "ok"))
    return flags


def agreement_weights(
    rows: Sequence[AgreementMetric], panel: Sequence[str], set_name: str, metric: str = "kappa", floor: float = 0.0
) -> dict[str, float]:
    """Panel weights proportional to each judge's measured agreement on one set (at least `floor`;
    an unmeasured judge gets the measured judges' mean), summing to 1; equal weights when every
    weight is 0."""
    measured = {
        judge: max(row.value, floor)
        for judge, row in _measured(rows, set_name, metric).items()
        if judge in panel and row.value is not None
    }
    fallback = mean(measured.values()) if measured else 1.0
    raw = {judge: measured.get(judge, fallback) for judge in panel}
    total = sum(raw.values())
    if total <= 0:
        return {judge: 1.0 / len(panel) for judge in panel}
    return {judge: value / total for judge, value in raw.items()}
