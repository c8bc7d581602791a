"""1 -> 2. Eras gain a status and checkpoints; usage (calls, tokens, cost, cache hits) is recorded
per generation and era. Eras of version 1 ran to their end and recorded no calls."""

from __future__ import annotations

from typing import Any

from eval_platform.common.warehouse import rebuild_table

ERAS = """
    era VARCHAR PRIMARY KEY, config JSON NOT NULL, config_hash VARCHAR, compression_model VARCHAR NOT NULL,
    judge_panel JSON NOT NULL, population_size INTEGER NOT NULL, status VARCHAR NOT NULL,
    generations_done INTEGER, started_at TIMESTAMP, updated_at TIMESTAMP, finished_at TIMESTAMP"""
ERA_SUMMARIES = """
    era VARCHAR PRIMARY KEY, status VARCHAR, total_generations INTEGER NOT NULL, final_mean_fitness DOUBLE,
    final_max_fitness DOUBLE, calls INTEGER, prompt_tokens BIGINT, completion_tokens BIGINT, cost_usd DOUBLE,
    cache_hits INTEGER, cache_hit_rate DOUBLE, summarized_at TIMESTAMP NOT NULL"""
USAGE = "calls INTEGER, prompt_tokens BIGINT, completion_tokens BIGINT, cost_usd DOUBLE, cache_hits INTEGER"


def migrate(conn: Any) -> None:
    rebuild_table(
        conn,
        "eras",
        ERAS,
        "*, 'complete' AS status, (SELECT s.total_generations FROM era_summaries s "
        "WHERE s.era = old.era) AS generations_done, finished_at AS updated_at",
    )
    rebuild_table(conn, "era_summaries", ERA_SUMMARIES, "*, 'complete' AS status")
    for column in USAGE.split(", "):
        conn.execute(f"ALTER TABLE generation_stats ADD COLUMN {column}")
