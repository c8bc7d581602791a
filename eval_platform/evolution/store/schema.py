"""The prompt-evolution domain's tables (schema version 3): inputs; each era's configuration,
status and checkpoints; every generation, judge verdict and API call (tokens, cost, cache hits) as
soon as its generation is done; the response cache; and the per-era summaries, judge analysis and
Pareto fronts. Views are SQL files beside this one (`views/`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import duckdb

from eval_platform.common.warehouse import Store

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


ERAS = """
    era VARCHAR PRIMARY KEY, config JSON NOT NULL, config_hash VARCHAR, compression_model VARCHAR NOT NULL,
    judge_panel JSON NOT NULL, population_size INTEGER NOT NULL, status VARCHAR NOT NULL,
    generations_done INTEGER, started_at TIMESTAMP, updated_at TIMESTAMP, finished_at TIMESTAMP"""
ERA_SUMMARIES = """
    era VARCHAR PRIMARY KEY, status VARCHAR, total_generations INTEGER NOT NULL, final_mean_fitness DOUBLE,
    final_max_fitness DOUBLE, calls INTEGER, prompt_tokens BIGINT, completion_tokens BIGINT, cost_usd DOUBLE,
    cache_hits INTEGER, cache_hit_rate DOUBLE, summarized_at TIMESTAMP NOT NULL, judge_temperature DOUBLE,
    fitness_gradient DOUBLE"""
USAGE = "calls INTEGER, prompt_tokens BIGINT, completion_tokens BIGINT, cost_usd DOUBLE, cache_hits INTEGER"


TABLES = {
    "source_paragraphs": "paragraph_id VARCHAR PRIMARY KEY, title VARCHAR, text VARCHAR NOT NULL",
    "paragraph_rejections": "source VARCHAR NOT NULL, line INTEGER, row_json VARCHAR, reason VARCHAR NOT NULL, "
    "rejected_at TIMESTAMP NOT NULL",
    "gene_pool": "tag VARCHAR NOT NULL, gene_index INTEGER NOT NULL, text VARCHAR NOT NULL, "
    "PRIMARY KEY (tag, gene_index)",
    "eras": ERAS,
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
        error VARCHAR, judge_duration_ms INTEGER, sampled_scores DOUBLE[], PRIMARY KEY (era, prompt_id, judge_name)""",
    "generation_stats": f"""
        era VARCHAR NOT NULL, generation INTEGER NOT NULL, population INTEGER NOT NULL,
        mean_fitness DOUBLE, std_fitness DOUBLE, median_fitness DOUBLE, min_fitness DOUBLE, max_fitness DOUBLE,
        new_evaluations INTEGER, judge_failures INTEGER, {USAGE}, PRIMARY KEY (era, generation)""",
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
    "era_summaries": ERA_SUMMARIES,
    "judge_summary": """
        era VARCHAR NOT NULL, judge_name VARCHAR NOT NULL, judge_model VARCHAR NOT NULL, verdicts INTEGER NOT NULL,
        failures INTEGER NOT NULL, mean_score DOUBLE, std_score DOUBLE, mismatch_share DOUBLE,
        leniency_rank INTEGER, leniency VARCHAR, sample_spread DOUBLE, PRIMARY KEY (era, judge_name)""",
    "judge_agreement": """
        era VARCHAR NOT NULL, judge_a VARCHAR NOT NULL, judge_b VARCHAR NOT NULL, n INTEGER NOT NULL,
        pearson DOUBLE, spearman DOUBLE, PRIMARY KEY (era, judge_a, judge_b)""",
    "judge_generation_stats": """
        era VARCHAR NOT NULL, judge_name VARCHAR NOT NULL, generation INTEGER NOT NULL, n INTEGER NOT NULL,
        mean_score DOUBLE, std_score DOUBLE, PRIMARY KEY (era, judge_name, generation)""",
    # the seed's single- against multi-judge ablation: the prompts ranked by the fitness each judge alone and
    # each set of judges would have given, from the stored verdicts, against the panel's ranking
    "judge_subset_rankings": """
        era VARCHAR NOT NULL, judges VARCHAR NOT NULL, size INTEGER NOT NULL, prompts INTEGER NOT NULL,
        best_prompt VARCHAR, same_best BOOLEAN, kendall_tau DOUBLE, PRIMARY KEY (era, judges)""",
    "pareto_front": """
        era VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL, generation INTEGER NOT NULL,
        quality_score_avg DOUBLE NOT NULL, compression_ratio DOUBLE NOT NULL, fitness DOUBLE,
        prompt_text VARCHAR, PRIMARY KEY (era, prompt_id)""",
}

VIEW_FOLDER = Path(__file__).with_name("views")
VIEWS = {path.stem: path.read_text(encoding="utf-8") for path in sorted(VIEW_FOLDER.glob("*.sql"))}


def _with_sampled_judges(conn: duckdb.DuckDBPyConnection) -> None:
    """Version 2 to 3: sampled judges' verdicts (each sample's score, a judge's spread over them)
    and each era's judge temperature and fitness gradient."""
    for table, column in (
        ("judge_scores", "sampled_scores DOUBLE[]"),
        ("judge_summary", "sample_spread DOUBLE"),
        ("era_summaries", "judge_temperature DOUBLE"),
        ("era_summaries", "fitness_gradient DOUBLE"),
    ):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column}")


class EvolutionSchema(Store):
    """The evolution tables and their views (the store classes read and write them)."""

    name = "evolution"
    version = 3
    tables = TABLES
    views = VIEWS
    migrations = {2: _with_sampled_judges}
