"""The structure the code promises: a house by domain whose logic knows neither Dagster nor DuckDB,
no import cycle, one writing asset per table with the asset graph equal to the table graph,
versioned warehouse schemas, and one route to every model."""

import ast
import inspect
import textwrap
from pathlib import Path

import duckdb
import pytest

from tests.conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "eval_platform"
DOMAINS = ("benchmarks", "evolution", "blind", "judging")
SHARED = "common"
# A module's role, by its file name: stores own tables; Dagster modules define assets, checks, jobs,
# schedules, sensors, partitions and resources; every other module is logic.
STORE_FILES = {"store", "warehouse"}
DAGSTER_FILES = {"assets", "checks", "jobs", "schedules", "sensors", "partitions", "resources", "definitions", "main"}
THIN_FOLDERS = ["evaluation_assets", "resources", "jobs", "schedules"]
# The commands: they may import the code location.
COMMANDS = {"eval_platform.main", "eval_platform.move_warehouse"}


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
    name = module.split(".")[-1]
    return "store" if name in STORE_FILES else "dagster" if name in DAGSTER_FILES else "logic"


def area(module: str) -> str:
    """common, a domain, or the top (definitions, main)."""
    return module.split(".")[1] if module.count(".") >= 2 or module.split(".")[1] in (SHARED, *DOMAINS) else "top"


def layering_violations() -> list[str]:
    modules = package_modules()
    found = []
    for module, path in sorted(modules.items()):
        for target in sorted(imports(path)):
            top = target.split(".")[0]
            if top in THIN_FOLDERS or top == "tests":
                found.append(f"{module} imports the top-level {target}")
            if top in ("dagster", "dagster_duckdb", "duckdb") and role(module) == "logic":
                found.append(f"{module} is logic and imports {target}")
            if target not in modules or target == "eval_platform":
                continue
            if role(module) == "store" and role(target) == "dagster":
                found.append(f"{module} is a store and imports {target}")
            if area(module) in DOMAINS and area(target) in DOMAINS and area(module) != area(target):
                found.append(f"{module} ({area(module)}) imports another domain's {target}")
            if area(module) == SHARED and area(target) != SHARED:
                found.append(f"{module} is shared and imports {target}")
            if area(target) == "top" and module not in COMMANDS:
                found.append(f"{module} imports the code location's {target}")
    return found


def test_layering_logic_stores_and_domains():
    """Logic imports neither Dagster nor DuckDB; a store imports no asset; the domains never import
    each other; what they share imports no domain; only the main command imports the code location."""
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
        "benchmarks/store_extra.py": "from eval_platform.evolution.genetic import TAGS\n",
        "common/helper.py": "from eval_platform.benchmarks.specs import BENCHMARKS\n",
        "blind/store.py": "from evaluation_assets.blind.assets import SHEET_FILE\n",
    }
    package = tmp_path / "eval_platform"
    for relative, source in {
        **dict.fromkeys(["evolution/genetic.py", "benchmarks/specs.py", "blind/assets.py"], ""),
        **offenders,
    }.items():
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_text(source)
    monkeypatch.setitem(globals(), "PACKAGE", package)
    monkeypatch.setitem(globals(), "PROJECT_ROOT", tmp_path)
    found = layering_violations()
    assert any("scoring_extra is logic and imports duckdb" in f for f in found)
    assert any("store_extra (benchmarks) imports another domain's eval_platform.evolution.genetic" in f for f in found)
    assert any("helper is shared and imports eval_platform.benchmarks.specs" in f for f in found)
    assert any("blind.store is a store and imports eval_platform.blind.assets" in f for f in found)


def test_thin_folders_only_re_export_the_package():
    for folder in THIN_FOLDERS:
        for path in (PROJECT_ROOT / folder).rglob("*.py"):
            own = {t for t in imports(path) if t.split(".")[0] not in ("eval_platform", "sys", "__future__")}
            assert own == set(), f"{path} imports {own}"
            assert len(path.read_text().splitlines()) < 30, f"{path} is not thin"


# --- asset graph == table graph -----------------------------------------------------------------


def store_methods():
    from eval_platform.common.warehouse import table_access
    from eval_platform.common.warehouse import registered_stores

    methods = {}
    for store in registered_stores():
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
            if inspect.isfunction(helper) and helper.__module__.startswith("eval_platform") and helper not in seen:
                more_reads, more_writes = tables_touched(helper, methods, seen)
                reads |= more_reads
                writes |= more_writes
    return reads, writes


# Edges that are files, not tables: the LLM rater reads the issued scoring sheet. (Filled sheets,
# which people and the LLM rater drop into filled/, are an input of blind_eval_scores, not an edge.)
FILE_EDGES = {("blind_eval_llm_rating", "blind_eval_sheet")}


def test_every_table_has_one_writer_and_deps_equal_the_table_graph():
    from evaluation_assets.definitions import defs
    from eval_platform.common.warehouse import registered_stores

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
    from eval_platform.benchmarks.store import BenchmarkStore
    from eval_platform.common.warehouse import reads

    class Sneaky(BenchmarkStore):
        @reads("prompts")
        def peek(self):
            return self.sql("SELECT count(*) FROM predictions").fetchone()

    with warehouse.get_connection() as conn, pytest.raises(AssertionError, match="undeclared table"):
        Sneaky(conn).peek()


# --- schema versions ----------------------------------------------------------------------------


def test_a_new_warehouse_records_every_store_version(warehouse):
    from eval_platform.common.warehouse import registered_stores

    with warehouse.get_connection() as conn:
        versions = dict(conn.execute("SELECT store, version FROM schema_versions").fetchall())
    assert versions == {store.name: store.version for store in registered_stores()}


def test_an_unversioned_warehouse_is_migrated(tmp_path):
    from resources import WarehouseResource

    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute((PROJECT_ROOT / "tests" / "data" / "unversioned_warehouse.sql").read_text())
    with WarehouseResource(database=str(path)).get_connection() as conn:
        rejected = conn.execute("SELECT stage, source_row_id FROM rejected_rows ORDER BY stage").fetchall()
        assert rejected == [("ingest", "row-0"), ("preprocess", "row-1")]
        assert conn.execute("SELECT count(*) FROM ingest_rejections").fetchone()[0] == 1
        predictions = conn.execute(
            "SELECT mode, prompt_format, num_fewshot, predicted, choice_loglikelihoods FROM predictions ORDER BY mode"
        ).fetchall()
        assert predictions == [("letter", "chat", 0, "A", None), ("loglikelihood", "harness", 0, "B", [-1.5, -0.5])]
        assert conn.execute("SELECT prompt_format, num_fewshot FROM scores").fetchall() == [("chat", 0)]
        assert conn.execute("SELECT total_generations, final_max_fitness FROM era_summaries").fetchall() == [(2, 0.6)]
        columns = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'eras'"
            ).fetchall()
        }
        assert "total_generations" not in columns and "config" in columns
        assert conn.execute("SELECT count(*) FROM blind_questions").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM score_lineage").fetchone()[0] == 0  # views rebuilt
    with WarehouseResource(database=str(path)).get_connection() as conn:  # migrating twice changes nothing
        assert conn.execute("SELECT count(*) FROM predictions").fetchone()[0] == 2


def test_a_version_1_warehouse_is_migrated(tmp_path):
    """Version 1 (harness requests inside prompts, eras without status or costs) to the current."""
    from resources import WarehouseResource
    from eval_platform.common.warehouse import registered_stores

    path = tmp_path / "v1.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute((PROJECT_ROOT / "tests" / "data" / "v1_warehouse.sql").read_text())
    with WarehouseResource(database=str(path)).get_connection() as conn:
        versions = dict(conn.execute("SELECT store, version FROM schema_versions").fetchall())
        assert versions == {store.name: store.version for store in registered_stores()}
        assert conn.execute("SELECT prompt_id, row_number FROM prompts").fetchall() == [("p1", 0)]
        assert conn.execute("SELECT stage, source_row_id FROM rejected_rows ORDER BY stage").fetchall() == [
            ("ingest", "row-0"),
            ("preprocess", "row-1"),
        ]
        assert conn.execute("SELECT correct FROM scores").fetchall() == [(1.0,)]
        assert conn.execute("SELECT status, generations_done FROM eras").fetchall() == [("complete", 2)]
        assert conn.execute("SELECT status, total_generations, final_max_fitness FROM era_summaries").fetchall() == [
            ("complete", 2, 0.6)
        ]
        assert conn.execute("SELECT population, calls, cost_usd FROM generation_stats").fetchall() == [(5, None, None)]
        assert conn.execute("SELECT count(*) FROM era_checkpoints").fetchone()[0] == 0  # tables added since
        assert conn.execute("SELECT count(*) FROM harness_requests").fetchone()[0] == 0


def imported_export(fixture: str, path: Path) -> dict[str, list[tuple]]:
    """A warehouse file at `path` from an export in tests/data (DuckDB's EXPORT DATABASE of what a
    release wrote; its load.sql names its files from the project root): every table's rows, sorted."""
    with duckdb.connect(str(path)) as conn:
        conn.execute(f"IMPORT DATABASE 'tests/data/{fixture}'")
        tables = [
            t
            for (t,) in conn.execute(
                "SELECT table_name FROM duckdb_tables() WHERE table_name != 'schema_versions'"
            ).fetchall()
        ]
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall() for table in tables}


def test_a_version_2_warehouse_is_migrated_with_every_row(tmp_path, monkeypatch):
    """The previous release's warehouse (tests/data/v2_warehouse, DuckDB's EXPORT DATABASE of what it
    wrote: ARC-Easy by two models, compared) gains the prediction runs and keeps every row; its
    predictions name no run, which a comparison reads as an unrecorded environment."""
    from resources import WarehouseResource
    from eval_platform.common.warehouse import registered_stores

    monkeypatch.chdir(PROJECT_ROOT)
    path = tmp_path / "v2.duckdb"
    before = imported_export("v2_warehouse", path)
    tables = list(before)
    with WarehouseResource(database=str(path)).get_connection() as conn:
        versions = dict(conn.execute("SELECT store, version FROM schema_versions").fetchall())
        after = {table: conn.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall() for table in tables}
        added = (
            conn.execute("SELECT count(*), count(run_id) FROM predictions").fetchone(),
            conn.execute("SELECT count(*), count(prediction_run_id) FROM score_history").fetchone(),
            conn.execute("SELECT count(*), count(environment_differences) FROM model_comparisons").fetchone(),
            conn.execute("SELECT count(*) FROM prediction_runs").fetchone(),
        )
    assert versions == {store.name: store.version for store in registered_stores()}
    assert added == ((4, 0), (12, 0), (2, 0), (0,))
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
    """The previous release's warehouse (tests/data/v8_warehouse: a throwaway harness task by two roster
    models, one run twice, the other 0-shot and compared with it) keeps every row of every table;
    each harness row takes the settings key of the run that computed it (a comparison: its model's)."""
    from resources import WarehouseResource
    from eval_platform.common.warehouse import registered_stores
    from tests.tables import SETTINGS_KEYED_TABLES, V8_SETTINGS_KEYS, settings_keys

    monkeypatch.chdir(PROJECT_ROOT)
    path = tmp_path / "v8.duckdb"
    before = imported_export("v8_warehouse", path)
    with WarehouseResource(database=str(path)).get_connection() as conn:
        versions = dict(conn.execute("SELECT store, version FROM schema_versions").fetchall())
        after = {
            table: conn.execute(
                f"SELECT * {'EXCLUDE (settings_key)' if table in SETTINGS_KEYED_TABLES else ''} "
                f"FROM {table} ORDER BY ALL"
            ).fetchall()
            for table in before
        }
        keys = settings_keys(conn)
    assert versions == {store.name: store.version for store in registered_stores()}
    assert after == before and sum(map(len, before.values())) > 0
    assert keys == V8_SETTINGS_KEYS


V4_NAMES = {
    "local/smollm2-135m-instruct@b179c9523d0e6a0f": "smollm2-135m-instruct-float32",
    "local/smollm2-135m-instruct@b179c9523d0e6a0f+bfloat16": "smollm2-135m-instruct-bfloat16",
}


def test_a_version_4_warehouse_carries_every_row_over_to_the_roster_names(tmp_path):
    """The previous release's own warehouse file (tests/data/v4_warehouse.duckdb.gz: ARC-Easy scored
    twice, TruthfulQA mc2 and GSM8K, SmolLM2 in float32 and bfloat16, compared, the protocol scored):
    every row is kept, under the names the demo roster gives those two models, and the roster's
    next evaluation reuses the stored predictions and continues the score history."""
    from eval_platform.benchmarks.comparison import NO_PAIRED_TEST
    from resources import RosterResource
    from resources import WarehouseResource
    from tests.evaluation import materialize_evaluation, materialize_inputs

    path = v4_warehouse(tmp_path)
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
    warehouse = WarehouseResource(database=str(path))
    with warehouse.get_connection() as conn:
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

    roster = RosterResource(directory=str(PROJECT_ROOT / "data" / "roster"))  # the demo roster
    assert materialize_inputs(warehouse, "arc_easy", 4).success
    result = materialize_evaluation(warehouse, "arc_easy", float32, roster)
    modes = (
        next(e for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == "benchmark_predictions")
        .materialization.metadata["modes"]
        .value
    )
    assert {mode: counts["computed"] for mode, counts in modes.items()} == {
        "letter/chat/0-shot": 0,
        "loglikelihood/harness/0-shot": 0,
    }
    with warehouse.get_connection() as conn:
        runs = conn.execute(
            "SELECT count(DISTINCT run_id) FROM score_history WHERE model = ? AND benchmark = 'arc_easy'", [float32]
        ).fetchone()[0]
    assert runs == runs_before + 1  # the runs that scored it before the roster, and this one


def v4_warehouse(tmp_path) -> Path:
    """The previous release's own warehouse file, unpacked."""
    import gzip

    path = tmp_path / "v4.duckdb"
    path.write_bytes(gzip.decompress((PROJECT_ROOT / "tests" / "data" / "v4_warehouse.duckdb.gz").read_bytes()))
    return path


def test_a_version_3_warehouse_takes_the_harness_metric_names(tmp_path):
    from resources import WarehouseResource

    path = v4_warehouse(tmp_path)
    with duckdb.connect(str(path)) as conn:  # a version 3 warehouse: the metrics' old names
        conn.execute("DELETE FROM score_history WHERE benchmark = 'gsm8k'")
        for metric, value in (("strict_match", 1.0), ("flexible_match", 0.0)):
            conn.execute(
                "INSERT INTO score_history VALUES ('run-1', now(), 'm', 'm@1', 'gsm8k', 'p1', 'r1', "
                "'generate', 'harness', 5, ?, ?, NULL)",
                [metric, value],
            )
        conn.execute("UPDATE schema_versions SET version = 3 WHERE store = 'benchmarks'")
    with WarehouseResource(database=str(path)).get_connection() as conn:
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


@pytest.mark.parametrize("fixture", ["unversioned_warehouse.sql", "v1_warehouse.sql", "v2_warehouse", "v8_warehouse"])
def test_a_migrated_warehouse_has_the_tables_and_columns_a_new_one_has(fixture, tmp_path, monkeypatch):
    """A column added to a table's declaration without its migration fails here (a new table needs
    none: it is created in an existing warehouse as in a new one)."""
    from resources import WarehouseResource

    monkeypatch.chdir(PROJECT_ROOT)
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as conn:
        source = PROJECT_ROOT / "tests" / "data" / fixture
        conn.execute(f"IMPORT DATABASE 'tests/data/{fixture}'" if source.is_dir() else source.read_text())
    with WarehouseResource(database=str(path)).get_connection() as conn:
        migrated = columns_of(conn)
    with WarehouseResource(database=str(tmp_path / "new.duckdb")).get_connection() as conn:
        assert migrated == columns_of(conn)


def test_a_table_declared_since_reaches_an_existing_warehouse(warehouse, monkeypatch):
    from eval_platform.blind.store import BlindStore

    with warehouse.get_connection():
        pass
    monkeypatch.setattr(BlindStore, "tables", {**BlindStore.tables, "blind_notes": "note VARCHAR"})
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
    from eval_platform.benchmarks.store import BenchmarkStore

    with warehouse.get_connection() as conn:
        conn.execute(
            "INSERT INTO leaderboard VALUES ('m', 'fp', 'arc_easy', 'loglikelihood', 'harness', 0, "
            "'acc_norm', 3, 0.5, 0.1, 0.9, now())"
        )
    wide = BenchmarkStore.views["leaderboard_wide"].replace("SELECT l.model, ", "SELECT l.model, 1 AS added, ", 1)
    monkeypatch.setattr(BenchmarkStore, "views", {**BenchmarkStore.views, "leaderboard_wide": wide})
    with warehouse.get_connection() as conn:  # as a new benchmark's column reaches an existing warehouse
        assert conn.execute("SELECT model, added, arc_easy FROM leaderboard_wide").fetchall() == [("m", 1, 0.5)]
