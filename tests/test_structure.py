"""The structure the code promises: a house by domain whose logic knows neither Dagster nor DuckDB,
no import cycle, one writing asset per table with the asset graph equal to the table graph,
versioned warehouse schemas, and one route to every model."""

import ast
import inspect
import json
import textwrap
from pathlib import Path

import duckdb
import pytest

from tests.conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "eval_platform"
DOMAINS = ("benchmarks", "evolution", "blind", "judging")
SHARED = "common"
# The Dagster definitions' folders (the code location): the library imports none of them.
DAGSTER_FOLDERS = ("evaluation_assets", "resources", "jobs", "schedules")
# A library module's role: a store owns tables (a module of a `store` package, or the warehouse's
# and connections' shared code), every other module is logic.
STORE_MODULES = {"store", "warehouse", "connections"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(p for p in parts if p != "__init__")


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


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
            if top in DAGSTER_FOLDERS or top == "tests":
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
        "blind/store.py": "from evaluation_assets.blind.assets import SHEET_FILE\n",
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
    assert any("blind.store imports the code location's evaluation_assets.blind.assets" in f for f in found)
    assert any("evolution.eras is library and imports dagster" in f for f in found)
    assert not any("blind.store is logic" in f for f in found)  # a store may import DuckDB


def test_assets_and_checks_are_grouped_by_domain():
    """Every asset is defined in `evaluation_assets/<domain>/assets.py` and every check beside its
    asset, in the same domain's `checks.py`; the domain's assets import no other domain's library."""
    from evaluation_assets.definitions import defs

    domains = {}
    for assets_def in defs.assets:
        module = assets_def.op.compute_fn.decorated_fn.__module__
        (key,) = assets_def.keys
        assert module.startswith("evaluation_assets.") and module.endswith(".assets"), (key, module)
        domains[key] = module.split(".")[1]
    for check in defs.asset_checks:
        module = check.op.compute_fn.decorated_fn.__module__
        (check_key,) = check.check_keys
        assert module == f"evaluation_assets.{domains[check_key.asset_key]}.checks", (check_key, module)
    for domain in set(domains.values()):
        for path in (PROJECT_ROOT / "evaluation_assets" / domain).glob("*.py"):
            others = {t for t in imports(path) if t.split(".")[:2] in [["eval_platform", d] for d in DOMAINS]}
            assert {t.split(".")[1] for t in others} <= {domain}, path


# --- asset graph == table graph -----------------------------------------------------------------


def store_classes() -> list[type]:
    """Every store class (a domain's schema and the classes that read and write it)."""
    import evaluation_assets.definitions  # noqa: F401  (every store imported)
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
    from evaluation_assets.definitions import defs

    methods = store_methods()
    touched, deps = {}, {}
    for assets_def in defs.assets:
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
    from evaluation_assets.definitions import defs

    methods = store_methods()
    graph = defs.resolve_asset_graph()
    writers = {}
    for assets_def in defs.assets:
        for table in tables_touched(assets_def.op.compute_fn.decorated_fn, methods)[1]:
            writers[table] = assets_def.key
    for check in defs.asset_checks:
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


def benchmark_tables_at(conn, version: int) -> None:
    """The benchmark tables carried to `version` by their frozen migration steps alone (from the
    warehouse's recorded version, or from before versioning), and that version recorded. The
    tables a release added without a step (it created them as new) are not there."""
    from eval_platform.benchmarks.store.migrations import MIGRATIONS
    from eval_platform.common.warehouse import existing_tables, registered_stores
    from resources import WarehouseResource  # noqa: F401  (every store registered)

    try:
        (start,) = conn.execute("SELECT version FROM schema_versions WHERE store = 'benchmarks'").fetchone()
    except duckdb.CatalogException:  # before versioning: each store whose tables it has is at version 0
        start, tables = 0, existing_tables(conn)
        conn.execute("CREATE TABLE schema_versions (store VARCHAR PRIMARY KEY, version INTEGER, migrated_at TIMESTAMP)")
        for store in registered_stores():
            if tables & set(store.tables):
                conn.execute("INSERT INTO schema_versions VALUES (?, 0, now())", [store.name])
    for step in range(start, version):
        MIGRATIONS[step](conn)
    conn.execute("UPDATE schema_versions SET version = ? WHERE store = 'benchmarks'", [version])


def load_fixture(fixture: str, path: Path) -> None:
    """A warehouse file at `path` from a fixture of tests/data: SQL, an export (DuckDB's EXPORT
    DATABASE of what a release wrote; its load.sql names its files from the project root) or a
    release's own file, gzipped."""
    import gzip

    source = PROJECT_ROOT / "tests" / "data" / fixture
    if fixture.endswith(".gz"):
        path.write_bytes(gzip.decompress(source.read_bytes()))
        return
    with duckdb.connect(str(path)) as conn:
        conn.execute(f"IMPORT DATABASE 'tests/data/{fixture}'" if source.is_dir() else source.read_text())


def test_an_unversioned_warehouse_is_migrated(tmp_path):
    from resources import WarehouseResource

    path = tmp_path / "old.duckdb"
    load_fixture("unversioned_warehouse.sql", path)
    with duckdb.connect(str(path)) as conn:  # the steps to version 9 (the tables before this release's)
        benchmark_tables_at(conn, 9)
        assert conn.execute("SELECT count(*) FROM ingest_rejections").fetchone()[0] == 1
        predictions = conn.execute(
            "SELECT mode, prompt_format, num_fewshot, predicted, choice_loglikelihoods FROM predictions ORDER BY mode"
        ).fetchall()
        assert predictions == [("letter", "chat", 0, "A", None), ("loglikelihood", "harness", 0, "B", [-1.5, -0.5])]
        assert conn.execute("SELECT prompt_format, num_fewshot FROM scores").fetchall() == [("chat", 0)]
    with WarehouseResource(database=str(path)).get_connection() as conn:
        rejected = conn.execute("SELECT stage, source_row_id FROM rejected_rows ORDER BY stage").fetchall()
        assert rejected == [("ingest", "row-0"), ("preprocess", "row-1")]
        samples = conn.execute("SELECT solver, settings_key, responses FROM samples ORDER BY solver").fetchall()
        assert [(solver, key) for solver, key, _ in samples] == [("harness", "0-shot"), ("letter", "0-shot")]
        assert json.loads(samples[0][2]) == [-1.5, -0.5]
        assert conn.execute("SELECT solver, settings_key FROM results").fetchall() == [("letter", "0-shot")]
        assert conn.execute("SELECT total_generations, final_max_fitness FROM era_summaries").fetchall() == [(2, 0.6)]
        columns = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'eras'"
            ).fetchall()
        }
        assert "total_generations" not in columns and "config" in columns
        assert conn.execute("SELECT count(*) FROM blind_questions").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM item_lineage").fetchone()[0] == 0  # views rebuilt
    with WarehouseResource(database=str(path)).get_connection() as conn:  # migrating twice changes nothing
        assert conn.execute("SELECT count(*) FROM samples").fetchone()[0] == 2


def test_a_version_1_warehouse_is_migrated(tmp_path):
    """Version 1 (harness requests inside prompts, eras without status or costs) to the current."""
    from eval_platform.common.warehouse import registered_stores
    from resources import WarehouseResource

    path = tmp_path / "v1.duckdb"
    load_fixture("v1_warehouse.sql", path)
    with duckdb.connect(str(path)) as conn:
        benchmark_tables_at(conn, 9)
        assert conn.execute("SELECT prompt_id, row_number FROM prompts").fetchall() == [("p1", 0)]
        assert conn.execute("SELECT correct FROM scores").fetchall() == [(1.0,)]
    with WarehouseResource(database=str(path)).get_connection() as conn:
        versions = dict(conn.execute("SELECT store, version FROM schema_versions").fetchall())
        assert versions == {store.name: store.version for store in registered_stores()}
        assert conn.execute("SELECT document_id, row_number FROM documents").fetchall() == [("p1", 0)]
        assert conn.execute("SELECT stage, source_row_id FROM rejected_rows ORDER BY stage").fetchall() == [
            ("ingest", "row-0"),
            ("preprocess", "row-1"),
        ]
        assert conn.execute("SELECT status, generations_done FROM eras").fetchall() == [("complete", 2)]
        assert conn.execute("SELECT status, total_generations, final_max_fitness FROM era_summaries").fetchall() == [
            ("complete", 2, 0.6)
        ]
        assert conn.execute("SELECT population, calls, cost_usd FROM generation_stats").fetchall() == [(5, None, None)]
        assert conn.execute("SELECT count(*) FROM era_checkpoints").fetchone()[0] == 0  # tables added since


def imported_export(fixture: str, path: Path) -> dict[str, list[tuple]]:
    """A warehouse file at `path` from an export in tests/data: every table's rows, sorted."""
    load_fixture(fixture, path)
    with duckdb.connect(str(path)) as conn:
        return table_rows(conn)


def table_rows(conn) -> dict[str, list[tuple]]:
    tables = [
        t
        for (t,) in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE table_name != 'schema_versions'"
        ).fetchall()
    ]
    return {table: conn.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall() for table in tables}


def test_a_version_2_warehouse_is_migrated_with_every_row(tmp_path, monkeypatch):
    """The release's warehouse of version 2 (tests/data/v2_warehouse: ARC-Easy by two models,
    compared), carried to version 9, gains the prediction runs and keeps every row; its predictions
    name no run, which a comparison reads as an unrecorded environment."""
    monkeypatch.chdir(PROJECT_ROOT)
    path = tmp_path / "v2.duckdb"
    before = imported_export("v2_warehouse", path)
    with duckdb.connect(str(path)) as conn:
        benchmark_tables_at(conn, 9)
        after = {table: conn.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall() for table in before}
        added = (
            conn.execute("SELECT count(*), count(run_id) FROM predictions").fetchone(),
            conn.execute("SELECT count(*), count(prediction_run_id) FROM score_history").fetchone(),
            conn.execute("SELECT count(*), count(environment_differences) FROM model_comparisons").fetchone(),
        )
    assert added == ((4, 0), (12, 0), (2, 0))
    # Tables whose `model` became the roster name (version 5) keep every row (see the version 4 test).
    renamed = {"scores", "item_scores", "score_history", "model_comparisons"}
    assert {table: len(after[table]) for table in renamed} == {table: len(before[table]) for table in renamed}
    # Version 6: a harness request whole (its few-shot prefix joined to each context, one pair per
    # choice), a prediction without `predicted_flexible` (and, since version 3, with its run).
    requests = [
        (
            prompt_id,
            benchmark,
            shots,
            [prefix + c for c in contexts] * len(continuations),
            continuations,
            choices,
            None,
            ids,
        )
        for prompt_id, benchmark, shots, prefix, contexts, continuations, choices, _, _, ids in before[
            "harness_requests"
        ]
    ]
    predictions = [row[:9] + row[10:] + (None,) for row in before["predictions"]]
    assert (after.pop("harness_requests"), after.pop("predictions")) == (requests, predictions)
    after = {table: rows for table, rows in after.items() if table not in renamed}
    assert after == {
        table: rows for table, rows in before.items() if table not in renamed | {"harness_requests", "predictions"}
    }


def test_a_version_8_warehouse_keeps_every_harness_row_under_the_key_of_its_settings(tmp_path, monkeypatch):
    """The release's warehouse of version 8 (tests/data/v8_warehouse: a throwaway harness task by two
    roster models, one run twice, the other 0-shot and compared with it), carried to version 9, keeps
    every row of every table; each harness row takes the settings key of the run that computed it (a
    comparison: its model's)."""
    from tests.tables import SETTINGS_KEYED_TABLES, V8_SETTINGS_KEYS, settings_keys

    monkeypatch.chdir(PROJECT_ROOT)
    path = tmp_path / "v8.duckdb"
    before = imported_export("v8_warehouse", path)
    with duckdb.connect(str(path)) as conn:
        benchmark_tables_at(conn, 9)
        after = {
            table: conn.execute(
                f"SELECT * {'EXCLUDE (settings_key)' if table in SETTINGS_KEYED_TABLES else ''} "
                f"FROM {table} ORDER BY ALL"
            ).fetchall()
            for table in before
        }
        keys = settings_keys(conn)
    assert after == before and sum(map(len, before.values())) > 0
    assert keys == V8_SETTINGS_KEYS


# each version 9 table -> the version 10 table its rows move to, and the solver they take there
# (spec: a chat solver's or the spec's harness format; harness: a harness benchmark's)
V10_MOVES = {
    "item_scores": "spec samples' metrics",
    "scores": "results",
    "harness_results": "results",
    "score_history": "history",
    "harness_history": "history",
    "model_comparisons": "comparisons",
    "harness_comparisons": "comparisons",
    "harness_samples": "samples",
    "harness_answers": "answers",
    "prompts": "documents",
}


def version_9_counts(conn) -> dict[str, int]:
    from eval_platform.common.warehouse import existing_tables

    tables = existing_tables(conn)
    return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] if table in tables else 0
            for table in [*V10_MOVES, "raw_rows", "predictions"]}  # fmt: skip


@pytest.mark.parametrize(
    "fixture",
    ["unversioned_warehouse.sql", "v1_warehouse.sql", "v2_warehouse", "v4_warehouse.duckdb.gz", "v8_warehouse"],
)
def test_version_10_carries_every_version_9_row_into_the_one_set_of_tables(fixture, tmp_path, monkeypatch):
    """Every row of a version 9 warehouse's two sets of tables lands in the one set: each item score
    as a metric of its sample, each score, history row, comparison, harness sample (a harness
    benchmark's: no document) and answer, and each prompt as a document; a spec's prediction is its
    document's samples, its item scores' values summed alike; the raw rows are untouched."""
    from eval_platform.common.warehouse import existing_tables
    from resources import WarehouseResource

    monkeypatch.chdir(PROJECT_ROOT)
    path = tmp_path / "old.duckdb"
    load_fixture(fixture, path)
    with duckdb.connect(str(path)) as conn:
        benchmark_tables_at(conn, 9)
        counts = version_9_counts(conn)
        raw = conn.execute("SELECT * FROM raw_rows ORDER BY ALL").fetchall()
        scored = counts["item_scores"] > 0
        item_sum = conn.execute("SELECT sum(value) FROM item_scores").fetchone()[0] if scored else 0
        spec_predictions = (
            conn.execute(
                "SELECT count(*) FROM predictions JOIN model_evaluations "
                "USING (benchmark, model_fingerprint, mode, prompt_format, num_fewshot)"
            ).fetchone()[0]
            if {"predictions", "model_evaluations"} <= existing_tables(conn)
            else 0
        )
    assert sum(counts.values()) > 0
    with WarehouseResource(database=str(path)).get_connection() as conn:
        spec = "solver <> 'harness' OR settings ->> '$.migrated_from' = 'scores'"
        metrics = conn.execute(
            "SELECT count(*), coalesce(sum(value::DOUBLE), 0) FROM samples, "
            "json_each(metrics) AS m(key, value) WHERE document_id IS NOT NULL"
        ).fetchone()
        harness_samples = conn.execute("SELECT count(*) FROM samples WHERE document_id IS NULL").fetchone()[0]
        moved = {
            "results": conn.execute("SELECT count(*) FROM results").fetchone()[0],
            "spec results": conn.execute(f"SELECT count(*) FROM results WHERE {spec}").fetchone()[0],
            "history": conn.execute("SELECT count(*) FROM history").fetchone()[0],
            "comparisons": conn.execute("SELECT count(*) FROM comparisons").fetchone()[0],
            "answers": conn.execute("SELECT count(*) FROM answers").fetchone()[0],
            "documents": conn.execute("SELECT count(*) FROM documents").fetchone()[0],
            "spec samples": conn.execute(
                "SELECT count(DISTINCT (benchmark, model_fingerprint, settings_key, solver, document_id)) "
                "FROM samples WHERE document_id IS NOT NULL"
            ).fetchone()[0],
        }
        assert conn.execute("SELECT * FROM raw_rows ORDER BY ALL").fetchall() == raw
    assert moved["results"] == counts["scores"] + counts["harness_results"]
    assert moved["spec results"] == counts["scores"]
    assert moved["history"] == counts["score_history"] + counts["harness_history"]
    assert moved["comparisons"] == counts["model_comparisons"] + counts["harness_comparisons"]
    assert moved["answers"] == counts["harness_answers"]
    assert moved["documents"] == counts["prompts"]
    assert harness_samples == counts["harness_samples"]
    assert metrics[0] == counts["item_scores"] and metrics[1] == pytest.approx(item_sum)
    assert moved["spec samples"] == spec_predictions  # a prediction (of an evaluated model): one document's samples


V4_NAMES = {
    "local/smollm2-135m-instruct@b179c9523d0e6a0f": "smollm2-135m-instruct-float32",
    "local/smollm2-135m-instruct@b179c9523d0e6a0f+bfloat16": "smollm2-135m-instruct-bfloat16",
}


def test_a_version_4_warehouse_carries_every_row_over_to_the_roster_names(tmp_path):
    """The release's own warehouse file of version 4 (tests/data/v4_warehouse.duckdb.gz: ARC-Easy
    scored twice, TruthfulQA mc2 and GSM8K, SmolLM2 in float32 and bfloat16, compared, the protocol
    scored) carried to version 9: every row is kept, under the names the demo roster gives those two
    models. At the current version the roster's next evaluation continues the history."""
    from eval_platform.benchmarks.comparison import NO_PAIRED_TEST
    from resources import RosterResource, WarehouseResource
    from tests.evaluation import materialize_evaluation, materialize_inputs

    path = tmp_path / "v4.duckdb"
    load_fixture("v4_warehouse.duckdb.gz", path)
    keyed = {
        "scores": "model_fingerprint",
        "item_scores": "model_fingerprint",
        "score_history": "model_fingerprint",
        "protocol_results": "model_fingerprint",
        "model_comparisons": "fingerprint_a",
    }
    with duckdb.connect(str(path)) as conn:
        assert conn.execute("SELECT version FROM schema_versions WHERE store = 'benchmarks'").fetchone() == (4,)
        tables = [
            t
            for (t,) in conn.execute(
                "SELECT table_name FROM duckdb_tables() WHERE table_name != 'schema_versions'"
            ).fetchall()
        ]
        before = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
        per_fingerprint = {
            t: dict(conn.execute(f"SELECT {c}, count(*) FROM {t} GROUP BY ALL").fetchall()) for t, c in keyed.items()
        }
        scores = conn.execute(
            "SELECT model_fingerprint, benchmark, mode, metric, n, accuracy, ci_low, ci_high FROM scores ORDER BY ALL"
        ).fetchall()
        predictions = conn.execute(
            "SELECT count(DISTINCT (model_fingerprint, benchmark, mode, prompt_format, num_fewshot)) FROM predictions"
        ).fetchone()[0]
        runs_before = conn.execute(
            "SELECT count(DISTINCT run_id) FROM score_history WHERE benchmark = 'arc_easy' AND model_fingerprint = ?",
            [next(iter(V4_NAMES))],
        ).fetchone()[0]
        benchmark_tables_at(conn, 9)
        after = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
        named = {
            t: {
                (fingerprint, name): n
                for fingerprint, name, n in conn.execute(
                    f"SELECT {c}, {'model_a' if t == 'model_comparisons' else 'model'}, count(*) FROM {t} GROUP BY ALL"
                ).fetchall()
            }
            for t, c in keyed.items()
        }
        migrated = conn.execute(
            "SELECT model_fingerprint, benchmark, mode, metric, n, accuracy, ci_low, ci_high FROM scores ORDER BY ALL"
        ).fetchall()
        evaluations = conn.execute("SELECT count(*) FROM model_evaluations").fetchone()[0]
        comparisons = conn.execute(
            "SELECT metric, model_a, model_b, paired_test FROM model_comparisons ORDER BY metric"
        ).fetchall()
    assert after == before and migrated == scores  # no row lost
    assert named == {
        t: {(fingerprint, V4_NAMES[fingerprint]): n for fingerprint, n in counts.items()}
        for t, counts in per_fingerprint.items()
    }  # each under its model's roster name
    assert evaluations == predictions
    float32, bfloat16 = V4_NAMES.values()
    assert comparisons == [
        ("acc", float32, bfloat16, "exact McNemar"),
        ("acc_norm", float32, bfloat16, "exact McNemar"),
        ("mc2", float32, bfloat16, NO_PAIRED_TEST),
    ]

    warehouse = WarehouseResource(database=str(path))
    runs = "SELECT count(DISTINCT run_id) FROM history WHERE model = ? AND benchmark = 'arc_easy'"
    with warehouse.get_connection() as conn:
        runs_migrated = conn.execute(runs, [float32]).fetchone()[0]
    roster = RosterResource(directory=str(PROJECT_ROOT / "data" / "roster"))  # the demo roster
    assert materialize_inputs(warehouse, "arc_easy", 4).success
    assert materialize_evaluation(warehouse, "arc_easy", float32, roster, {"solvers": ["letter"]}).success
    with warehouse.get_connection() as conn:
        assert (runs_migrated, conn.execute(runs, [float32]).fetchone()[0]) == (runs_before, runs_before + 1)


def test_a_version_3_warehouse_takes_the_harness_metric_names(tmp_path):
    path = tmp_path / "v4.duckdb"
    load_fixture("v4_warehouse.duckdb.gz", path)
    with duckdb.connect(str(path)) as conn:  # a version 3 warehouse: the metrics' old names
        conn.execute("DELETE FROM score_history WHERE benchmark = 'gsm8k'")
        for metric, value in (("strict_match", 1.0), ("flexible_match", 0.0)):
            conn.execute(
                "INSERT INTO score_history VALUES ('run-1', now(), 'm', 'm@1', 'gsm8k', 'p1', 'r1', "
                "'generate', 'harness', 5, ?, ?, NULL)",
                [metric, value],
            )
        conn.execute("UPDATE schema_versions SET version = 3 WHERE store = 'benchmarks'")
        benchmark_tables_at(conn, 9)
        assert conn.execute(
            "SELECT metric, value FROM score_history WHERE benchmark = 'gsm8k' ORDER BY metric"
        ).fetchall() == [("flexible-extract", 0.0), ("strict-match", 1.0)]


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


@pytest.mark.parametrize(
    "fixture",
    ["unversioned_warehouse.sql", "v1_warehouse.sql", "v2_warehouse", "v4_warehouse.duckdb.gz", "v8_warehouse"],
)
def test_a_migrated_warehouse_has_the_tables_and_columns_a_new_one_has(fixture, tmp_path, monkeypatch):
    """A column added to a table's declaration without its migration fails here (a new table needs
    none: it is created in an existing warehouse as in a new one)."""
    from resources import WarehouseResource

    monkeypatch.chdir(PROJECT_ROOT)
    path = tmp_path / "old.duckdb"
    load_fixture(fixture, path)
    with WarehouseResource(database=str(path)).get_connection() as conn:
        migrated = columns_of(conn)
    with WarehouseResource(database=str(tmp_path / "new.duckdb")).get_connection() as conn:
        assert migrated == columns_of(conn)


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
    from resources import LanguageModelResource, ModelGatewayResource
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

    with warehouse.get_connection() as conn:
        conn.execute(
            "INSERT INTO leaderboard VALUES ('m', 'fp', 'arc_easy', 'harness', '0-shot', 'arc_easy', 'acc_norm', "
            "'none', 0, 3, 0.5, 0.1, 0.9, now())"
        )
    build = BenchmarkSchema.dynamic_views["leaderboard_wide"]

    def wide() -> str:
        return build().replace("SELECT l.model, ", "SELECT l.model, 1 AS added, ", 1)

    monkeypatch.setattr(BenchmarkSchema, "dynamic_views", {**BenchmarkSchema.dynamic_views, "leaderboard_wide": wide})
    with warehouse.get_connection() as conn:  # as a new benchmark's column reaches an existing warehouse
        assert conn.execute("SELECT model, added, arc_easy FROM leaderboard_wide").fetchall() == [("m", 1, 0.5)]
