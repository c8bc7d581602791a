"""The sample viewer: a small Starlette app that reads the warehouse live and read-only, and renders
each page from a Jinja2 template with autoescaping on, so that every prompt, model output and sheet
cell is shown as text. The pages are the registered sections' (`registry.py`, `pages/`). It takes
only GET requests, and its Content-Security-Policy allows no script at all."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import eval_platform.viewer.links as links
from eval_platform.viewer.answers import shown_value
from eval_platform.viewer.registry import Section, load_sections
from eval_platform.viewer.warehouse import (
    UNREADABLE,
    Connection,
    MissingTableError,
    Reader,
    ViewerInputError,
    WarehouseReadError,
    WarehouseSource,
)

FOLDER = Path(__file__).parent
HEADERS = [
    # no script runs on any page, whatever a stored text holds; styles and images from the viewer only
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        b"base-uri 'none'; frame-ancestors 'none'",
    ),  # fmt: skip
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeaders:
    """Adds HEADERS to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)


def number(value: object, digits: int = 4) -> str:
    """A number as short text (4 significant digits), '–' for none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:.{digits}g}" if isinstance(value, float) else f"{value:,}"


def signed(value: float | None) -> str:
    return "–" if value is None else f"{value:+.4f}"


def moment(value: datetime | None) -> str:
    return "–" if value is None else value.strftime("%Y-%m-%d %H:%M")


def templates() -> Jinja2Templates:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(FOLDER / "templates"),
        autoescape=True,  # every value is escaped: stored text is text
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(number=number, signed=signed, moment=moment, shown=shown_value)
    environment.globals.update(path=links.path, links=links)
    return Jinja2Templates(env=environment)


class Viewer:
    """What every page uses: the warehouse's reader, the templates, and the sections for the menu."""

    def __init__(self, source: WarehouseSource, sections: list[Section]) -> None:
        self.reader, self.sections, self.templates = Reader(source), sections, templates()

    def render(self, request: Request, name: str, status_code: int = 200, **context: object) -> Response:
        return self.templates.TemplateResponse(
            request,
            name,
            {"sections": self.sections, "warehouse": self.reader.source.database, **context},
            status_code=status_code,
        )


def viewer_of(request: Request) -> Viewer:
    return request.app.state.viewer


def _error(status: int, title: str) -> Callable[[Request, Exception], Response]:
    def handle(request: Request, error: Exception) -> Response:
        return viewer_of(request).render(request, "error.html", status, title=title, message=str(error))

    return handle


def home(request: Request) -> Response:
    return viewer_of(request).render(request, "home.html")


def rows_page(template: str, name: str, query: Callable[[Connection], Any]) -> Callable[[Request], Response]:
    """A page of one query's rows (a section's first page, say), given to `template` as `name`."""

    def page(request: Request) -> Response:
        viewer = viewer_of(request)
        with viewer.reader.reading() as conn:
            rows = query(conn)
        return viewer.render(request, template, **{name: rows})

    return page


def build_app(source: WarehouseSource) -> Starlette:
    """The viewer over `source`."""
    sections = load_sections()
    routes = [
        Route(links.HOME, home),
        Mount("/static", StaticFiles(directory=FOLDER / "static"), name="static"),
        *[route for section in sections for route in section.routes],
    ]
    handlers: dict[int | type[Exception], Callable[[Request, Exception], Response]] = {
        ViewerInputError: _error(404, "Nothing here"),
        MissingTableError: _error(404, "Nothing here yet"),
        WarehouseReadError: _error(500, "The warehouse could not be read"),
        **{kind: _error(503, "The warehouse cannot be read now") for kind in UNREADABLE},
    }
    app = Starlette(routes=routes, exception_handlers=handlers)
    app.state.viewer = Viewer(source, sections)
    app.add_middleware(SecurityHeaders)
    return app


def serve(host: str, port: int, source: WarehouseSource) -> None:
    """Serve the viewer of `source` until interrupted."""
    import uvicorn

    uvicorn.run(build_app(source), host=host, port=port, log_level="warning")
