"""The judging domain's settings, declared once: each is the launchpad config of its asset (and its
defaults are the offline slice `make run` judges: the local model as the only judge, a few items).

- `ShippedData`: where the shipped files are (sets, recorded verdicts, MT-Bench's questions and
  answers); `JudgingSetsSettings`: which pairwise sets are stored (the shipped ones, every
  blind-evaluation sheet's, and two roster models' generations on a benchmark);
- `PanelSettings`: a panel judging stored sets in both orders (MT-Bench's pair-v2 prompt), reusing
  the verdicts stored for the same judge and prompt unless `recompute`; greedy, or sampled as an
  era's panel is (`JudgeSampling`: k verdicts a call, their majority);
- `MTBenchSettings`: a panel judging MT-Bench's model pairs with FastChat's prompts per category and
  turn; `GradingSettings`: MT-Bench's single-answer grading (1-10);
- `AgreementSettings`, `LeaderboardSettings`: the intervals and the length-controlled baseline.
"""

from __future__ import annotations

from typing import get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from eval_platform.common.intervals import BOOTSTRAP_ROUNDS
from eval_platform.common.judges import judge_named
from eval_platform.common.models import DEFAULT_LOCAL_MODEL
from eval_platform.common.panels import JudgeSampling
from eval_platform.judging.datasets import DATA_JUDGING, parse_generation_pair
from eval_platform.judging.pairwise import JUDGE_MAX_TOKENS, PairsMode

JUDGES_DESCRIPTION = (
    "The judges, by model name: local/... (a small local model judges by its next-letter probabilities), "
    "served/..., or a litellm string such as openai/gpt-4o (through the gateway)."
)
TURNS = (1, 2)
RECOMPUTE_DESCRIPTION = (
    "Ask every judge again, ignoring the verdicts stored for the same judge, prompt and pair (by default those "
    "are reused: a killed run's rerun asks only what it had not kept)."
)
MODE_DESCRIPTION = (
    "The judge asking each model: written (it writes MT-Bench's [[A]]/[[B]]/[[C]]; generate is its older name), "
    "probabilities (the likeliest letter) or another registered judge (or module:Class); "
    "unset: probabilities for a local model, written for any other."
)


class JudgingSettings(BaseModel):
    """Plain field types (Dagster's launchpad takes no Literal): the choices are checked here."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("mode", check_fields=False)
    @classmethod
    def _registered_judge(cls, value: str | None) -> str | None:
        if value is not None:
            judge_named(value)
        return value

    @field_validator("pairs", "turns", check_fields=False)
    @classmethod
    def _choices(cls, value: object, info: ValidationInfo) -> object:
        name = str(info.field_name)
        allowed = {"pairs": get_args(PairsMode), "turns": TURNS}[name]
        for one in value if isinstance(value, tuple) else (value,):
            if one not in allowed:
                raise ValueError(f"{name}: {one!r} is not one of {', '.join(map(repr, allowed))}")
        return value


class ShippedData(JudgingSettings):
    folder: str = Field(
        default=str(DATA_JUDGING),
        description="The shipped judging data (LLMBar, PandaLM, MT-Bench; data/judging/SOURCES.md).",
    )


class JudgingSetsSettings(ShippedData):
    blind_sheets: bool = Field(
        default=True, description="Store every tallied blind-evaluation sheet as a set (its raters' winners as labels)."
    )
    generations: tuple[str, ...] = Field(
        default=(),
        description="Sets of two roster models' generated answers, each 'benchmark|model_a|model_b' (both "
        "evaluated on a generative benchmark by the same solver and settings).",
    )

    @field_validator("generations")
    @classmethod
    def _pairs(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pair in value:
            parse_generation_pair(pair)
        return value


class PanelSettings(JudgingSettings, JudgeSampling):
    judges: tuple[str, ...] = Field(default=(DEFAULT_LOCAL_MODEL,), min_length=1, description=JUDGES_DESCRIPTION)
    sets: tuple[str, ...] = Field(
        default=("pandalm_test", "blind|*"),
        min_length=1,
        description="The stored sets to judge, by name or pattern ('blind|*': every blind sheet's, "
        "'gsm8k|*': every generation set on GSM8K).",
    )
    items: int | None = Field(default=2, gt=0, description="The first N items of each set; unset: every item.")
    mode: str | None = Field(default=None, description=MODE_DESCRIPTION)
    max_tokens: int = Field(default=JUDGE_MAX_TOKENS, gt=0, description="A judgment's token budget (generate).")
    recompute: bool = Field(default=False, description=RECOMPUTE_DESCRIPTION)


class MTBenchSettings(JudgingSettings, JudgeSampling):
    judges: tuple[str, ...] = Field(default=(DEFAULT_LOCAL_MODEL,), min_length=1, description=JUDGES_DESCRIPTION)
    models: tuple[str, ...] = Field(
        default=(), description="The shipped models whose answers are paired; empty: all 8."
    )
    questions: tuple[int, ...] = Field(
        default=(107,),
        description="MT-Bench question ids; empty: all 80. (107: a reasoning question with a reference.)",
    )
    turns: tuple[int, ...] = Field(default=(1,), min_length=1, description="1, 2 (the second turn) or both.")
    pairs: str = Field(
        default="pairwise-baseline",
        description="Every pair of models, or each model against the baseline (FastChat's).",
    )
    baseline: str = Field(default="gpt-3.5-turbo", description="The model each is paired with (pairwise-baseline).")
    mode: str | None = Field(default=None, description=MODE_DESCRIPTION)
    max_tokens: int = Field(default=JUDGE_MAX_TOKENS, gt=0, description="A judgment's token budget (generate).")
    recompute: bool = Field(default=False, description=RECOMPUTE_DESCRIPTION)


class GradingSettings(JudgingSettings):
    judges: tuple[str, ...] = Field(
        default=(DEFAULT_LOCAL_MODEL,), min_length=1, description="The graders (they write MT-Bench's [[rating]])."
    )
    models: tuple[str, ...] = Field(
        default=(), description="The shipped models whose answers are graded; empty: all 8."
    )
    questions: tuple[int, ...] = Field(default=(107,), description="MT-Bench question ids; empty: all 80.")
    turns: tuple[int, ...] = Field(default=(1, 2), min_length=1, description="The turns graded.")
    max_tokens: int = Field(default=JUDGE_MAX_TOKENS, gt=0, description="A grade's token budget.")


class AgreementSettings(JudgingSettings):
    rounds: int = Field(default=BOOTSTRAP_ROUNDS, ge=0, description="Bootstrap rounds of each interval (seeded).")


class LeaderboardSettings(JudgingSettings):
    rounds: int = Field(default=200, ge=0, description="Bootstrap rounds of the win-rate and rating intervals.")
    lc_baseline: str | None = Field(
        default="gpt-3.5-turbo",
        description="The model the length-controlled win rate (AlpacaEval 2's) is against; unset: none.",
    )
    min_battles: int = Field(default=1, gt=0, description="Models with fewer battles are left out.")
