"""One run of an era, from where it starts (`eras.era_start`) to its status: its row of `eras`, its
panel weighed by the judges' measured agreement with humans, its models answering through the
response cache when it keeps one, and each complete generation handed over as the rows its
checkpoint stores, the run's calls, cache hits and cost counted as they come."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, cast

import pandas as pd

from eval_engine import token_counter
from eval_platform.common.gateway import AnsweredCall, KeptResponses, ResponseCachedModel
from eval_platform.common.keeping import Keeping
from eval_platform.common.models import Completion, LanguageModel
from eval_platform.common.panels import AgreementMetric, agreement_weights, flag_judges
from eval_platform.evolution.eras import EraStart, config_hash, generation_frames
from eval_platform.evolution.genetic import EraSettings, GenerationRecord, run_era

if TYPE_CHECKING:
    from eval_platform.evolution.store.eras import CachedResponse

# Stores one complete generation: its number, its checkpoint's rows by table, its new cached responses.
SaveGeneration = Callable[[int, dict[str, pd.DataFrame], pd.DataFrame], None]


def era_row(era: str, settings: EraSettings, start: EraStart, at: datetime) -> pd.DataFrame:
    """The era's row of `eras` as a run begins: running, after the generations it has stored."""
    return pd.DataFrame(
        [
            {
                "era": era,
                "config": settings.model_dump_json(),
                "config_hash": config_hash(era, settings),
                "compression_model": settings.compression_model,
                "judge_panel": json.dumps(settings.judge_panel),
                "population_size": settings.population_size,
                "status": "running",
                "generations_done": start.resume.generation if start.resume else None,
                "started_at": at,
                "updated_at": at,
                "finished_at": None,
            }
        ]
    )


def known_responses(rows: Sequence[CachedResponse]) -> dict[str, Completion]:
    """Stored rows of the response cache as the completions they hold, by request key."""
    return {
        row["key"]: Completion(
            row["text"],
            0,
            0,
            json.loads(row["first_token_logprobs"] or "null"),
            row["prompt_tokens"],
            row["completion_tokens"],
            row["cost_usd"],
        )
        for row in rows
    }


def cache_rows(
    era: str, entries: Mapping[str, tuple[str, Mapping[str, object], Completion]], at: datetime
) -> pd.DataFrame:
    """The response cache's new entries as its rows, first answered in `era`."""
    return pd.DataFrame(
        [
            {
                "key": key,
                "model": model,
                "request": json.dumps(request),
                "text": c.text,
                "first_token_logprobs": json.dumps(c.first_token_logprobs),
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "cost_usd": c.cost_usd,
                "first_era": era,
                "created_at": at,
            }
            for key, (model, request, c) in entries.items()
        ]
    )


def panel_weights(
    settings: EraSettings, measured: Sequence[AgreementMetric], log: logging.Logger
) -> dict[str, float] | None:
    """The panel against its measured agreement with humans on the era's set: each judge below the
    bound or unmeasured named in the log; the judges' weights by name when the era weighs them by
    agreement (None: the seed's plain average)."""
    for flag in flag_judges(
        measured, settings.models, settings.agreement_set, settings.min_judge_agreement, settings.agreement_metric
    ):
        if flag.status != "ok":
            log.warning(f"judge flagged ({flag.status}): {flag.message}")
    if settings.judge_weighting == "average":
        return None
    by_model = agreement_weights(measured, settings.models, settings.agreement_set, settings.agreement_metric)
    weights = {name: by_model[model] for name, model in settings.judge_panel.items()}
    log.info(f"judge weights by {settings.agreement_metric} on {settings.agreement_set}: {weights}")
    return weights


@dataclass
class EraProgress:
    """What a run of an era has done: its status, and the generations it checkpointed with their
    calls (cache hits among them) and cost."""

    status: str = "running"
    generations: int = 0
    calls: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0

    def add(self, calls: pd.DataFrame) -> None:
        """One more checkpointed generation, with its `gateway_calls` rows."""
        self.generations += 1
        self.calls += len(calls)
        self.cache_hits += int(calls["cached"].sum())
        self.cost_usd += float(calls["cost_usd"].sum())

    @property
    def cache_hit_rate(self) -> float:
        return self.cache_hits / self.calls if self.calls else 0.0


@dataclass
class EraRun:
    """An era's run from where it starts: its panel's quality-score fields (`judges`), the judges'
    weights (None: a plain average) and the response cache's stored rows (`responses`; None: the
    era keeps no cache)."""

    era: str
    settings: EraSettings
    start: EraStart
    judges: Sequence[str]
    weights: Mapping[str, float] | None = None
    responses: Sequence[CachedResponse] | None = None
    cache: KeptResponses | None = field(init=False)
    unsaved: list[tuple[str, AnsweredCall]] = field(default_factory=list, init=False)  # kept, to be saved

    def __post_init__(self) -> None:
        if self.responses is None:
            self.cache = None
        else:  # the cache's answers kept (handed to `unsaved`) as they come, saved with each generation
            self.cache = KeptResponses(Keeping(stored=known_responses(self.responses), keep=self.unsaved.extend))

    def take_unsaved(self) -> dict[str, AnsweredCall]:
        """The cache's answers since the last generation was saved (none without a cache)."""
        if self.cache is not None:
            self.cache.keeping.flush()
        unsaved = dict(self.unsaved)
        self.unsaved.clear()
        return unsaved

    def run(
        self,
        open_model: Callable[[str], LanguageModel],
        save: SaveGeneration,
        clock: Callable[[], datetime],
        log: logging.Logger,
        model_cache_dir: str,
    ) -> EraProgress:
        """The era's generations after its start (none when it has them all), its models opened by
        name with `open_model` (answering through the cache when there is one), its tokens counted by
        its tokenizer (converted under `model_cache_dir`), each complete generation handed to `save`
        and logged; its status is `complete` or `stopped_for_budget`."""
        era, settings, resume, progress = self.era, self.settings, self.start.resume, EraProgress()
        if resume:
            log.info(f"era {era}: resuming after generation {resume.generation} (spent ${resume.spent_usd:.4f} so far)")

        def checkpoint(record: GenerationRecord) -> None:
            frames = generation_frames(era, record, self.judges, clock())
            new = cache_rows(era, self.take_unsaved(), clock()) if self.cache else pd.DataFrame()
            save(record.generation, frames, new)
            progress.add(frames["gateway_calls"])
            log.info(generation_line(era, record, frames["gateway_calls"]))

        if self.start.done(settings):
            progress.status = "complete"
        else:
            progress.status = asyncio.run(
                run_era(
                    era,
                    settings,
                    open_model=lambda name: self.cached(open_model(name)),
                    paragraphs=self.start.paragraphs,
                    gene_pool=self.start.gene_pool,
                    count_tokens=token_counter(settings.tokenizer, model_cache_dir),
                    on_generation=checkpoint,
                    resume=resume,
                    judge_weights=self.weights,
                )
            )
        if progress.status == "stopped_for_budget":
            log.warning(f"era {era} stopped for its budget of ${settings.max_cost_usd}; raise max_cost_usd to resume")
        return progress

    def cached(self, model: LanguageModel) -> LanguageModel:
        """The model answering through the era's response cache, if it keeps one (every attribute but
        `acomplete` is the wrapped model's)."""
        return cast(LanguageModel, ResponseCachedModel(model, self.cache)) if self.cache is not None else model


def generation_line(era: str, record: GenerationRecord, calls: pd.DataFrame) -> str:
    """A checkpointed generation in the log: its statistics, calls, cache hits and cost, and the era's so far."""
    return (
        f"era {era} generation {record.generation}: "
        + ", ".join(f"{k}={v:.4f}" for k, v in record.statistics.items())
        + f"; {len(calls)} calls ({int(calls['cached'].sum())} from the cache), "
        f"${float(calls['cost_usd'].sum()):.4f},"
        f" era so far ${record.spent_usd:.4f}"
    )
