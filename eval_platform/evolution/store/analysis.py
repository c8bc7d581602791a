"""Per-era summaries and analyses: the generations' outcomes and statistics, the era's summary, the
judges' verdicts and analysis, and the Pareto front."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pandas as pd

from eval_platform.common.warehouse import reads, writes
from eval_platform.evolution.store.schema import EvolutionSchema


class EraAnalysisStore(EvolutionSchema):
    @reads("generations", "judge_scores")
    def load_generation_outcomes(self, era: str | None = None) -> pd.DataFrame:
        """Per era and generation: every individual's fitness and whether it was carried over, and
        the judge failures of the prompts evaluated in that generation."""
        return self.frame(
            """
            SELECT g.era, g.generation, list(g.fitness ORDER BY g.prompt_id) AS fitnesses,
                   count(*) FILTER (WHERE NOT g.carried_over) AS new_evaluations,
                   coalesce(any_value(f.failures), 0) AS judge_failures
            FROM generations g
            LEFT JOIN (SELECT era, evaluated_generation AS generation, count(*) AS failures FROM judge_scores
                       WHERE error IS NOT NULL GROUP BY ALL) f USING (era, generation)
            WHERE ? IS NULL OR g.era = ?
            GROUP BY g.era, g.generation ORDER BY g.era, g.generation""",
            [era, era],
        )

    @reads("generation_stats")
    def load_generation_stats(self, era: str | None = None) -> pd.DataFrame:
        return self.frame(
            "SELECT * FROM generation_stats WHERE ? IS NULL OR era = ? ORDER BY era, generation", [era, era]
        )

    @writes("era_summaries")
    @reads("generation_stats", "eras", "gateway_calls")
    def summarize_era(self, era: str, at: datetime) -> dict[str, Any]:
        """The era's status, last generation, final mean and max fitness, its calls, tokens, cost
        and cache hits, and its judges' temperature with the fitness gradient at it (the least-squares
        slope of the mean fitness per generation: the seed's judge-temperature ablation compares eras
        alike but for it)."""
        self.sql("DELETE FROM era_summaries WHERE era = ?", [era])
        self.sql(
            """
            INSERT INTO era_summaries BY NAME
            SELECT e.era, e.status, s.generation AS total_generations, s.mean_fitness AS final_mean_fitness,
                   s.max_fitness AS final_max_fitness, c.calls, c.prompt_tokens, c.completion_tokens, c.cost_usd,
                   c.cache_hits, c.cache_hits / nullif(c.calls, 0) AS cache_hit_rate, ? AS summarized_at,
                   coalesce((e.config ->> 'judge_temperature')::DOUBLE, 0) AS judge_temperature,
                   g.fitness_gradient
            FROM eras e
            JOIN (SELECT * FROM generation_stats WHERE era = ? ORDER BY generation DESC LIMIT 1) s USING (era)
            CROSS JOIN (SELECT count(*) AS calls, sum(prompt_tokens) AS prompt_tokens,
                               sum(completion_tokens) AS completion_tokens, sum(cost_usd) AS cost_usd,
                               count(*) FILTER (WHERE cached) AS cache_hits
                        FROM gateway_calls WHERE era = ?) c
            CROSS JOIN (SELECT regr_slope(mean_fitness, generation) AS fitness_gradient
                        FROM generation_stats WHERE era = ?) g
            WHERE e.era = ?""",
            [at, era, era, era, era],
        )
        return self.load_era_summary(era)

    @reads("judge_scores", "generations")
    def load_verdicts(self, era: str) -> pd.DataFrame:
        """Every judge verdict of the era, with the generation that evaluated it (and a sampled
        judge's every sample's score)."""
        return self.frame(
            """
            SELECT judge_name, judge_model, prompt_id, evaluated_generation AS generation, score, reported_score,
                   score_mismatch, error, sampled_scores
            FROM judge_scores WHERE era = ? ORDER BY generation, prompt_id, judge_name""",
            [era],
        )

    @writes("judge_summary", "judge_agreement", "judge_generation_stats", "judge_subset_rankings")
    def replace_judge_analysis(
        self,
        era: str,
        summary: pd.DataFrame,
        agreement: pd.DataFrame,
        per_generation: pd.DataFrame,
        subsets: pd.DataFrame,
    ) -> None:
        self.replace_together(
            "era = ?",
            [era],
            judge_summary=summary,
            judge_agreement=agreement,
            judge_generation_stats=per_generation,
            judge_subset_rankings=subsets,
        )

    @reads("generations")
    def load_evaluated_prompts(self, era: str) -> pd.DataFrame:
        """Each prompt of the era as evaluated (its first appearance, not its carried-over copies)."""
        return self.frame(
            """
            SELECT prompt_id, generation, quality_score_avg, compression_ratio, survival_factor, fitness, prompt_text
            FROM generations WHERE era = ? AND NOT carried_over ORDER BY generation, prompt_id""",
            [era],
        )

    @reads("era_summaries")
    def load_era_summary(self, era: str) -> dict[str, Any]:
        rows = self.rows("SELECT * FROM era_summaries WHERE era = ?", [era])
        return rows[0] if rows else {}

    @writes("pareto_front")
    def replace_pareto_front(self, era: str, front: pd.DataFrame) -> None:
        self.replace_together("era = ?", [era], pareto_front=front)
