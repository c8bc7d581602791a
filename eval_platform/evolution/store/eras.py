"""An era, generation by generation: its state, each complete generation in one transaction (the
checkpoint to resume from included), its spending and the response cache; and the era's data-quality
checks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypedDict, cast

import pandas as pd

from eval_platform.common.panels import AgreementMetric
from eval_platform.common.warehouse import reads, writes
from eval_platform.evolution.store.schema import GENERATION_TABLES, EvolutionSchema, judge_json_schema, judge_struct


class EraRow(TypedDict):
    """An era's row of `eras`."""

    era: str
    config: str  # its settings (JSON)
    config_hash: str | None
    compression_model: str
    judge_panel: str  # JSON
    population_size: int
    status: str
    generations_done: int | None
    started_at: datetime | None
    updated_at: datetime | None
    finished_at: datetime | None


class CachedResponse(TypedDict):
    """A row of `response_cache`."""

    key: str
    model: str
    request: str  # JSON
    text: str
    first_token_logprobs: str | None  # JSON
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    first_era: str | None
    created_at: datetime


class EraStore(EvolutionSchema):
    @reads("eras")
    def era_state(self, era: str) -> EraRow | None:
        rows = cast(list[EraRow], self.rows("SELECT * FROM eras WHERE era = ?", [era]))
        return rows[0] if rows else None

    @writes("eras", *GENERATION_TABLES)
    def begin_era(self, era_row: pd.DataFrame, restart: bool) -> None:
        """Record an era as running; `restart` first removes everything it stored."""
        era = era_row["era"].iloc[0]
        if restart:
            for table in GENERATION_TABLES:
                self.sql(f"DELETE FROM {table} WHERE era = ?", [era])
        kept = self.rows("SELECT started_at FROM eras WHERE era = ?", [era])
        if kept and not restart:
            era_row = era_row.assign(started_at=kept[0]["started_at"])
        self.replace("eras", era_row, "era = ?", [era])

    @writes("generations")
    def widen_quality_scores(self, names: Sequence[str]) -> list[str]:
        """Make `generations.quality_scores` a struct with a field for every judge name (the
        provider panel's three first); returns the field names in order."""
        current = self.value(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'generations' "
            "AND column_name = 'quality_scores'"
        )
        existing = re.findall(r'"?([A-Za-z0-9_\-]+)"? DOUBLE', current)
        wanted = existing + [n for n in names if n not in existing]
        if wanted != existing and self.lake:  # DuckLake changes no column's type by an expression: adds fields
            for name in wanted[len(existing) :]:
                self.sql(f'ALTER TABLE generations ADD COLUMN quality_scores."{name}" DOUBLE')
        elif wanted != existing:
            self.sql(
                f"ALTER TABLE generations ALTER quality_scores TYPE {judge_struct(wanted)} "
                f"USING from_json(to_json(quality_scores), '{judge_json_schema(wanted)}')"
            )
        return wanted

    @writes(*GENERATION_TABLES, "response_cache", "eras")
    def save_generation(
        self,
        era: str,
        generation: int,
        frames: dict[str, pd.DataFrame],
        judges: Sequence[str],
        cache_entries: pd.DataFrame,
        at: datetime,
    ) -> None:
        """One complete generation in one transaction: its individuals, verdicts, statistics, calls,
        the checkpoint to resume from, and the responses new to the cache."""
        for table, column in GENERATION_TABLES.items():
            select = (
                (
                    f"* EXCLUDE (quality_scores_json), from_json(quality_scores_json, "
                    f"'{judge_json_schema(judges)}') AS quality_scores"
                )
                if table == "generations"
                else "*"
            )
            self.replace(table, frames[table], f"era = ? AND {column} = ?", [era, generation], select)
        self.insert("response_cache", cache_entries, ignore_duplicates=True)  # another era may have cached one
        self.sql("UPDATE eras SET generations_done = ?, updated_at = ? WHERE era = ?", [generation, at, era])

    @writes("eras")
    def finish_era(self, era: str, status: str, at: datetime) -> None:
        self.sql("UPDATE eras SET status = ?, updated_at = ?, finished_at = ? WHERE era = ?", [status, at, at, era])

    @reads("era_checkpoints", "generations")
    def load_checkpoint(self, era: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The era's last checkpoint and its generation's rows (in the population's order)."""
        checkpoints = self.rows("SELECT * FROM era_checkpoints WHERE era = ? ORDER BY generation DESC LIMIT 1", [era])
        if not checkpoints:
            return None
        checkpoint = checkpoints[0]
        rows = {
            r["prompt_id"]: r
            for r in self.rows(
                "SELECT * FROM generations WHERE era = ? AND generation = ?", [era, checkpoint["generation"]]
            )
        }
        return checkpoint, [rows[prompt_id] for prompt_id in checkpoint["population"]]

    @reads("gateway_calls")
    def era_spending(self, era: str) -> float:
        return float(self.value("SELECT coalesce(sum(cost_usd), 0) FROM gateway_calls WHERE era = ?", [era]))

    @reads("response_cache")
    def load_response_cache(self, models: Sequence[str]) -> list[CachedResponse]:
        return cast(
            list[CachedResponse],
            self.rows("SELECT * FROM response_cache WHERE list_contains(?, model)", [list(models)]),
        )

    @reads("judge_human_agreement")
    def load_panel_agreement(self, set_name: str, metric: str) -> list[AgreementMetric]:
        """The judges' measured agreement with the humans of one set (the judging domain's figures)."""
        return [
            AgreementMetric(**row)
            for row in self.rows(
                "SELECT * EXCLUDE (computed_at) FROM judge_human_agreement WHERE set_name = ? AND metric = ?",
                [set_name, metric],
            )
        ]

    @reads("judge_scores")
    def judge_failure_rates_above(self, threshold: float) -> list[tuple]:
        return self.sql(
            """
            SELECT era, count(error) AS failures, count(*) AS calls, round(count(error) / count(*), 4) AS rate
            FROM judge_scores GROUP BY era HAVING count(error) / count(*) > ?""",
            [threshold],
        ).fetchall()

    @reads("generations")
    def fitness_outside_unit_interval(self) -> list[tuple]:
        return self.sql("""
            SELECT era, generation, prompt_id, fitness FROM generations
            WHERE fitness IS NULL OR NOT (fitness BETWEEN 0 AND 1) OR NOT (raw_fitness BETWEEN 0 AND 1)""").fetchall()
