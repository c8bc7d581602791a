"""The judging pages: every judge against the humans of each labelled set (accuracy, kappa beside
the humans' own, position and length bias), each judge's MT-Bench leaderboard over the shipped
models, and a judge's verdicts on a set with each item and the judge's own words."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import eval_platform.viewer.links as links
import eval_platform.viewer.params as params
from eval_platform.viewer.app import viewer_of
from eval_platform.viewer.queries import judging as queries
from eval_platform.viewer.registry import Section, register


def index_page(request: Request) -> Response:
    viewer = viewer_of(request)
    with viewer.reader.reading() as conn:
        agreement = queries.agreement(conn)
        boards = queries.leaderboards(conn)
    return viewer.render(request, "judging/index.html", agreement=agreement, leaderboards=boards)


def verdicts_page(request: Request) -> Response:
    judge, set_name = params.required(request, "judge"), params.required(request, "set")
    start = params.integer(request, "start", 0)
    viewer = viewer_of(request)
    with viewer.reader.reading() as conn:
        rows = queries.verdicts(conn, judge, set_name, start)
    return viewer.render(
        request, "judging/verdicts.html", judge=judge, set_name=set_name, verdicts=rows, start=start,
        per_page=queries.VERDICTS_PER_PAGE,
    )  # fmt: skip


SECTION = register(
    Section(
        name="judging",
        title="Judges",
        summary="Each judge against the humans of each labelled set, the MT-Bench leaderboards, every verdict.",
        home=links.JUDGING,
        routes=[Route(links.JUDGING, index_page), Route(links.JUDGE_VERDICTS, verdicts_page)],
        order=40,
    )
)
