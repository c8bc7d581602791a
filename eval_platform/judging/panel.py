"""What the prompt-evolution era takes from the judges' measured agreement with humans (the stored
`judge_agreement` rows): which panel members fall below a bound on a chosen set (the asset check
that runs before an era), and weights for the panel's average (the seed's "learned judge
weights"; the era's default stays the seed's plain average)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean
from typing import Literal

from eval_platform.judging.agreement import AgreementMetric, Estimate

FlagStatus = Literal["ok", "below", "unmeasured"]


@dataclass(frozen=True)
class JudgeFlag:
    judge: str
    set_name: str
    metric: str
    estimate: Estimate | None  # None: the judge has no verdicts on the set
    bound: float
    status: FlagStatus

    @property
    def message(self) -> str:
        if self.estimate is None or self.estimate.value is None:
            return f"{self.judge} has no measured {self.metric} on {self.set_name}"
        e = self.estimate
        interval = f" (95% {e.low:.3f}-{e.high:.3f}, n={e.n})" if e.low is not None and e.high is not None else ""
        relation = "below" if self.status == "below" else "at or above"
        return (
            f"{self.judge}: {self.metric} {e.value:.3f}{interval} on {self.set_name}, {relation} the bound {self.bound}"
        )


def _measured(rows: Sequence[AgreementMetric], set_name: str, metric: str) -> dict[str, Estimate]:
    return {
        row.judge: Estimate(row.value, row.low, row.high, row.n, row.method)
        for row in rows
        if row.set_name == set_name and row.metric == metric
    }


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
        estimate = measured.get(judge)
        if estimate is None or estimate.value is None:
            flags.append(JudgeFlag(judge, set_name, metric, estimate, bound, "unmeasured"))
            continue
        compared = estimate.high if side == "high" and estimate.high is not None else estimate.value
        flags.append(JudgeFlag(judge, set_name, metric, estimate, bound, "below" if compared < bound else "ok"))
    return flags


def agreement_weights(
    rows: Sequence[AgreementMetric], panel: Sequence[str], set_name: str, metric: str = "kappa", floor: float = 0.0
) -> dict[str, float]:
    """Panel weights proportional to each judge's measured agreement on one set (at least `floor`;
    an unmeasured judge gets the measured judges' mean), summing to 1; equal weights when every
    weight is 0."""
    measured = {
        judge: max(e.value, floor)
        for judge, e in _measured(rows, set_name, metric).items()
        if judge in panel and e.value is not None
    }
    fallback = mean(measured.values()) if measured else 1.0
    raw = {judge: measured.get(judge, fallback) for judge in panel}
    total = sum(raw.values())
    if total <= 0:
        return {judge: 1.0 / len(panel) for judge in panel}
    return {judge: value / total for judge, value in raw.items()}
