"""0 -> 1. The unversioned platform's `eras` table also held the summary, written by a second asset."""

from __future__ import annotations

from typing import Any


def migrate(conn: Any) -> None:
    conn.execute(
        "CREATE TABLE era_summaries (era VARCHAR PRIMARY KEY, total_generations INTEGER NOT NULL, "
        "final_mean_fitness DOUBLE, final_max_fitness DOUBLE, summarized_at TIMESTAMP NOT NULL)"
    )
    conn.execute("""INSERT INTO era_summaries SELECT era, total_generations, final_mean_fitness, final_max_fitness,
                    now()::TIMESTAMP FROM eras WHERE total_generations IS NOT NULL""")
    conn.execute("ALTER TABLE eras DROP COLUMN total_generations")
    conn.execute("ALTER TABLE eras DROP COLUMN final_mean_fitness")
    conn.execute("ALTER TABLE eras DROP COLUMN final_max_fitness")
