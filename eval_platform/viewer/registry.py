"""The viewer's sections: each domain registers its pages in one module of `viewer/pages/` (its
routes, and a title and summary for the home page and the menu), with its templates in
`templates/<section>/`. The app loads every module of that package, so a new domain's pages (say,
judging's MT-Bench leaderboard) need no change anywhere else."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from dataclasses import dataclass

from starlette.routing import BaseRoute

PAGES_PACKAGE = "eval_platform.viewer.pages"


@dataclass(frozen=True)
class Section:
    name: str  # its templates' folder and its place in the menu
    title: str
    summary: str  # one line on the home page
    home: str  # the path of its first page
    routes: Sequence[BaseRoute]
    order: int = 100  # its place in the menu (lower first)


SECTIONS: dict[str, Section] = {}


def register(section: Section) -> Section:
    """Add a section; a second one of the same name is refused (two modules would be serving it)."""
    if section.name in SECTIONS and SECTIONS[section.name] is not section:
        raise ValueError(f"two viewer sections are named {section.name!r}")
    SECTIONS[section.name] = section
    return section


def load_sections() -> list[Section]:
    """Every section of `viewer/pages/`, in menu order."""
    package = importlib.import_module(PAGES_PACKAGE)
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{PAGES_PACKAGE}.{module.name}")
    return sorted(SECTIONS.values(), key=lambda section: (section.order, section.title))
