"""The docs site builds with `mkdocs build --strict` (every page, link and anchor resolves), and its
reference, generated from the code at build time, names every table and column a warehouse has,
every field of every settings model, and every asset, check, job, schedule and sensor."""

import html
import importlib
import json
import os
import pkgutil
import re
import sys

import pytest
from pydantic import BaseModel

from tests.conftest import PROJECT_ROOT
from tests.processes import run_to_end

PACKAGES = ("eval_platform",)
# The settings models the reference must show whatever else it finds: a benchmark declaration, a
# protocol, a roster entry, a model's and an era's settings, the resources and the launchpad configs.
REQUIRED_MODELS = (
    "Environment", "Benchmark", "EvaluationSettings", "DataSource", "ChatFormat", "Headline", "Protocol",
    "ProtocolTask", "RosterEntry", "ModelSettings", "EraSettings", "SourceConfig", "EvaluationConfig",
    "ComparisonConfig", "EraConfig", "WarehouseResource", "ModelGatewayResource", "LanguageModelResource",
    "RosterResource",
)  # fmt: skip
REQUIRED_STORES = {"benchmarks", "evolution", "blind_evaluation"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site as `make docs` builds it, into a folder of its own."""
    folder = tmp_path_factory.mktemp("site")
    returncode, output = run_to_end(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        timeout_s=600,  # a hang guard: the build takes tens of seconds
        cwd=PROJECT_ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert returncode == 0, output[-3000:]
    return folder


def sections(page: str) -> dict[str, str]:
    """A built page's h3 sections by the first code (or text) of their heading: its HTML up to the
    next h2 or h3."""
    found = {}
    for match in re.finditer(r"<h3[^>]*>(.*?)</h3>(.*?)(?=<h[23][ >]|\Z)", page, flags=re.S):
        heading, body = match.groups()
        code = re.search(r"<code>(.*?)</code>", heading)
        name = html.unescape(code.group(1) if code else re.sub(r"<[^>]+>", "", heading)).replace("¶", "").strip()
        found[name] = body
    return found


def code_texts(fragment: str) -> set[str]:
    return {html.unescape(text) for text in re.findall(r"<code>(.*?)</code>", fragment, flags=re.S)}


def test_the_site_builds_strictly_with_every_section(site):
    for page in ("index.html", "getting-started/index.html", "guides/add-a-benchmark/index.html",
                 "concepts/asset-graph/index.html", "concepts/tables/index.html", "operations/team/index.html",
                 "results/parity/index.html", "results/speed/index.html", "changelog/index.html"):  # fmt: skip
        assert (site / page).is_file(), page
    assert (site / "images" / "asset-graph.png").is_file()


def test_the_tables_reference_names_every_table_and_column_of_a_new_warehouse(site):
    from eval_platform.common.connections import connect
    from eval_platform.common.warehouse import registered_stores

    importlib.import_module("eval_platform.definitions")  # every store the code location uses
    assert REQUIRED_STORES <= {store.name for store in registered_stores()}
    with connect(":memory:") as conn:
        columns: dict[str, list[str]] = {}
        for table, column in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns ORDER BY table_name, ordinal_position"
        ).fetchall():
            columns.setdefault(table, []).append(column)
    assert {
        "raw_rows",
        "samples",
        "results",
        "item_lineage",
        "leaderboard_wide",
        "generations",
        "blind_tallies",
    } <= set(columns)
    documented = sections((site / "reference" / "tables" / "index.html").read_text(encoding="utf-8"))
    missing = sorted(set(columns) - set(documented))
    assert not missing, f"tables not in the reference: {missing}"
    for table, names in columns.items():
        absent = [name for name in names if name not in code_texts(documented[table])]
        assert not absent, f"{table}: columns not in the reference: {absent}"


def settings_models() -> set[type[BaseModel]]:
    """Every pydantic model defined or built in the project's packages (every public module imported),
    found through the subclasses of BaseModel."""
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        for info in pkgutil.walk_packages(getattr(package, "__path__", []), package_name + "."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                importlib.import_module(info.name)
    found, todo = set(), [BaseModel]
    while todo:
        for subclass in todo.pop().__subclasses__():
            todo.append(subclass)
            if subclass.__module__.startswith(PACKAGES) and subclass.model_fields:
                found.add(subclass)
    return found


def test_the_configuration_reference_names_every_field_of_every_settings_model(site):
    documented = sections((site / "reference" / "configuration" / "index.html").read_text(encoding="utf-8"))
    assert not [name for name in REQUIRED_MODELS if name not in documented]
    models = settings_models()
    assert {m.__name__ for m in models} >= set(REQUIRED_MODELS)
    for model in models:
        # a model built only as a base (resources' ModelSettingsConfig) is shown through its subclasses
        shown = [documented[model.__name__]] if model.__name__ in documented else [
            documented[sub.__name__] for sub in model.__subclasses__() if sub.__name__ in documented
        ]  # fmt: skip
        assert shown, f"{model.__module__}.{model.__name__} is not in the reference"
        for fragment in shown:
            names = [info.alias or name for name, info in model.model_fields.items()]
            absent = [name for name in names if name not in code_texts(fragment)]
            assert not absent, f"{model.__name__}: fields not in the reference: {absent}"


def test_the_reference_lists_every_environment_variable_with_its_code_default(site):
    from eval_platform.environment import Environment

    page = (site / "reference" / "configuration" / "index.html").read_text(encoding="utf-8")
    environment = sections(page)["Environment"]
    for info in Environment.model_fields.values():
        assert info.alias in code_texts(environment), info.alias
    # defaults are the code's, not this machine's: no path of this checkout or this user
    for generated in ("tables", "configuration", "code-location"):
        text = (site / "reference" / generated / "index.html").read_text(encoding="utf-8")
        assert str(PROJECT_ROOT) not in text, generated


def test_the_code_location_reference_names_every_asset_check_job_schedule_and_sensor(site):
    from eval_platform.definitions import defs

    named = code_texts((site / "reference" / "code-location" / "index.html").read_text(encoding="utf-8"))
    expected = {spec.key.to_user_string() for spec in defs().resolve_all_asset_specs()}
    expected |= {spec.name for checks in defs().asset_checks or [] for spec in checks.check_specs}
    expected |= {job.name for job in defs().resolve_all_job_defs() if not job.name.startswith("__")}
    expected |= {schedule.name for schedule in defs().schedules or []}
    expected |= {sensor.name for sensor in defs().sensors or []}
    assert {"benchmark_evaluation", "model_comparison", "model_evaluation", "roster_sensor"} <= expected
    assert not sorted(expected - named)


REGISTERED = """
import json
from eval_platform.registry import extension_points
print(json.dumps({kind: registry.names() for kind, registry in extension_points().items()}))
"""


def test_the_extension_points_reference_lists_every_registry_and_every_name_in_it(site):
    """Against the registries as a fresh process has them (this one's may hold what other tests added)."""
    returncode, output = run_to_end([sys.executable, "-c", REGISTERED], timeout_s=120, cwd=PROJECT_ROOT)
    assert returncode == 0, output[-3000:]
    registered = json.loads(output.strip().splitlines()[-1])
    page = (site / "reference" / "extension-points" / "index.html").read_text(encoding="utf-8")
    assert {"model backend", "solver", "parser", "answer filter", "judge"} == registered.keys()
    assert {"local/", "served/", "", "harness", "letter", "generate", "arc", "strict-match", "written"} <= {
        name for names in registered.values() for name in names
    }
    assert set(registered) == {html.unescape(h) for h in re.findall(r"<h2[^>]*>(.*?)<", page)}
    named = code_texts(page)
    assert not sorted(
        (kind, name) for kind, names in registered.items() for name in names if name and name not in named
    )
