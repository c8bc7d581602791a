"""The lineage views walk back to rows; every check defined sits in the code location beside an
asset of it (each check seen failing: test_checks_seen_failing.py); parallel processes share the
warehouse without tripping over DuckDB's single-writer lock."""

import sys

import pytest

from eval_platform.evaluation_assets.benchmarks.assets import benchmark_documents, benchmark_raw_rows
from tests.evaluation import materialize_inputs
from tests.processes import in_processes


def test_prompt_ancestry_view_walks_parents(warehouse):
    rows = [
        (0, "a", "initial", []),
        (0, "b", "initial", []),
        (1, "c", "crossover", ["a", "b"]),
        (2, "d", "mutation", ["c"]),
    ]
    with warehouse.get_connection() as conn:
        for generation, prompt, operator, parents in rows:
            conn.execute(
                """INSERT INTO generations (era, generation, prompt_id, operator, parents, carried_over,
                            evaluated_generation) VALUES ('e', ?, ?, ?, ?, false, ?)""",
                [generation, prompt, operator, parents, generation],
            )
        conn.execute("""INSERT INTO generations (era, generation, prompt_id, operator, parents, carried_over,
                        evaluated_generation) VALUES ('e', 2, 'c', 'crossover', ['a', 'b'], true, 1)""")
        ancestry = conn.execute(
            "SELECT ancestor_id, depth FROM prompt_ancestry WHERE prompt_id = 'd' ORDER BY depth, ancestor_id"
        ).fetchall()
    assert ancestry == [("d", 0), ("c", 1), ("a", 2), ("b", 2)]


def _ingest(database: str, partition: str) -> None:
    """One process's run: a benchmark's rows and documents into the shared warehouse (exit 0 on success)."""
    from eval_platform.resources import WarehouseResource

    result = materialize_inputs(
        WarehouseResource(database=database),
        partition,
        20,
        assets=[benchmark_raw_rows, benchmark_documents],
        raise_on_error=False,
    )
    sys.exit(0 if result.success else 1)


@pytest.mark.slow
def test_parallel_processes_share_the_warehouse(tmp_path):
    database = str(tmp_path / "shared.duckdb")
    partitions = ["arc_easy", "arc_challenge", "mmlu", "hellaswag", "winogrande", "truthfulqa"]
    assert in_processes(_ingest, [(database, p) for p in partitions], timeout_s=900) == [0] * len(partitions)
    from eval_platform.resources import WarehouseResource

    with WarehouseResource(database=database).get_connection() as conn:
        assert conn.execute("SELECT count(DISTINCT benchmark), count(*) FROM documents").fetchone() == (6, 120)


def test_every_check_defined_is_in_the_code_location_beside_an_asset_of_it():
    import importlib
    import importlib.util
    import pkgutil

    from dagster import AssetChecksDefinition

    from eval_platform import evaluation_assets
    from eval_platform.definitions import defs

    domains = [
        f"{evaluation_assets.__name__}.{m.name}" for m in pkgutil.iter_modules(evaluation_assets.__path__) if m.ispkg
    ]
    modules = [importlib.import_module(f"{d}.checks") for d in domains if importlib.util.find_spec(f"{d}.checks")]
    defined = {
        value for module in modules for value in vars(module).values() if isinstance(value, AssetChecksDefinition)
    }
    graph = defs().resolve_asset_graph()
    keys = {key for check in defined for key in check.check_keys}
    # each check written in its domain's checks.py (benchmarks 5, evolution 3, judging 4), one key each
    assert len(keys) == len(defined) == 12
    assert keys == set(graph.asset_check_keys)  # ... and nothing else, reaches the code location
    assert {key.asset_key for key in keys} <= set(graph.get_all_asset_keys())
