"""The blind evaluation's pages: every issued sheet; a sheet's questions, and its tally once there
is one; and one question with both answers as the raters saw them, each rater's scores, winner and
notes, and which system gave which answer once the sheet is tallied (not before)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import eval_platform.viewer.links as links
import eval_platform.viewer.params as params
from eval_platform.viewer.app import rows_page, viewer_of
from eval_platform.viewer.queries import blind as queries
from eval_platform.viewer.registry import Section, register
from eval_platform.viewer.warehouse import found


def _sheet(conn, sheet_id: str) -> queries.SheetRow:
    return found(queries.sheet(conn, sheet_id), f"no sheet {sheet_id!r} was issued in this warehouse")


def sheet_page(request: Request) -> Response:
    sheet_id = request.path_params["sheet_id"]
    viewer = viewer_of(request)
    with viewer.reader.reading() as conn:
        sheet = _sheet(conn, sheet_id)
        questions = queries.questions(conn, sheet_id)
        tallies, results = queries.tally(conn, sheet_id)
    return viewer.render(
        request, "blind/sheet.html", sheet=sheet, questions=questions, tallies=tallies, results=results
    )


def question_page(request: Request) -> Response:
    sheet_id, question_id = request.path_params["sheet_id"], params.required(request, "id")
    viewer = viewer_of(request)
    with viewer.reader.reading() as conn:
        sheet = _sheet(conn, sheet_id)
        question = found(
            queries.question(conn, sheet_id, question_id, sheet.tallied),
            f"sheet {sheet_id} has no question {question_id!r}",
        )
        ratings = queries.ratings(conn, sheet_id, question_id)
    return viewer.render(request, "blind/question.html", sheet=sheet, question=question, ratings=ratings)


SECTION = register(
    Section(
        name="blind",
        title="Blind evaluation",
        summary="Each question with both answers, the raters' scores and notes, and the key once a tally exists.",
        home=links.SHEETS,
        routes=[
            Route(links.SHEETS, rows_page("blind/index.html", "sheets", queries.sheets)),
            Route(links.SHEET, sheet_page),
            Route(links.QUESTION, question_page),
        ],
        order=30,
    )
)
