"""The structure the code promises: a house by domain whose logic knows neither Dagster nor DuckDB,
no import cycle, one writing asset per table with the asset graph equal to the table graph,
versioned warehouse schemas, and one route to every model."""

import ast
import inspect
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import duckdb
import pytest

from tests.conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "eval_platform"
DOMAINS = ("benchmarks", "evolution", "blind", "judging")
SHARED = "common"
# The code location's folders kept at the top of the tree, linked into the one namespace.
LINKED_FOLDERS = ("evaluation_assets", "resources", "jobs", "schedules")
# The code location (the Dagster definitions and the command line above them): the library imports none of it.
CODE_LOCATION = tuple(f"eval_platform.{name}" for name in (*LINKED_FOLDERS, "definitions", "cli"))
# A library module's role: a store owns tables (a module of a `store` package, or the warehouse's
# and connections' shared code), every other module is logic.
STORE_MODULES = {"store", "warehouse", "connections"}


def module_name(path: Path, root: Path | None = None) -> str:
    """The module a file is imported as: a linked folder's under `eval_platform`."""
    parts = path.relative_to(root or PROJECT_ROOT).with_suffix("").parts
    parts = ("eval_platform", *parts) if parts[0] in LINKED_FOLDERS else parts
    return ".".join(p for p in parts if p != "__init__")


def within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def package_modules() -> dict[str, Path]:
    """The library: every module of eval_platform/ but the code location's."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {module: path for module, path in modules.items() if not within(module, CODE_LOCATION)}


def imports(path: Path) -> set[str]:
    """Every module a file imports, at module level or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from package import module`
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def role(module: str) -> str:
    return "store" if STORE_MODULES & set(module.split(".")[1:]) else "logic"


def area(module: str) -> str:
    """common, a domain, or the package's top (environment)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in (SHARED, *DOMAINS)) else "top"


def layering_violations() -> list[str]:
    modules = package_modules()
    found = []
    for module, path in sorted(modules.items()):
        for target in sorted(imports(path)):
            top = target.split(".")[0]
            if within(target, CODE_LOCATION) or top in (*LINKED_FOLDERS, "definitions", "cli", "tests"):
                found.append(f"{module} imports the code location's {target}")
            if top in ("dagster", "dagster_duckdb"):
                found.append(f"{module} is library and imports {target}")
            if top == "duckdb" and role(module) == "logic":
                found.append(f"{module} is logic and imports {target}")
            if target not in modules or target == "eval_platform":
                continue
            if area(module) in DOMAINS and area(target) in DOMAINS and area(module) != area(target):
                found.append(f"{module} ({area(module)}) imports another domain's {target}")
            if area(module) == SHARED and area(target) in DOMAINS:
                found.append(f"{module} is shared and imports {target}")
    return found


def test_layering_logic_stores_and_domains():
    """The library imports no Dagster and no part of the code location; only stores import DuckDB;
    the domains never import each other; what they share imports no domain."""
    assert layering_violations() == []


def test_no_import_cycle_in_the_package():
    modules = package_modules()
    graph = {
        module: sorted(t for t in imports(path) if t in modules and t != module) for module, path in modules.items()
    }
    cycles, state = [], {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = "open"
        for target in graph[module]:
            if state.get(target) == "open":
                cycles.append(
                    " -> ".join(trail[trail.index(target) :] + [module, target])
                    if target in trail
                    else f"{module} -> {target}"
                )
            elif target not in state:
                visit(target, trail + [module])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
    assert cycles == []


def test_the_layering_test_catches_what_it_forbids(tmp_path, monkeypatch):
    """Each rule fires on a module that breaks it."""
    offenders = {
        "benchmarks/scoring_extra.py": "import duckdb\n",
        "benchmarks/store/extra.py": "from eval_platform.evolution.genetic import TAGS\n",
        "common/helper.py": "from eval_platform.benchmarks.declarations import Benchmark\n",
        "blind/store.py": "from eval_platform.evaluation_assets.blind.assets import SHEET_FILE\n",
        "evolution/eras.py": "from dagster import asset\n",
    }
    package = tmp_path / "eval_platform"
    for relative, source in {
        **dict.fromkeys(["evolution/genetic.py", "benchmarks/declarations.py", "blind/sheets.py"], ""),
        **offenders,
    }.items():
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_text(source)
    monkeypatch.setitem(globals(), "PACKAGE", package)
    monkeypatch.setitem(globals(), "PROJECT_ROOT", tmp_path)
    found = layering_violations()
    assert any("scoring_extra is logic and imports duckdb" in f for f in found)
    assert any("store.extra (benchmarks) imports another domain's eval_platform.evolution.genetic" in f for f in found)
    assert any("helper is shared and imports eval_platform.benchmarks.declarations" in f for f in found)
    assert any(
        "blind.store imports the code location's eval_platform.evaluation_assets.blind.assets" in f for f in found
    )
    assert any("evolution.eras is library and imports dagster" in f for f in found)
    assert not any("blind.store is logic" in f for f in found)  # a store may import DuckDB


OS_ENVIRONMENT = {"environ", "getenv", "putenv"}


def environment_reads(path: Path) -> list[str]:
    """Where a module reads the process's environment: os.environ, os.getenv or os.putenv (used or
    imported), or environment.py's `environment()` (called or imported)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            found += [f"line {node.lineno}: os.{node.attr}"] if node.attr in OS_ENVIRONMENT else []
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "eval_platform.environment"):
            names = OS_ENVIRONMENT if node.module == "os" else {"environment"}
            found += [f"line {node.lineno}: from {node.module} import {a.name}" for a in node.names if a.name in names]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "environment":
            found.append(f"line {node.lineno}: environment()")
    return found


def test_only_environment_py_reads_the_environment():
    """The library is given its folders and settings as arguments: no module but environment.py
    reads the process's environment (the code location and the command line read it, and pass it)."""
    readers = {
        module: found
        for module, path in sorted(package_modules().items())
        if module != "eval_platform.environment" and (found := environment_reads(path))
    }
    assert readers == {}


def test_the_environment_test_catches_each_way_of_reading_it(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        "import os\nfrom os import getenv\nfrom eval_platform.environment import environment\n"
        "os.environ.get('EVAL_X')\nos.putenv('EVAL_X', '1')\nsettings.environment().warehouse\nos.path.join('a')\n"
    )
    assert sorted(int(found.split()[1].rstrip(":")) for found in environment_reads(module)) == [2, 3, 4, 5, 6]


def imports_by_name(path: Path) -> list[int]:
    """The lines where a module imports a module by a name it is given (`importlib.import_module`)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
    ]


def test_a_name_or_module_attribute_is_looked_up_only_by_the_registry():
    """Every extension point (backends, solvers, parsers, answer filters, judges) is a registry of
    eval_platform/registry.py: no other module imports a module by a name it is given (the viewer's
    pages are found by walking their own package)."""
    modules = {module_name(path): path for path in product_files()}
    importers = {module for module, path in sorted(modules.items()) if imports_by_name(path)}
    assert importers == {"eval_platform.registry", "eval_platform.viewer.registry"}


def test_the_registry_test_finds_each_way_of_importing_by_name(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("import importlib\nfrom importlib import import_module\n"
                      "importlib.import_module('a')\nimport_module('b')\n")  # fmt: skip
    assert imports_by_name(module) == [3, 4]


MAX_FUNCTION_LINES = 60


def long_functions(paths: list[Path]) -> dict[str, int]:
    """Every function or method of the files longer than MAX_FUNCTION_LINES, with its length."""
    found = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found[f"{path}:{node.lineno} {node.name}"] = lines
    return found


def product_files(root: Path | None = None) -> list[Path]:
    """Every module of the product: the package and the code location's folders linked into it."""
    root = root or PROJECT_ROOT
    return [path for top in ("eval_platform", *LINKED_FOLDERS) for path in sorted((root / top).rglob("*.py"))]


def test_no_product_function_is_longer_than_sixty_lines():
    """The platform's and the engine's."""
    assert long_functions([*product_files(), *sorted((PROJECT_ROOT / "engine" / "eval_engine").rglob("*.py"))]) == {}


GENERIC_NAMES = (*LINKED_FOLDERS, "definitions", "cli")


def generic_imports(paths: list[Path]) -> list[str]:
    """Every import of a generic top-level name (`resources`, `jobs`, ...) the package once installed."""
    return [
        f"{path.name}: {target}"
        for path in paths
        for target in sorted(imports(path))
        if target.split(".")[0] in GENERIC_NAMES
    ]


def test_nothing_imports_the_code_location_by_a_generic_top_level_name():
    """One namespace: the product, the tests, the scripts and the docs' hooks import the code
    location as `eval_platform.resources`, `eval_platform.definitions`, ..., never as `resources`."""
    folders = ("tests", "speed", "scripts", "docs")
    paths = [*product_files(), *(path for folder in folders for path in sorted((PROJECT_ROOT / folder).rglob("*.py")))]
    assert generic_imports(paths) == []


def test_the_namespace_test_finds_each_generic_name(tmp_path):
    module = tmp_path / "module.py"
    module.write_text("import resources\nfrom jobs import JOBS\nfrom eval_platform.jobs import JOBS\n"
                      "def f():\n    from definitions import defs\n    import cli.main\n")  # fmt: skip
    assert generic_imports([module]) == ["module.py: cli.main", "module.py: definitions", "module.py: definitions.defs",
                                         "module.py: jobs", "module.py: jobs.JOBS", "module.py: resources"]  # fmt: skip


@pytest.mark.slow
def test_the_distribution_installs_one_namespace_holding_the_code_locations_folders(tmp_path):
    """The wheel built from the tree holds `eval_platform` only, with every module of the folders
    the layout keeps at the top of the tree inside it, and the command and code location under it."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PROJECT_ROOT / name, source / name)
    for name in ("eval_platform", *LINKED_FOLDERS):
        shutil.copytree(PROJECT_ROOT / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source)]
    subprocess.run([*command, "-w", str(tmp_path / "wheel")], check=True, cwd=tmp_path, timeout=300)
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names if ".dist-info/" not in name} == {"eval_platform"}
    info = {
        name.rsplit("/", 1)[1]: zipfile.ZipFile(wheel).read(name).decode() for name in names if ".dist-info/" in name
    }
    assert info["top_level.txt"].split() == ["eval_platform"]
    assert "eval-platform = eval_platform.cli.main:main" in info["entry_points.txt"]
    linked = {
        f"eval_platform/{path.relative_to(PROJECT_ROOT).as_posix()}"
        for folder in LINKED_FOLDERS
        for path in (PROJECT_ROOT / folder).rglob("*.py")
    }
    assert linked and linked <= set(names)
    assert {"eval_platform/definitions.py", "eval_platform/cli/main.py"} <= set(names)


# The engine (engine/: its package, tests and parity scripts) is a distribution of its own: it imports
# nothing of the platform, and the platform reaches it only through its public interface, the names
# `eval_engine` exports and its kit of tiny seeded models. Two files reach inside it on purpose, each
# for the reason given.
ENGINE_PUBLIC = ("eval_engine", "eval_engine.tiny_models")
ENGINE_INTERNALS_USERS = {
    "speed/loglikelihood_breakdown.py": "times the engine's own stages by wrapping them, beside the harness's",
    "tests/system/test_gpu_check.py": "breaks the engine's CPU kernel to see the standing GPU check refuse it",
}
PLATFORM_FOLDERS = ("eval_platform", *LINKED_FOLDERS, "tests", "speed", "scripts", "docs")


def engine_crossings(root: Path, public: set[str]) -> list[str]:
    """Every import across the engine's boundary: the engine's of the platform, and the platform's of
    an engine module or name outside its public interface (`public`: what `eval_engine` exports)."""
    found = []
    for path in sorted((root / "engine").rglob("*.py")):
        found += [
            f"{path.relative_to(root)} imports the platform's {target}"
            for target in sorted(imports(path))
            if target.split(".")[0] in ("eval_platform", "tests", "speed", *GENERIC_NAMES)
        ]
    for path in (path for folder in PLATFORM_FOLDERS for path in sorted((root / folder).rglob("*.py"))):
        if path.relative_to(root).as_posix() in ENGINE_INTERNALS_USERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "eval_engine":
                names = [a.name for a in node.names if node.module == "eval_engine" and a.name not in public]
                inside = node.module not in ENGINE_PUBLIC
                found += [f"{path.relative_to(root)} imports {node.module}.{n}" for n in names]
                found += [f"{path.relative_to(root)} imports {node.module}"] if inside else []
            elif isinstance(node, ast.Import):
                found += [
                    f"{path.relative_to(root)} imports {alias.name}"
                    for alias in node.names
                    if alias.name.split(".")[0] == "eval_engine" and alias.name not in ENGINE_PUBLIC
                ]
    return found


def test_the_engine_and_the_platform_meet_only_at_the_engines_public_interface():
    import eval_engine

    assert engine_crossings(PROJECT_ROOT, set(eval_engine.__all__)) == []


def test_the_boundary_test_finds_each_crossing(tmp_path):
    sources = {
        "engine/eval_engine/loading.py": "from eval_platform.environment import MODEL_CACHE\n",
        "engine/tests/test_x.py": "def f():\n    from tests.conftest import PROJECT_ROOT\n",
        "eval_platform/common/models/__init__.py": "from eval_engine import Chat, _hidden\n",
        "resources/__init__.py": "from eval_engine.packed import plan_passes\n",
        "tests/models/test_y.py": "import eval_engine.continuous\nfrom eval_engine.tiny_models import FAMILIES\n",
    }
    for relative, source in sources.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(source)
    assert engine_crossings(tmp_path, {"Chat"}) == [
        "engine/eval_engine/loading.py imports the platform's eval_platform.environment",
        "engine/eval_engine/loading.py imports the platform's eval_platform.environment.MODEL_CACHE",
        "engine/tests/test_x.py imports the platform's tests.conftest",
        "engine/tests/test_x.py imports the platform's tests.conftest.PROJECT_ROOT",
        "eval_platform/common/models/__init__.py imports eval_engine._hidden",
        "resources/__init__.py imports eval_engine.packed",
        "tests/models/test_y.py imports eval_engine.continuous",
    ]


def test_the_length_test_finds_a_long_function_and_a_long_method(tmp_path):
    module = tmp_path / "module.py"
    statements = [f"x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1)]
    short = "def short():\n" + "".join(f"    {line}\n" for line in statements)  # 60 lines
    long = "class A:\n    async def long(self):\n" + "".join(f"        {line}\n" for line in [*statements, "y = 1"])
    module.write_text(f"{short}\n\n{long}")
    assert list(long_functions([module]).values()) == [MAX_FUNCTION_LINES + 1]


# The tree's layers, lowest first: the library, the resources, the assets, the jobs, the schedules
# and sensors (with the planner), the code location, the command line. A module imports its own
# layer and those below, never one above, so no two folders import each other.
LAYERS = ("eval_platform", *(f"eval_platform.{name}" for name in ("resources", "evaluation_assets", "jobs")),
          "eval_platform.schedules", "eval_platform.definitions", "eval_platform.cli")  # fmt: skip


def layer(module: str) -> int:
    """The highest layer a module is within (-1 outside the package)."""
    return max((index for index, name in enumerate(LAYERS) if within(module, (name,))), default=-1)


def upward_imports(root: Path) -> list[str]:
    found = []
    for path in product_files(root):
        own = layer(module_name(path, root))
        for target in sorted(imports(path)):
            if layer(target) > own:
                found.append(f"{path.relative_to(root)} imports {target}, of a layer above")
    return found


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports(PROJECT_ROOT) == []


def test_the_layer_test_catches_an_upward_import(tmp_path):
    sources = {
        "eval_platform/environment.py": "",
        "evaluation_assets/blind/assets.py": "from eval_platform.jobs import JOBS\n",
        "jobs/__init__.py": "from eval_platform.evaluation_assets.partitions import era_partitions\n",
        "schedules/sensors.py": "def sensor():\n    from eval_platform.definitions import defs\n",
        "eval_platform/definitions.py": "from eval_platform.schedules import SCHEDULES\n",
        "eval_platform/cli/main.py": "from eval_platform.definitions import defs\n",
    }
    for relative, source in sources.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(source)
    assert upward_imports(tmp_path) == [
        "evaluation_assets/blind/assets.py imports eval_platform.jobs, of a layer above",
        "evaluation_assets/blind/assets.py imports eval_platform.jobs.JOBS, of a layer above",
        "schedules/sensors.py imports eval_platform.definitions, of a layer above",
        "schedules/sensors.py imports eval_platform.definitions.defs, of a layer above",
    ]


def test_assets_and_checks_are_grouped_by_domain():
    """Every asset is defined in `evaluation_assets/<domain>/assets.py` and every check beside its
    asset, in the same domain's `checks.py`; the domain's assets import no other domain's library."""
    from eval_platform.definitions import defs

    domains = {}
    for assets_def in defs().assets:
        module = assets_def.op.compute_fn.decorated_fn.__module__
        (key,) = assets_def.keys
        assert module.startswith("eval_platform.evaluation_assets.") and module.endswith(".assets"), (key, module)
        domains[key] = module.split(".")[2]
    for check in defs().asset_checks:
        module = check.op.compute_fn.decorated_fn.__module__
        (check_key,) = check.check_keys
        assert module == f"eval_platform.evaluation_assets.{domains[check_key.asset_key]}.checks", (check_key, module)
    for domain in set(domains.values()):
        for path in (PROJECT_ROOT / "evaluation_assets" / domain).glob("*.py"):
            others = {t for t in imports(path) if t.split(".")[:2] in [["eval_platform", d] for d in DOMAINS]}
            assert {t.split(".")[1] for t in others} <= {domain}, path


# An asset reads its config and resources, calls one library function, saves through its domain's
# store and returns its metadata: this many lines at most, from its `def` (as scripts/code_shape.py
# counts them).
MAX_ASSET_LINES = 40
ASSET_DECORATORS = {"asset", "multi_asset"}


def decorator_name(node: ast.expr) -> str | None:
    """`asset` of `@asset`, `@asset(...)`, `@dg.asset` and `@dg.asset(...)`."""
    target = node.func if isinstance(node, ast.Call) else node
    return target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None


def asset_lengths(folder: Path) -> dict[str, int]:
    """Every function in `folder` decorated as a Dagster asset, by `file:name`, and its length in lines."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                decorator_name(d) in ASSET_DECORATORS for d in node.decorator_list
            ):
                found[f"{path.relative_to(folder)}:{node.name}"] = (node.end_lineno or node.lineno) - node.lineno + 1
    return found


def test_every_asset_is_thin():
    lengths = asset_lengths(PROJECT_ROOT / "evaluation_assets")
    assert {name: n for name, n in lengths.items() if n > MAX_ASSET_LINES} == {}


def test_the_thin_asset_test_finds_every_kind_of_asset(tmp_path):
    (tmp_path / "assets.py").write_text(
        "import dagster as dg\nfrom dagster import asset, multi_asset\n\n"
        "@asset\ndef bare(): pass\n\n"
        "@asset(group_name='g')\ndef called():\n    pass\n\n"
        "@dg.asset(kinds={'duckdb'})\ndef qualified(): pass\n\n"
        "@multi_asset(specs=[])\ndef several(): pass\n\n"
        "@dg.asset_check(asset='bare')\ndef check(): pass\n\n"
        "def helper(): pass\n"
    )
    assert asset_lengths(tmp_path) == {"assets.py:bare": 1, "assets.py:called": 2, "assets.py:qualified": 1,
                                       "assets.py:several": 1}  # fmt: skip


# --- asset graph == table graph -----------------------------------------------------------------


def store_classes() -> list[type]:
    """Every store class (a domain's schema and the classes that read and write it)."""
    import eval_platform.definitions  # noqa: F401  (every store imported)
    from eval_platform.common.warehouse import Store

    found, todo = [], list(Store.__subclasses__())
    while todo:
        store = todo.pop()
        found.append(store)
        todo += store.__subclasses__()
    return found


def store_methods():
    from eval_platform.common.warehouse import table_access

    methods = {}
    for store in store_classes():
        for name, function in vars(store).items():
            if hasattr(function, "table_access"):
                assert name not in methods, f"store method {name} is defined twice"
                methods[name] = table_access(function)
    return methods


def tables_touched(function, methods, seen=None):
    """(reads, writes) of the store methods a function calls, following helpers of its own module."""
    seen = seen if seen is not None else set()
    seen.add(function)
    reads, writes = set(), set()
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr in methods:
            reads |= set(methods[node.func.attr]["reads"])
            writes |= set(methods[node.func.attr]["writes"])
        elif isinstance(node.func, ast.Name):
            helper = function.__globals__.get(node.func.id)
            if (
                inspect.isfunction(helper)
                and helper.__module__.startswith(("eval_platform", "evaluation_assets"))
                and helper not in seen
            ):
                more_reads, more_writes = tables_touched(helper, methods, seen)
                reads |= more_reads
                writes |= more_writes
    return reads, writes


# Edges that are files, not tables: the LLM rater reads the issued scoring sheet. (Filled sheets,
# which people and the LLM rater drop into filled/, are an input of blind_eval_scores, not an edge.)
FILE_EDGES = {("blind_eval_llm_rating", "blind_eval_sheet")}


def test_every_table_has_one_writer_and_deps_equal_the_table_graph():
    from eval_platform.common.warehouse import registered_stores
    from eval_platform.definitions import defs

    methods = store_methods()
    touched, deps = {}, {}
    for assets_def in defs().assets:
        (key,) = assets_def.keys
        name = key.path[-1]
        touched[name] = tables_touched(assets_def.op.compute_fn.decorated_fn, methods)
        (spec,) = assets_def.specs
        deps[name] = {dep.asset_key.path[-1] for dep in spec.deps}
    writers = {}
    for asset, (_, written) in touched.items():
        for table in written:
            writers.setdefault(table, []).append(asset)
    every_table = {table for store in registered_stores() for table in store.tables}
    assert {t: w for t, w in writers.items() if len(w) > 1} == {}
    assert every_table - set(writers) == set(), "tables no asset writes"
    for asset, (read, written) in touched.items():
        upstream = {writers[table][0] for table in read - written if table in writers}
        assert upstream == deps[asset] - {b for a, b in FILE_EDGES if a == asset}, asset


def test_asset_checks_read_tables_of_their_asset_or_upstream():
    from eval_platform.definitions import defs

    methods = store_methods()
    graph = defs().resolve_asset_graph()
    writers = {}
    for assets_def in defs().assets:
        for table in tables_touched(assets_def.op.compute_fn.decorated_fn, methods)[1]:
            writers[table] = assets_def.key
    for check in defs().asset_checks:
        (check_key,) = check.check_keys
        reads, writes = tables_touched(check.op.compute_fn.decorated_fn, methods)
        assert writes == set(), check_key
        allowed = {check_key.asset_key} | graph.get_ancestor_asset_keys(check_key.asset_key)
        assert {writers[t] for t in reads} <= allowed, check_key


def test_a_store_method_cannot_touch_an_undeclared_table(warehouse):
    from eval_platform.benchmarks.store import EvaluationStore
    from eval_platform.common.warehouse import reads

    class Sneaky(EvaluationStore):
        @reads("documents")
        def peek(self):
            return self.sql("SELECT count(*) FROM samples").fetchone()

    with warehouse.get_connection() as conn, pytest.raises(AssertionError, match="undeclared table"):
        Sneaky(conn).peek()


# --- schema versions ----------------------------------------------------------------------------


def test_a_new_warehouse_records_every_store_version(warehouse):
    from eval_platform.common.warehouse import registered_stores

    with warehouse.get_connection() as conn:
        versions = dict(conn.execute("SELECT store, version FROM schema_versions").fetchall())
    assert versions == {store.name: store.version for store in registered_stores()}


def load_sql(fixture: str, path: Path) -> None:
    """A warehouse file at `path` from a SQL fixture of tests/data, written by DuckDB alone."""
    with duckdb.connect(str(path)) as conn:
        conn.execute((PROJECT_ROOT / "tests" / "data" / fixture).read_text())


def columns_of(conn) -> dict[str, list[tuple[str, str, bool]]]:
    """Each table's columns, types and whether they take NULL (in any order: a migration appends the
    columns it adds)."""
    rows = conn.execute(
        "SELECT table_name, column_name, data_type, is_nullable FROM duckdb_columns() "
        "WHERE table_name != ? ORDER BY table_name, column_name",
        ["schema_versions"],
    ).fetchall()
    found: dict[str, list[tuple[str, str, bool]]] = {}
    for table, column, kind, nullable in rows:
        found.setdefault(table, []).append((column, kind, nullable))
    return found


def test_a_warehouse_at_the_oldest_version_has_the_tables_and_columns_a_new_one_has(tmp_path):
    """A warehouse of the oldest schema versions this platform migrates (tests/data/oldest_warehouse.sql)
    is carried to the current ones, with the columns a new one has: a column added to a table's
    declaration without its migration step fails here (a new table needs none: it is created in an
    existing warehouse as in a new one)."""
    from eval_platform.common.warehouse import registered_stores
    from eval_platform.resources import WarehouseResource

    path = tmp_path / "oldest.duckdb"
    load_sql("oldest_warehouse.sql", path)
    with duckdb.connect(str(path)) as conn:
        oldest = dict(conn.execute("SELECT store, version FROM schema_versions").fetchall())
    assert oldest == {store.name: store.oldest_version() for store in registered_stores()}
    with WarehouseResource(database=str(path)).get_connection() as conn:
        versions = dict(conn.execute("SELECT store, version FROM schema_versions").fetchall())
        migrated = columns_of(conn)
    with WarehouseResource(database=str(tmp_path / "new.duckdb")).get_connection() as conn:
        assert migrated == columns_of(conn)
    assert versions == {store.name: store.version for store in registered_stores()}


@pytest.mark.parametrize("versioned", [True, False], ids=["version 9", "unversioned"])
def test_a_warehouse_older_than_the_oldest_version_is_refused_saying_what_to_do(tmp_path, versioned):
    """A warehouse of benchmarks schema 9 (tests/data/v9_warehouse.sql), or one from before schema
    versions, is refused by a run and by a reader alike, naming the file, its version, the oldest
    version this platform migrates and what to do; the file is left as it was."""
    from eval_platform.benchmarks.store import BenchmarkSchema
    from eval_platform.common.connections import connect
    from eval_platform.common.warehouse import SchemaError
    from eval_platform.resources import WarehouseResource

    path = tmp_path / "old.duckdb"
    load_sql("v9_warehouse.sql", path)
    if not versioned:
        with duckdb.connect(str(path)) as conn:
            conn.execute("DROP TABLE schema_versions")
    oldest, own = BenchmarkSchema.oldest_version(), BenchmarkSchema.version
    assert oldest > 9
    held = "are at schema version 9" if versioned else "were written before schema versions"
    refusal = re.escape(
        f"The warehouse {path}: its benchmarks tables {held}, older than the oldest this platform migrates, "
        f"version {oldest} (its own is {own}). To keep its rows, open it once with an earlier version of the "
        f"platform that migrates it to version {oldest} (the changelog names it), then here; or materialise into "
        "a new warehouse: point EVAL_WAREHOUSE at another one, or move this file aside."
    )
    with pytest.raises(SchemaError, match=refusal), WarehouseResource(database=str(path)).get_connection():
        pass
    if versioned:  # the sample viewer's connection
        with pytest.raises(SchemaError, match=refusal), connect(str(path), read_only=True):
            pass
    with duckdb.connect(str(path)) as conn:
        tables = {name for (name,) in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        rows = conn.execute("SELECT prompt_id, user_prompt FROM prompts").fetchall()
    assert tables == {"raw_rows", "prompts"} | ({"schema_versions"} if versioned else set())
    assert rows == [("p1", "Which is a liquid?")]


def test_a_schema_step_carries_a_warehouse_from_the_oldest_version(warehouse, monkeypatch):
    """A store's next version as a release adds it, with its step from the current one: a warehouse
    at the oldest version is carried to the new one by the step; one older than that is refused."""
    from eval_platform.blind.store import BlindSchema
    from eval_platform.common.warehouse import SchemaError

    def with_rater_emails(conn) -> None:
        conn.execute("ALTER TABLE blind_scores ADD COLUMN rater_email VARCHAR")

    with warehouse.get_connection():  # at today's version
        pass
    current = BlindSchema.version
    monkeypatch.setattr(BlindSchema, "version", current + 1)
    monkeypatch.setattr(BlindSchema, "migrations", {current: with_rater_emails})
    assert BlindSchema.oldest_version() == current
    with warehouse.get_connection() as conn:
        version = conn.execute("SELECT version FROM schema_versions WHERE store = 'blind_evaluation'").fetchone()
        assert version == (current + 1,) and "rater_email" in {c for c, _, _ in columns_of(conn)["blind_scores"]}
        conn.execute("UPDATE schema_versions SET version = ? WHERE store = 'blind_evaluation'", [current - 1])
    older = f"its blind_evaluation tables are at schema version {current - 1}, older than the oldest this platform "
    with pytest.raises(SchemaError, match=older + f"migrates, version {current} "), warehouse.get_connection():
        pass


def test_a_table_declared_since_reaches_an_existing_warehouse(warehouse, monkeypatch):
    from eval_platform.blind.store import BlindSchema

    with warehouse.get_connection():
        pass
    monkeypatch.setattr(BlindSchema, "tables", {**BlindSchema.tables, "blind_notes": "note VARCHAR"})
    with warehouse.get_connection() as conn:
        assert conn.execute("SELECT count(*) FROM blind_notes").fetchone() == (0,)


def test_a_write_that_misses_or_misspells_a_column_fails_naming_it(warehouse):
    import pandas as pd

    from eval_platform.blind.store import BlindStore
    from eval_platform.common.warehouse import SchemaError

    questions = pd.DataFrame([{"Question_ID": "q1", "Question": "Why?", "Ground_Truth": "Because."}])
    with warehouse.store(BlindStore) as store:
        store.replace_questions(questions)
        with pytest.raises(SchemaError, match="blind_questions .* no such column Ground_Trth; missing Ground_Truth"):
            store.replace_questions(questions.rename(columns={"Ground_Truth": "Ground_Trth"}))
        assert store.load_questions()["Ground_Truth"].tolist() == ["Because."]  # nothing lost


def test_a_write_whose_statement_fails_raises_its_own_error_at_once_and_changes_nothing(warehouse):
    """Not the aborted transaction's error, which the write would take for a conflict and re-run."""
    import pandas as pd

    from eval_platform.blind.store import BlindStore

    questions = pd.DataFrame([{"Question_ID": "q1", "Question": "Why?", "Ground_Truth": "Because."}])
    with warehouse.store(BlindStore) as store:
        store.replace_questions(questions)
        with pytest.raises(duckdb.ConstraintException, match='duplicate key "q2"'):
            store.replace_questions(pd.concat([questions.assign(Question_ID="q2")] * 2))
        assert store.load_questions()["Question_ID"].tolist() == ["q1"]


def test_a_newer_warehouse_is_refused_clearly(warehouse):
    from eval_platform.common.warehouse import SchemaError

    with warehouse.get_connection() as conn:
        conn.execute("UPDATE schema_versions SET version = version + 1 WHERE store = 'benchmarks'")
    with pytest.raises(SchemaError, match="benchmarks tables are at schema version .* newer than this platform"):
        with warehouse.get_connection():
            pass


# --- one gateway ----------------------------------------------------------------------------------


def test_api_models_call_through_the_configured_gateway(monkeypatch):
    """An API model opened by the model resource calls the gateway's server, with its retries."""
    import asyncio

    from eval_platform.common.gateway import ModelCallError
    from eval_platform.common.models import Chat
    from eval_platform.resources import LanguageModelResource, ModelGatewayResource
    from tests.openai_stub_server import StubServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-gateway-not-a-real-key")
    with StubServer() as server:
        gateway = ModelGatewayResource(api_base=server.api_base, max_retries=2, backoff_s=0.01).gateway()
        model = LanguageModelResource(model="openai/judge-500").load(gateway)
        with pytest.raises(ModelCallError, match="InternalServerError"):
            asyncio.run(model.acomplete(Chat("", "hello"), max_tokens=5))
    assert server.calls["judge-500"] == 3  # the call and its two retries, on the configured server


def test_a_view_whose_definition_changed_is_rebuilt_with_every_row_kept(warehouse, monkeypatch):
    from eval_platform.benchmarks.store import BenchmarkSchema
    from eval_platform.environment import DeclarationFolders

    with warehouse.get_connection() as conn:
        conn.execute(
            "INSERT INTO leaderboard VALUES ('m', 'fp', 'arc_easy', 'harness', '0-shot', 'arc_easy', 'acc_norm', "
            "'none', 0, 3, 0.5, 0.1, 0.9, now(), NULL)"
        )
    build = BenchmarkSchema.dynamic_views["leaderboard_wide"]

    def wide(declarations: DeclarationFolders) -> str:
        return build(declarations).replace("SELECT l.model, ", "SELECT l.model, 1 AS added, ", 1)

    monkeypatch.setattr(BenchmarkSchema, "dynamic_views", {**BenchmarkSchema.dynamic_views, "leaderboard_wide": wide})
    with warehouse.get_connection() as conn:  # as a new benchmark's column reaches an existing warehouse
        assert conn.execute("SELECT model, added, arc_easy FROM leaderboard_wide").fetchall() == [("m", 1, 0.5)]
