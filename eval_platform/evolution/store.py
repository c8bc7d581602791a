"""The prompt-evolution domain's tables: inputs; each era's configuration, status and checkpoints;
every generation, judge verdict and API call (tokens, cost, cache hits) as soon as its generation is
done; the response cache; and the per-era summaries, judge analysis and Pareto fronts."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

from eval_platform.common.panels import AgreementMetric
from eval_platform.common.warehouse import Store, reads, rebuild_table, writes

# The judge names of the fitness document's panel come first in `quality_scores`, so its queries
# (`quality_scores.openai`, ...) run on every era.
PROVIDER_JUDGE_NAMES = ("openai", "claude", "gemini")
# An era's rows per generation, replaced together when its generation is checkpointed.
GENERATION_TABLES = {
    "generations": "generation",
    "judge_scores": "evaluated_generation",
    "generation_stats": "generation",
    "gateway_calls": "generation",
    "era_checkpoints": "generation",
}


def judge_struct(names: Sequence[str]) -> str:
    return "STRUCT(" + ", ".join(f'"{name}" DOUBLE' for name in names) + ")"


def judge_json_schema(names: Sequence[str]) -> str:
    return json.dumps({name: "DOUBLE" for name in names})


_ERAS = """
    era VARCHAR PRIMARY KEY, config JSON NOT NULL, config_hash VARCHAR, compression_model VARCHAR NOT NULL,
    judge_panel JSON NOT NULL, population_size INTEGER NOT NULL, status VARCHAR NOT NULL,
    generations_done INTEGER, started_at TIMESTAMP, updated_at TIMESTAMP, finished_at TIMESTAMP"""
_ERA_SUMMARIES = """
    era VARCHAR PRIMARY KEY, status VARCHAR, total_generations INTEGER NOT NULL, final_mean_fitness DOUBLE,
    final_max_fitness DOUBLE, calls INTEGER, prompt_tokens BIGINT, completion_tokens BIGINT, cost_usd DOUBLE,
    cache_hits INTEGER, cache_hit_rate DOUBLE, summarized_at TIMESTAMP NOT NULL"""
_USAGE = "calls INTEGER, prompt_tokens BIGINT, completion_tokens BIGINT, cost_usd DOUBLE, cache_hits INTEGER"


def _from_unversioned(conn: Any) -> None:
    """0 -> 1. The unversioned platform's `eras` table also held the summary, written by a second asset."""
    conn.execute(
        "CREATE TABLE era_summaries (era VARCHAR PRIMARY KEY, total_generations INTEGER NOT NULL, "
        "final_mean_fitness DOUBLE, final_max_fitness DOUBLE, summarized_at TIMESTAMP NOT NULL)"
    )
    conn.execute("""INSERT INTO era_summaries SELECT era, total_generations, final_mean_fitness, final_max_fitness,
                    now()::TIMESTAMP FROM eras WHERE total_generations IS NOT NULL""")
    conn.execute("ALTER TABLE eras DROP COLUMN total_generations")
    conn.execute("ALTER TABLE eras DROP COLUMN final_mean_fitness")
    conn.execute("ALTER TABLE eras DROP COLUMN final_max_fitness")


def _with_checkpoints_and_costs(conn: Any) -> None:
    """1 -> 2. Eras gain a status and checkpoints; usage (calls, tokens, cost, cache hits) is
    recorded per generation and era. Eras of version 1 ran to their end and recorded no calls."""
    rebuild_table(
        conn,
        "eras",
        _ERAS,
        "*, 'complete' AS status, (SELECT s.total_generations FROM era_summaries s "
        "WHERE s.era = old.era) AS generations_done, finished_at AS updated_at",
    )
    rebuild_table(conn, "era_summaries", _ERA_SUMMARIES, "*, 'complete' AS status")
    for column in _USAGE.split(", "):
        conn.execute(f"ALTER TABLE generation_stats ADD COLUMN {column}")


class EvolutionStore(Store):
    name = "evolution"
    version = 2
    tables = {
        "source_paragraphs": "paragraph_id VARCHAR PRIMARY KEY, title VARCHAR, text VARCHAR NOT NULL",
        "paragraph_rejections": "source VARCHAR NOT NULL, line INTEGER, row_json VARCHAR, reason VARCHAR NOT NULL, "
        "rejected_at TIMESTAMP NOT NULL",
        "gene_pool": "tag VARCHAR NOT NULL, gene_index INTEGER NOT NULL, text VARCHAR NOT NULL, "
        "PRIMARY KEY (tag, gene_index)",
        "eras": _ERAS,
        "generations": f"""
            era VARCHAR NOT NULL, generation INTEGER NOT NULL, prompt_id VARCHAR NOT NULL, operator VARCHAR NOT NULL,
            parents VARCHAR[] NOT NULL, carried_over BOOLEAN NOT NULL, evaluated_generation INTEGER NOT NULL,
            role VARCHAR, compression_target VARCHAR, fidelity VARCHAR, constraints VARCHAR, output VARCHAR,
            prompt_text VARCHAR, paragraph_id VARCHAR, original_text VARCHAR, compressed_text VARCHAR,
            compression_error VARCHAR, original_words INTEGER, compressed_words INTEGER, compression_ratio DOUBLE,
            word_compression_ratio DOUBLE, original_tokens INTEGER, compressed_tokens INTEGER,
            token_compression_ratio DOUBLE, quality_scores {judge_struct(PROVIDER_JUDGE_NAMES)},
            quality_score_avg DOUBLE, raw_fitness DOUBLE, survival_factor INTEGER, fitness DOUBLE,
            PRIMARY KEY (era, generation, prompt_id)""",
        "judge_scores": """
            era VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL, evaluated_generation INTEGER NOT NULL,
            judge_name VARCHAR NOT NULL, judge_model VARCHAR NOT NULL, faithfulness DOUBLE, clarity DOUBLE,
            readability DOUBLE, score DOUBLE, reported_score DOUBLE, score_mismatch BOOLEAN, comments VARCHAR,
            error VARCHAR, judge_duration_ms INTEGER, PRIMARY KEY (era, prompt_id, judge_name)""",
        "generation_stats": f"""
            era VARCHAR NOT NULL, generation INTEGER NOT NULL, population INTEGER NOT NULL,
            mean_fitness DOUBLE, std_fitness DOUBLE, median_fitness DOUBLE, min_fitness DOUBLE, max_fitness DOUBLE,
            new_evaluations INTEGER, judge_failures INTEGER, {_USAGE}, PRIMARY KEY (era, generation)""",
        "gateway_calls": """
            era VARCHAR NOT NULL, generation INTEGER NOT NULL, prompt_id VARCHAR NOT NULL, purpose VARCHAR NOT NULL,
            judge_name VARCHAR, model VARCHAR NOT NULL, prompt_tokens INTEGER, completion_tokens INTEGER,
            cost_usd DOUBLE, cached BOOLEAN NOT NULL, attempts INTEGER, duration_ms INTEGER, error VARCHAR""",
        "era_checkpoints": """
            era VARCHAR NOT NULL, generation INTEGER NOT NULL, population VARCHAR[] NOT NULL, rng_state JSON NOT NULL,
            spent_usd DOUBLE NOT NULL, completed_at TIMESTAMP NOT NULL, PRIMARY KEY (era, generation)""",
        "response_cache": """
            key VARCHAR PRIMARY KEY, model VARCHAR NOT NULL, request JSON NOT NULL, text VARCHAR NOT NULL,
            first_token_logprobs JSON, prompt_tokens INTEGER, completion_tokens INTEGER, cost_usd DOUBLE,
            first_era VARCHAR, created_at TIMESTAMP NOT NULL""",
        "era_summaries": _ERA_SUMMARIES,
        "judge_summary": """
            era VARCHAR NOT NULL, judge_name VARCHAR NOT NULL, judge_model VARCHAR NOT NULL, verdicts INTEGER NOT NULL,
            failures INTEGER NOT NULL, mean_score DOUBLE, std_score DOUBLE, mismatch_share DOUBLE,
            leniency_rank INTEGER, leniency VARCHAR, PRIMARY KEY (era, judge_name)""",
        "judge_agreement": """
            era VARCHAR NOT NULL, judge_a VARCHAR NOT NULL, judge_b VARCHAR NOT NULL, n INTEGER NOT NULL,
            pearson DOUBLE, spearman DOUBLE, PRIMARY KEY (era, judge_a, judge_b)""",
        "judge_generation_stats": """
            era VARCHAR NOT NULL, judge_name VARCHAR NOT NULL, generation INTEGER NOT NULL, n INTEGER NOT NULL,
            mean_score DOUBLE, std_score DOUBLE, PRIMARY KEY (era, judge_name, generation)""",
        "pareto_front": """
            era VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL, generation INTEGER NOT NULL,
            quality_score_avg DOUBLE NOT NULL, compression_ratio DOUBLE NOT NULL, fitness DOUBLE,
            prompt_text VARCHAR, PRIMARY KEY (era, prompt_id)""",
    }
    views = {
        # era -> generation -> prompt -> every judge's verdict
        "era_judge_scores": """
            SELECT g.era, g.generation, g.prompt_id, g.operator, g.carried_over, g.fitness, g.quality_score_avg,
                   j.judge_name, j.judge_model, j.faithfulness, j.clarity, j.readability, j.score, j.error,
                   j.judge_duration_ms, g.compressed_text
            FROM generations g JOIN judge_scores j ON j.era = g.era AND j.prompt_id = g.prompt_id""",
        # every prompt's ancestors (depth 0 is the prompt itself), following parents across generations
        "prompt_ancestry": """
            WITH RECURSIVE created AS (
                SELECT DISTINCT era, prompt_id, operator, parents FROM generations WHERE NOT carried_over
            ), ancestry(era, prompt_id, ancestor_id, depth, ancestor_operator) AS (
                SELECT era, prompt_id, prompt_id, 0, operator FROM created
                UNION ALL
                SELECT a.era, a.prompt_id, parent.prompt_id, a.depth + 1, parent.operator
                FROM ancestry a
                JOIN created child ON child.era = a.era AND child.prompt_id = a.ancestor_id
                JOIN created parent ON parent.era = a.era AND list_contains(child.parents, parent.prompt_id)
            )
            SELECT DISTINCT * FROM ancestry""",
    }
    migrations = {0: _from_unversioned, 1: _with_checkpoints_and_costs}

    # --- inputs ---------------------------------------------------------------------------------

    @writes("source_paragraphs", "paragraph_rejections")
    def replace_source_paragraphs(self, paragraphs: pd.DataFrame, rejections: pd.DataFrame) -> None:
        self.replace_together("TRUE", [], source_paragraphs=paragraphs, paragraph_rejections=rejections)

    @reads("source_paragraphs")
    def load_paragraphs(self) -> list[dict[str, Any]]:
        return self.rows("SELECT paragraph_id, text FROM source_paragraphs ORDER BY paragraph_id")

    @writes("gene_pool")
    def replace_gene_pool(self, genes: pd.DataFrame) -> None:
        self.replace_together("TRUE", [], gene_pool=genes)

    @reads("gene_pool")
    def load_gene_pool(self) -> list[dict[str, Any]]:
        return self.rows("SELECT tag, text FROM gene_pool ORDER BY tag, gene_index")

    # --- an era, generation by generation --------------------------------------------------------

    @reads("eras")
    def era_state(self, era: str) -> dict[str, Any] | None:
        rows = self.rows("SELECT * FROM eras WHERE era = ?", [era])
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
        (current,) = self.sql(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'generations' "
            "AND column_name = 'quality_scores'"
        ).fetchone()
        existing = re.findall(r'"?([A-Za-z0-9_\-]+)"? DOUBLE', current)
        wanted = existing + [n for n in names if n not in existing]
        if wanted != existing:
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
        at: Any,
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
    def finish_era(self, era: str, status: str, at: Any) -> None:
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
        (spent,) = self.sql("SELECT coalesce(sum(cost_usd), 0) FROM gateway_calls WHERE era = ?", [era]).fetchone()
        return float(spent)

    @reads("response_cache")
    def load_response_cache(self, models: Sequence[str]) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM response_cache WHERE list_contains(?, model)", [list(models)])

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

    # --- per-era summaries and analyses ----------------------------------------------------------------

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
    def summarize_era(self, era: str, at: Any) -> dict[str, Any]:
        """The era's status, last generation, final mean and max fitness, and its calls, tokens,
        cost and cache hits."""
        self.sql("DELETE FROM era_summaries WHERE era = ?", [era])
        self.sql(
            """
            INSERT INTO era_summaries BY NAME
            SELECT e.era, e.status, s.generation AS total_generations, s.mean_fitness AS final_mean_fitness,
                   s.max_fitness AS final_max_fitness, c.calls, c.prompt_tokens, c.completion_tokens, c.cost_usd,
                   c.cache_hits, c.cache_hits / nullif(c.calls, 0) AS cache_hit_rate, ? AS summarized_at
            FROM eras e
            JOIN (SELECT * FROM generation_stats WHERE era = ? ORDER BY generation DESC LIMIT 1) s USING (era)
            CROSS JOIN (SELECT count(*) AS calls, sum(prompt_tokens) AS prompt_tokens,
                               sum(completion_tokens) AS completion_tokens, sum(cost_usd) AS cost_usd,
                               count(*) FILTER (WHERE cached) AS cache_hits
                        FROM gateway_calls WHERE era = ?) c
            WHERE e.era = ?""",
            [at, era, era, era],
        )
        rows = self.rows("SELECT * FROM era_summaries WHERE era = ?", [era])
        return rows[0] if rows else {}

    @reads("judge_scores", "generations")
    def load_verdicts(self, era: str) -> pd.DataFrame:
        """Every judge verdict of the era, with the generation that evaluated it."""
        return self.frame(
            """
            SELECT judge_name, judge_model, prompt_id, evaluated_generation AS generation, score, reported_score,
                   score_mismatch, error
            FROM judge_scores WHERE era = ? ORDER BY generation, prompt_id, judge_name""",
            [era],
        )

    @writes("judge_summary", "judge_agreement", "judge_generation_stats")
    def replace_judge_analysis(
        self, era: str, summary: pd.DataFrame, agreement: pd.DataFrame, per_generation: pd.DataFrame
    ) -> None:
        self.replace_together(
            "era = ?", [era], judge_summary=summary, judge_agreement=agreement, judge_generation_stats=per_generation
        )

    @reads("generations")
    def load_evaluated_prompts(self, era: str) -> pd.DataFrame:
        """Each prompt of the era as evaluated (its first appearance, not its carried-over copies)."""
        return self.frame(
            """
            SELECT prompt_id, generation, quality_score_avg, compression_ratio, fitness, prompt_text
            FROM generations WHERE era = ? AND NOT carried_over ORDER BY generation, prompt_id""",
            [era],
        )

    @writes("pareto_front")
    def replace_pareto_front(self, era: str, front: pd.DataFrame) -> None:
        self.replace_together("era = ?", [era], pareto_front=front)

    # --- data-quality checks ----------------------------------------------------------------------

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
