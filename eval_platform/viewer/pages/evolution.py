"""The prompt-evolution pages: every era; an era's generations and one generation's candidates; and
one candidate with its genes, its compression of the paragraph, every judge's rubric scores and
comments, its fitness and its ancestry."""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import eval_platform.viewer.links as links
import eval_platform.viewer.params as params
from eval_platform.viewer.app import rows_page, viewer_of
from eval_platform.viewer.queries import evolution as queries
from eval_platform.viewer.registry import Section, register
from eval_platform.viewer.warehouse import found


def _era(conn, name: str) -> queries.EraRow:
    return found(queries.era(conn, name), f"no era named {name!r} in this warehouse")


def era_page(request: Request) -> Response:
    name = request.path_params["era"]
    viewer = viewer_of(request)
    with viewer.reader.reading() as conn:
        era = _era(conn, name)
        generations = queries.generations(conn, name)
        latest = generations[-1].generation if generations else 0
        generation = params.integer(request, "generation", latest)
        candidates = queries.candidates(conn, name, generation)
    return viewer.render(
        request,
        "evolution/era.html",
        era=era,
        panel=json.loads(era.judge_panel or "{}"),
        generations=generations,
        generation=generation,
        candidates=candidates,
    )


def candidate_page(request: Request) -> Response:
    name, prompt_id = request.path_params["era"], params.required(request, "prompt_id")
    viewer = viewer_of(request)
    with viewer.reader.reading() as conn:
        era = _era(conn, name)
        candidate = found(queries.candidate(conn, name, prompt_id), f"era {name} has no prompt {prompt_id!r}")
        verdicts = queries.verdicts(conn, name, prompt_id)
        ancestry = queries.ancestry(conn, name, prompt_id)
        appearances = queries.appearances(conn, name, prompt_id)
    return viewer.render(
        request,
        "evolution/candidate.html",
        era=era,
        candidate=candidate,
        verdicts=verdicts,
        ancestry=ancestry,
        appearances=appearances,
    )


SECTION = register(
    Section(
        name="evolution",
        title="Prompt evolution",
        summary="Each era's generations and candidates: compressed texts, every judge's scores and comments, "
        "fitness and ancestry.",
        home=links.ERAS,
        routes=[
            Route(links.ERAS, rows_page("evolution/index.html", "eras", queries.eras)),
            Route(links.ERA, era_page),
            Route(links.CANDIDATE, candidate_page),
        ],
        order=20,
    )
)
