"""The judging pages' reads: every judge against the humans of each labelled set (the view
`judge_vs_human`), each judge's MT-Bench leaderboard (`mt_bench_leaderboard`), and one judge's
verdicts on one set, each with its item (the instruction, both answers, the humans' label) and the
judge's own words."""

from __future__ import annotations

from dataclasses import dataclass

from eval_platform.viewer.warehouse import Connection, fetch

VERDICTS_PER_PAGE = 50


@dataclass(frozen=True)
class AgreementRow:
    judge: str
    set_name: str
    items: int
    verdicts: int
    accuracy: float | None
    accuracy_low: float | None
    accuracy_high: float | None
    kappa: float | None
    kappa_low: float | None
    kappa_high: float | None
    human_kappa: float | None
    position_consistency: float | None
    first_wins: float | None
    human_first_wins: float | None
    longer_wins: float | None
    human_longer_wins: float | None


@dataclass(frozen=True)
class LeaderboardRow:
    judge: str
    set_name: str
    rank: int
    model: str
    battles: int
    wins: int
    losses: int
    ties: int
    win_rate: float | None
    win_rate_low: float | None
    win_rate_high: float | None
    rating: float
    rating_low: float
    rating_high: float
    lc_win_rate: float | None


@dataclass(frozen=True)
class VerdictRow:
    item_id: str
    turn: int
    shown_order: str
    verdict: str
    raw: str
    error: str | None
    instruction: str | None
    answer_a: str | None
    answer_b: str | None
    gold: str | None
    model_a: str | None
    model_b: str | None


def agreement(conn: Connection) -> list[AgreementRow]:
    columns = ", ".join(AgreementRow.__dataclass_fields__)
    return fetch(conn, f"SELECT {columns} FROM judge_vs_human ORDER BY set_name, judge", [], AgreementRow)


def leaderboards(conn: Connection) -> list[LeaderboardRow]:
    columns = ", ".join(LeaderboardRow.__dataclass_fields__)
    return fetch(conn, f"SELECT {columns} FROM mt_bench_leaderboard", [], LeaderboardRow)


def verdicts(conn: Connection, judge: str, set_name: str, start: int = 0) -> list[VerdictRow]:
    """A page of the judge's verdicts on the set, in the items' order (both orders of an item together)."""
    return fetch(
        conn,
        """SELECT v.item_id, v.turn, v.shown_order, v.verdict, v.raw, v.error,
                  coalesce(i.instruction, v.prompt) AS instruction, i.answer_a, i.answer_b, i.gold,
                  coalesce(i.model_a, v.model_a) AS model_a, coalesce(i.model_b, v.model_b) AS model_b
           FROM all_verdicts v
           LEFT JOIN judging_items i ON i.set_name = v.set_name AND i.item_id = v.item_id
           WHERE v.judge = $judge AND v.set_name = $set
           ORDER BY i.position NULLS LAST, v.item_id, v.turn, v.shown_order
           LIMIT $limit OFFSET $start""",
        {"judge": judge, "set": set_name, "limit": VERDICTS_PER_PAGE, "start": start},
        VerdictRow,
    )
