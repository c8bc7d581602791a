"""Comparisons of a roster model with its baseline and predecessor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from eval_platform.benchmarks.store.schema import BenchmarkSchema
from eval_platform.common.warehouse import reads, utc_now, writes


class ComparisonStore(BenchmarkSchema):
    @writes("comparisons")
    def replace_comparisons(self, benchmark: str, model: str, rows: Sequence[Mapping[str, object]]) -> None:
        """The roster model's comparisons (as model_a) with its references on the benchmark."""
        frame = self.rows_frame("comparisons", rows, compared_at=utc_now())
        self.replace("comparisons", frame, "benchmark = ? AND model_a = ?", [benchmark, model])

    @reads("comparisons")
    def significant_drops(self, alpha: float) -> list[tuple]:
        """The comparisons where a model scored significantly below its baseline or predecessor
        (exact McNemar p < alpha), with the items that flipped from right to wrong."""
        return self.sql(
            """
            SELECT benchmark, model_a, relation, model_b, settings_key, solver, task, filter, metric,
                   round(accuracy_a, 4), round(accuracy_b, 4), printf('p=%.3g', mcnemar_p), flipped_to_wrong
            FROM comparisons WHERE difference < 0 AND mcnemar_p < ? ORDER BY ALL""",
            [alpha],
        ).fetchall()

    @reads("comparisons")
    def comparison_table(self) -> pd.DataFrame:
        """Every comparison, one line each, for a console summary."""
        return self.frame("""
            SELECT benchmark, solver || ' / ' || settings_key || ' / ' || task || ' / ' || metric
                       || CASE WHEN filter <> 'none' THEN ',' || filter ELSE '' END AS metric,
                   model_a || ' vs ' || model_b || ' (' || relation || ')' AS models,
                   items, round(accuracy_a, 3) AS a, round(accuracy_b, 3) AS b, round(difference, 3) AS difference,
                   only_a, only_b, coalesce(printf('%.4g', mcnemar_p), paired_test) AS mcnemar_p,
                   '[' || round(ci_low, 3) || ', ' || round(ci_high, 3) || ']' AS ci95
            FROM comparisons ORDER BY benchmark, metric, models""")
