"""The prompt-evolution domain's tables: inputs, every generation of every era, judge verdicts,
per-generation statistics and era summaries."""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

import pandas as pd

from eval_platform.stores.warehouse import Store, reads, rebuild_table, writes

# The judge names of the fitness document's panel come first in `quality_scores`, so its queries
# (`quality_scores.openai`, ...) run on every era.
PROVIDER_JUDGE_NAMES = ("openai", "claude", "gemini")


def judge_struct(names: Sequence[str]) -> str:
    return "STRUCT(" + ", ".join(f'"{name}" DOUBLE' for name in names) + ")"


def judge_json_schema(names: Sequence[str]) -> str:
    return json.dumps({name: "DOUBLE" for name in names})


_ERAS = """
    era VARCHAR PRIMARY KEY, config JSON NOT NULL, compression_model VARCHAR NOT NULL, judge_panel JSON NOT NULL,
    population_size INTEGER NOT NULL, started_at TIMESTAMP, finished_at TIMESTAMP"""
_ERA_SUMMARIES = """
    era VARCHAR PRIMARY KEY, total_generations INTEGER NOT NULL, final_mean_fitness DOUBLE,
    final_max_fitness DOUBLE, summarized_at TIMESTAMP NOT NULL"""


def _from_unversioned(conn: Any) -> None:
    """The unversioned platform's `eras` table also held the summary, written by a second asset."""
    conn.execute(f"CREATE TABLE era_summaries ({_ERA_SUMMARIES})")
    conn.execute("""INSERT INTO era_summaries SELECT era, total_generations, final_mean_fitness, final_max_fitness,
                    now()::TIMESTAMP FROM eras WHERE total_generations IS NOT NULL""")
    rebuild_table(conn, "eras", _ERAS, "* EXCLUDE (total_generations, final_mean_fitness, final_max_fitness)")


class EvolutionStore(Store):
    name = "evolution"
    version = 1
    tables = {
        "source_paragraphs": "paragraph_id VARCHAR PRIMARY KEY, title VARCHAR, text VARCHAR NOT NULL",
        "gene_pool": "tag VARCHAR NOT NULL, gene_index INTEGER NOT NULL, text VARCHAR NOT NULL, "
                     "PRIMARY KEY (tag, gene_index)",
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
        "generation_stats": """
            era VARCHAR NOT NULL, generation INTEGER NOT NULL, population INTEGER NOT NULL,
            mean_fitness DOUBLE, std_fitness DOUBLE, median_fitness DOUBLE, min_fitness DOUBLE, max_fitness DOUBLE,
            new_evaluations INTEGER, judge_failures INTEGER, PRIMARY KEY (era, generation)""",
        "eras": _ERAS,
        "era_summaries": _ERA_SUMMARIES,
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
    migrations = {0: _from_unversioned}

    # --- inputs ---------------------------------------------------------------------------------

    @writes("source_paragraphs")
    def replace_source_paragraphs(self, paragraphs: pd.DataFrame) -> None:
        with self.transaction():
            self.replace("source_paragraphs", paragraphs)

    @reads("source_paragraphs")
    def load_paragraphs(self) -> list[dict[str, Any]]:
        return self.rows("SELECT paragraph_id, text FROM source_paragraphs ORDER BY paragraph_id")

    @writes("gene_pool")
    def replace_gene_pool(self, genes: pd.DataFrame) -> None:
        with self.transaction():
            self.replace("gene_pool", genes)

    @reads("gene_pool")
    def load_gene_pool(self) -> list[dict[str, Any]]:
        return self.rows("SELECT tag, text FROM gene_pool ORDER BY tag, gene_index")

    # --- eras -----------------------------------------------------------------------------------

    @writes("generations")
    def widen_quality_scores(self, names: Sequence[str]) -> list[str]:
        """Make `generations.quality_scores` a struct with a field for every judge name (the
        provider panel's three first); returns the field names in order."""
        (current,) = self.sql(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'generations' "
            "AND column_name = 'quality_scores'").fetchone()
        existing = re.findall(r'"?([A-Za-z0-9_\-]+)"? DOUBLE', current)
        wanted = existing + [n for n in names if n not in existing]
        if wanted != existing:
            self.sql(f"ALTER TABLE generations ALTER quality_scores TYPE {judge_struct(wanted)} "
                     f"USING from_json(to_json(quality_scores), '{judge_json_schema(wanted)}')")
        return wanted

    @writes("generations", "judge_scores", "eras")
    def replace_era(self, era: str, generations: pd.DataFrame, judge_scores: pd.DataFrame, era_row: pd.DataFrame,
                    judges: Sequence[str]) -> None:
        """Every generation and judge verdict of an era, and its configuration, replacing earlier rows."""
        with self.transaction():
            self.replace("generations", generations, "era = ?", [era],
                         f"* EXCLUDE (quality_scores_json), from_json(quality_scores_json, "
                         f"'{judge_json_schema(judges)}') AS quality_scores")
            self.replace("judge_scores", judge_scores, "era = ?", [era])
            self.replace("eras", era_row, "era = ?", [era])

    @reads("generations", "judge_scores")
    def load_generation_outcomes(self) -> pd.DataFrame:
        """Per era and generation: every individual's fitness and whether it was carried over, and
        the judge failures of the prompts evaluated in that generation."""
        return self.frame("""
            SELECT g.era, g.generation, list(g.fitness ORDER BY g.prompt_id) AS fitnesses,
                   count(*) FILTER (WHERE NOT g.carried_over) AS new_evaluations,
                   coalesce(any_value(f.failures), 0) AS judge_failures
            FROM generations g
            LEFT JOIN (SELECT era, evaluated_generation AS generation, count(*) AS failures FROM judge_scores
                       WHERE error IS NOT NULL GROUP BY ALL) f USING (era, generation)
            GROUP BY g.era, g.generation ORDER BY g.era, g.generation""")

    @writes("generation_stats")
    def replace_generation_stats(self, stats: pd.DataFrame) -> None:
        with self.transaction():
            self.replace("generation_stats", stats)

    @reads("generation_stats")
    def load_generation_stats(self) -> pd.DataFrame:
        return self.frame("SELECT * FROM generation_stats ORDER BY era, generation")

    @reads("eras")
    def latest_era(self) -> str | None:
        row = self.sql("SELECT era FROM eras ORDER BY finished_at DESC LIMIT 1").fetchone()
        return row[0] if row else None

    @writes("era_summaries")
    @reads("generation_stats", "eras")
    def summarize_eras(self) -> pd.DataFrame:
        """Each era's last generation, final mean and max fitness; returns the summaries with the
        era's compression model and population."""
        with self.transaction():
            self.sql("DELETE FROM era_summaries")
            self.sql("""
                INSERT INTO era_summaries
                SELECT era, generation, mean_fitness, max_fitness, now()::TIMESTAMP FROM generation_stats
                WHERE era IN (SELECT era FROM eras)
                QUALIFY row_number() OVER (PARTITION BY era ORDER BY generation DESC) = 1""")
        return self.frame("""SELECT e.era, e.compression_model, e.population_size, s.total_generations,
                                    s.final_mean_fitness, s.final_max_fitness
                             FROM eras e LEFT JOIN era_summaries s USING (era) ORDER BY e.era""")

    # --- data-quality checks ----------------------------------------------------------------------

    @reads("judge_scores")
    def judge_failure_rates_above(self, threshold: float) -> list[tuple]:
        return self.sql("""
            SELECT era, count(error) AS failures, count(*) AS calls, round(count(error) / count(*), 4) AS rate
            FROM judge_scores GROUP BY era HAVING count(error) / count(*) > ?""", [threshold]).fetchall()

    @reads("generations")
    def fitness_outside_unit_interval(self) -> list[tuple]:
        return self.sql("""
            SELECT era, generation, prompt_id, fitness FROM generations
            WHERE fitness IS NULL OR NOT (fitness BETWEEN 0 AND 1) OR NOT (raw_fitness BETWEEN 0 AND 1)""").fetchall()
