"""The protocols' scores and the leaderboard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from eval_platform.benchmarks.leaderboard import HeadlineRow
from eval_platform.benchmarks.store.schema import BenchmarkSchema
from eval_platform.common.warehouse import reads, utc_now, writes


class LeaderboardStore(BenchmarkSchema):
    @writes("protocol_scores")
    def replace_protocol_scores(self, protocol: str, rows: Sequence[Mapping[str, object]]) -> None:
        frame = self.rows_frame("protocol_scores", rows, computed_at=utc_now())
        self.replace("protocol_scores", frame, "protocol = ?", [protocol])

    @reads("protocol_scores")
    def load_protocol_scores(self, protocol: str | None = None) -> list[dict[str, Any]]:
        where, params = ("WHERE protocol = ?", [protocol]) if protocol else ("", [])
        return self.rows(
            f"SELECT * EXCLUDE (computed_at) FROM protocol_scores {where} "
            "ORDER BY protocol, model, task = 'average', task",
            params,
        )

    @writes("leaderboard")
    def replace_leaderboard(self, rows: Sequence[Mapping[str, object]]) -> None:
        self.replace("leaderboard", self.rows_frame("leaderboard", rows, computed_at=utc_now()))

    @reads("leaderboard")
    def load_headlines(self) -> list[HeadlineRow]:
        rows = self.rows("SELECT * EXCLUDE (computed_at) FROM leaderboard ORDER BY model, benchmark")
        return cast("list[HeadlineRow]", rows)  # the table's columns, as HeadlineRow names them
