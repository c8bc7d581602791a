"""The reference pages, generated from the code at every `mkdocs build` (an mkdocs hook, `hooks:` in
mkdocs.yml), so that they cannot drift from it:

- reference/tables.md: every store's tables and views, as a new warehouse has them (each column's
  type, each table's key), with the comment its declaration carries;
- reference/configuration.md: every environment variable and every field of every settings model
  (pydantic models: declarations, roster entries, resources, launchpad configs), with its type,
  default and description;
- reference/code-location.md: the assets, checks, jobs, schedules and sensors of the code location,
  and the console script's commands;
- reference/extension-points.md: every registry (`eval_platform.registry`) and what is registered in
  it: model backends, solvers, parsers, answer filters, judges;
- changelog.md: CHANGELOG.md, its links into docs/ made the site's.

Nothing here names a table or a field: a store, a model or an asset added to the code appears on the
next build. tests/system/test_docs.py checks that the pages name every table, column and field.
"""

from __future__ import annotations

import argparse
import functools
import html
import importlib
import inspect
import io
import itertools
import json
import os
import pkgutil
import re
import sys
import tokenize
import typing
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

PACKAGES = ("eval_platform",)


# --- what the pages are made of -------------------------------------------------------------------


def _prepare(root: Path) -> None:
    """The checkout's code first on the path, and the environment's EVAL_* variables unset, so that
    every default shown is the code's, not this machine's."""
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    for name in [n for n in os.environ if n.startswith("EVAL_")]:
        del os.environ[name]


@functools.cache
def _modules() -> list[Any]:
    """Every public module of the project's packages (private ones, `_name`, are left out)."""
    found = []
    with warnings.catch_warnings():  # the libraries' deprecation notices are not the docs' business
        warnings.simplefilter("ignore")
        _import_all(found)
    return found


def _import_all(found: list[Any]) -> None:
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        found.append(package)
        if hasattr(package, "__path__"):
            for info in pkgutil.walk_packages(package.__path__, package_name + "."):
                if not any(part.startswith("_") for part in info.name.split(".")):
                    found.append(importlib.import_module(info.name))


def _relative(text: str, root: Path) -> str:
    """A text with this checkout's and this user's paths made relative (`data/...`, `~/...`)."""
    return text.replace(str(root) + os.sep, "").replace(str(root), ".").replace(str(Path.home()), "~")


def _cell(text: Any) -> str:
    """Text on one line (a table cell, a paragraph): pipes and HTML escaped, so `<era>` shows as text."""
    parts = " ".join(str(text).split()).split("`")
    # outside code spans (the even parts) HTML is escaped; inside, Markdown shows it as it is
    shown = "`".join(part if index % 2 else html.escape(part, quote=False) for index, part in enumerate(parts))
    return shown.replace("|", "\\|")


def _first_paragraph(doc: str | None) -> str:
    return inspect.cleandoc(doc).split("\n\n")[0] if doc else ""


def _comments_before_keys(path: Path) -> dict[str, str]:
    """The comment lines written just above each `"name": ...` (or `name = ...`) line of a source
    file, by name: how a store's tables and views are described where they are declared."""
    comments: dict[str, str] = {}
    pending: list[str] = []
    with path.open(encoding="utf-8") as source:
        tokens = list(tokenize.generate_tokens(source.readline))
    lines = path.read_text(encoding="utf-8").splitlines()
    comment_lines = {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("#") and number in comment_lines:
            text = stripped.lstrip("#").strip()
            if not text.startswith("---"):  # a section's heading, not a description
                pending.append(text)
            continue
        for name in re.findall(r'^\s*(?:[\w]+\s*=\s*\{\s*)?"(\w+)"\s*:', line):
            if pending:
                comments.setdefault(name, " ".join(pending))
        pending = []
    return comments


def _sql_comment(body: str) -> str:
    """A view's leading `--` comment lines."""
    lines = []
    for line in body.strip().splitlines():
        if not line.strip().startswith("--"):
            break
        lines.append(line.strip()[2:].strip())
    return " ".join(lines)


# --- the warehouse's tables --------------------------------------------------------------------------


def _columns_table(columns: list[tuple[str, str, str]]) -> list[str]:
    """A table's columns (name, type, `not null`) as Markdown lines."""
    return ["| column | type | |", "|---|---|---|", *(f"| `{c}` | {_cell(t)} | {flag} |" for c, t, flag in columns), ""]


def _view_folder(store: Any, source: Path, root: Path) -> str:
    """Where a store's views are SQL files, if they are."""
    folder = source.parent / "views"
    if any((folder / f"{view}.sql").exists() for view in store.views):
        return f"; views in `{_relative(str(folder), root)}/`"
    return ""


def tables_page(root: Path) -> str:
    from eval_platform.common import warehouse
    from eval_platform.common.connections import connect
    from eval_platform.environment import DEFAULT_DECLARATIONS

    _modules()  # every store registers itself when its module is imported
    stores = warehouse.registered_stores()
    out = [
        "# Tables",
        "",
        "Generated from the code at build time (`docs/hooks/reference.py`): each store's declaration, and",
        "the columns a new warehouse has (`connect(':memory:')`, every store's schema created). Every",
        "write replaces one partition's rows in one transaction; keys are enforced on a DuckDB file (a",
        "DuckLake catalog has none: each write replaces its partition instead).",
        "",
    ]
    with connect(":memory:") as conn:
        columns: dict[str, list[tuple[str, str, str]]] = {}
        for table, column, kind, nullable in conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
            "ORDER BY table_name, ordinal_position"
        ).fetchall():
            columns.setdefault(table, []).append((column, kind, "" if nullable == "YES" else "not null"))
        kinds = dict(conn.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall())
    described = set()
    for store in stores:
        module = inspect.getmodule(store)
        source = Path(inspect.getfile(store))
        comments = _comments_before_keys(source)
        views = store.view_definitions(DEFAULT_DECLARATIONS)
        out += [
            f"## {store.name} (schema version {store.version})",
            "",
            _cell(_first_paragraph(module.__doc__ if module else store.__doc__)),
            "",
            f"Declared in `{_relative(str(source), root)}`{_view_folder(store, source, root)}.",
            "",
        ]
        for name in [*store.tables, *views]:
            is_view = name in views
            what = comments.get(name) or (_sql_comment(views[name]) if is_view else "")
            if is_view and name in store.dynamic_views and not what:
                what = _first_paragraph(store.dynamic_views[name].__doc__)
            out += [f"### `{name}`" + (" (view)" if is_view else ""), ""]
            if what:
                out += [_cell(what[0].upper() + what[1:] + ("" if what.endswith(".") else ".")), ""]
            if not is_view:
                key = warehouse.table_key(store.tables[name])
                if key:
                    out += [f"Key: {', '.join(f'`{k}`' for k in key)}.", ""]
            elif name in store.dynamic_views:
                out += ["Its columns are built from the declared benchmarks and protocols; as shipped:", ""]
            out += _columns_table(columns.get(name, []))
            described.add(name)
    others = sorted(set(columns) - described)
    if others:
        out += [
            "## The warehouse's own",
            "",
            f"Kept by `eval_platform/common/warehouse/`: `{warehouse.SCHEMA_TABLE}` records each store's "
            "schema version (an older warehouse, from the oldest supported version on, is migrated on first "
            f"use; one older than that or newer is refused); on a DuckLake catalog, `{warehouse.CLAIMS_TABLE}` "
            "holds one row per table, updated by each write of it, so two writes of one table conflict.",
            "",
        ]
        for name in others:
            out += [f"### `{name}`" + (" (view)" if kinds.get(name) == "VIEW" else ""), ""]
            out += _columns_table(columns[name])
    return "\n".join(out)


# --- settings -----------------------------------------------------------------------------------------


def _type_name(annotation: Any, anchors: dict[type, str]) -> str:
    """An annotation as a reader writes it (`str | None`, `list[str]`), a settings model linked."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "None"
    if origin is typing.Annotated:
        return _type_name(args[0], anchors)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " | ".join(_type_name(arg, anchors) for arg in args)
    if origin is typing.Literal:
        return " | ".join(json.dumps(arg) for arg in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        shown = [("..." if arg is Ellipsis else _type_name(arg, anchors)) for arg in args]
        return f"{name}[{', '.join(shown)}]"
    if isinstance(annotation, type):
        if annotation in anchors:
            return f"[{annotation.__name__}](#{anchors[annotation]})"
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _plain(value: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return _plain(value.model_dump())
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def _default(info: Any, root: Path) -> str:
    from pydantic_core import PydanticUndefined

    if info.default_factory is not None:
        value = info.default_factory()
    elif info.default is PydanticUndefined:
        return "required"
    else:
        value = info.default
    shown = " ".join(_relative(json.dumps(_plain(value), default=str), root).split()).replace("|", "\\|")
    return f"`{shown}`"


def settings_models(modules: Iterable[Any]) -> dict[type, tuple[str, list[str]]]:
    """Every settings model (a pydantic model with fields) bound to a public name in the project's
    modules: its home module (where it is defined, if bound there, else where it is first bound) and
    the public names it is bound to."""
    from pydantic import BaseModel

    bindings: dict[type, list[tuple[str, str]]] = {}
    for module in modules:
        for attribute, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseModel)
                and value.model_fields
                and value.__module__.startswith(PACKAGES)
                and not attribute.startswith("_")
            ):
                bindings.setdefault(value, []).append((module.__name__, attribute))
    found = {}
    for model, bound in bindings.items():
        modules_bound = [module for module, _ in bound]
        home = model.__module__ if model.__module__ in modules_bound else modules_bound[0]
        found[model] = (home, list(dict.fromkeys(attribute for _, attribute in bound)))
    return found


def _uses(definitions: Any) -> dict[type, list[str]]:
    """What each settings model serves as in the code location: an asset's launchpad config, or a
    resource."""
    uses: dict[type, list[str]] = {}
    for assets in definitions.assets:
        parameter = inspect.signature(assets.op.compute_fn.decorated_fn).parameters.get("config")
        if parameter is not None and isinstance(parameter.annotation, type):
            keys = ", ".join(f"`{k.to_user_string()}`" for k in assets.keys)
            uses.setdefault(parameter.annotation, []).append(f"the launchpad config (`ops: ...: config:`) of {keys}")
    for key, resource in definitions.resources.items():
        kind = getattr(resource, "resource_cls", type(resource))  # a resource configured at launch: its class
        uses.setdefault(kind, []).append(f"the resource `{key}` (`resources: {key}: config:`)")
    return uses


def configuration_page(root: Path) -> str:
    from eval_platform.definitions import defs
    from eval_platform.environment import Environment

    models = settings_models(_modules())
    ordered = sorted(models, key=lambda m: (m is not Environment, models[m][0], m.__name__))
    anchors = {model: model.__name__.lower() for model in ordered}
    uses = _uses(defs())
    out = [
        "# Configuration",
        "",
        "Generated from the code at build time (`docs/hooks/reference.py`): every settings model of the",
        "project (a pydantic model: a declaration file's schema, a roster entry, a Dagster resource or a",
        "launchpad config), each field with its type, default and description. A field declared once",
        "appears in every model built from it (the launchpad configs are the declarations' fields, each",
        "optional; a roster entry's model fields are `ModelSettings`'). Defaults are the code's, with no",
        "`EVAL_*` variable set.",
        "",
    ]
    by_module: dict[str, list[type]] = {}
    for model in ordered:
        by_module.setdefault(models[model][0], []).append(model)
    for module_name, members in by_module.items():
        out += [f"## `{module_name}`", ""]
        for model in members:
            names = [n for n in models[model][1] if n != model.__name__]
            out += [f"### {model.__name__} {{#{anchors[model]}}}", ""]
            if names:
                out += [f"Bound as {', '.join(f'`{n}`' for n in names)}.", ""]
            doc = _first_paragraph(model.__doc__)
            if doc:
                out += [_cell(_relative(doc, root)), ""]
            for use in uses.get(model, []):
                out += [f"Serves as {use}.", ""]
            depends = [name for name, info in model.model_fields.items() if "resource_dependency" in info.metadata]
            out += [f"Reads the resource `{name}` (configured there)." for name in depends] + ([""] if depends else [])
            environment = model is Environment
            out += [f"| {'variable' if environment else 'field'} | type | default | description |", "|---|---|---|---|"]
            for name, info in model.model_fields.items():
                if name in depends:
                    continue
                shown = info.alias or name
                description = _relative(info.description or "", root)
                out.append(
                    f"| `{shown}` | {_cell(_type_name(info.annotation, anchors))} | {_default(info, root)} | "
                    f"{_cell(description)} |"
                )
            out.append("")
    return "\n".join(out)


# --- the code location ----------------------------------------------------------------------------------


def _help(parser: argparse.ArgumentParser) -> str:
    buffer = io.StringIO()
    parser.print_help(buffer)
    return buffer.getvalue()


def _partitions(partitions: Any) -> str:
    """A partitions definition by its dimensions' names (`benchmarks` × `roster_models`)."""
    from dagster import MultiPartitionsDefinition

    if partitions is None:
        return "–"
    if isinstance(partitions, MultiPartitionsDefinition):
        return " × ".join(f"`{getattr(d.partitions_def, 'name', d.name)}`" for d in partitions.partitions_defs)
    return f"`{getattr(partitions, 'name', None) or type(partitions).__name__}`"


def code_location_page(root: Path) -> str:
    from dagster import ScheduleDefinition

    from eval_platform.cli.main import parser
    from eval_platform.definitions import defs

    out = [
        "# Code location",
        "",
        "Generated from the code location `defs()` (`eval_platform/definitions.py`) at build time:",
        "its assets by group, asset checks, jobs, schedules and sensors, and the console script.",
        "",
        "## Assets",
        "",
    ]
    specs = sorted(defs().resolve_all_asset_specs(), key=lambda s: (s.group_name or "", s.key.to_user_string()))
    for group, members in itertools.groupby(specs, key=lambda s: s.group_name):
        out += [f"### Group `{group}`", "", "| asset | partitions | depends on | what |", "|---|---|---|---|"]
        for spec in members:
            out.append(
                f"| `{spec.key.to_user_string()}` | {_partitions(spec.partitions_def)} | "
                f"{', '.join(f'`{d.asset_key.to_user_string()}`' for d in spec.deps) or '–'} | "
                f"{_cell(_relative(_first_paragraph(spec.description), root))} |"
            )
        out.append("")
    out += ["## Asset checks", "", "| check | on | what |", "|---|---|---|"]
    for checks in defs().asset_checks or []:
        for spec in checks.check_specs:
            out.append(
                f"| `{spec.name}` | `{spec.asset_key.to_user_string()}` | "
                f"{_cell(_relative(spec.description or '', root))} |"
            )
    out += ["", "## Jobs", "", "| job | what |", "|---|---|"]
    for job in sorted(defs().resolve_all_job_defs(), key=lambda j: j.name):
        if not job.name.startswith("__"):
            out.append(f"| `{job.name}` | {_cell(_relative(job.description or '', root))} |")
    out += ["", "## Schedules", "", "| schedule | when | job | what |", "|---|---|---|---|"]
    for schedule in defs().schedules or []:
        assert isinstance(schedule, ScheduleDefinition), schedule
        out.append(
            f"| `{schedule.name}` | `{schedule.cron_schedule}` ({schedule.execution_timezone or 'UTC'}) | "
            f"`{schedule.job_name}` | {_cell(_relative(schedule.description or '', root))} |"
        )
    out += ["", "## Sensors", "", "| sensor | default | what |", "|---|---|---|"]
    for sensor in defs().sensors or []:
        status = getattr(sensor.default_status, "value", sensor.default_status)
        out.append(f"| `{sensor.name}` | {str(status).lower()} | {_cell(_relative(sensor.description or '', root))} |")
    main = parser()
    out += [
        "",
        "## The console script",
        "",
        "`eval-platform` (`eval_platform/cli/main.py`), installed by `pip install -e ./engine -e .`:",
        "",
    ]
    out += ["```text", _relative(_help(main), root).rstrip(), "```", ""]
    for action in main._actions:
        for name, command in action.choices.items() if isinstance(action, argparse._SubParsersAction) else []:
            out += [f"### `eval-platform {name}`", "", "```text", _relative(_help(command), root).rstrip(), "```", ""]
    return "\n".join(out)


# --- the changelog ---------------------------------------------------------------------------------------


def extension_points_page(root: Path) -> str:
    """Every registry, where it is made, and each name registered in it with what it names."""
    from eval_platform import registry

    lines = [
        "# Extension points",
        "",
        _first_paragraph(registry.__doc__),
        "",
        "A name not listed may be `module:attribute` (`my_package.solvers:ClozeSolver`): looked up, it is "
        "imported and registered.",
    ]
    for kind, points in sorted(registry.extension_points().items()):
        owner = next(
            f"{module.__name__}.{name}"
            for module in _modules()
            for name, value in vars(module).items()
            if value is points and not name.startswith("_")
        )
        aliases = ", ".join(f"`{old}` for `{new}`" for old, new in sorted(points.aliases.items()))
        lines += ["", f"## {kind}", "", f"`{owner}`" + (f"; older names: {aliases}" if aliases else ""), ""]
        lines += ["| name | registered | what it is |", "|---|---|---|"]
        lines += [
            f"| {f'`{e.name}`' if e.name else 'any other'} | `{e.reference}` | {_cell(e.summary)} |"
            for e in points.entries()
        ]
    return "\n".join(lines) + "\n"


def changelog_page(root: Path) -> str:
    """CHANGELOG.md as a page of the site: its links into docs/ made relative to the site."""
    return (root / "CHANGELOG.md").read_text(encoding="utf-8").replace("](docs/", "](")


# --- the hook --------------------------------------------------------------------------------------------

GENERATORS = {
    "reference/tables.md": tables_page,
    "reference/configuration.md": configuration_page,
    "reference/code-location.md": code_location_page,
    "reference/extension-points.md": extension_points_page,
    "changelog.md": changelog_page,
}


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site's files (mkdocs' `on_files` event)."""
    from mkdocs.structure.files import File

    root = Path(config.config_file_path).resolve().parent
    _prepare(root)
    for uri, generate in GENERATORS.items():
        files.append(File.generated(config, uri, content=generate(root)))
    return files
