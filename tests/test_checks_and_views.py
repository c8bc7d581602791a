"""Every asset check fails on bad data and passes on good data; the lineage views walk back to rows;
parallel processes share the warehouse without tripping over DuckDB's single-writer lock."""

import json
import sys

from dagster import AssetCheckSeverity

from evaluation_assets.benchmarks import checks as benchmark_checks
from evaluation_assets.benchmarks.assets import benchmark_documents, benchmark_raw_rows
from evaluation_assets.evolution import checks as evolution_checks
from tests.evaluation import materialize_inputs
from tests.processes import in_processes


def run_check(check, warehouse):
    return check(warehouse=warehouse)


def insert(warehouse, sql, *params):
    with warehouse.get_connection() as conn:
        conn.execute(sql, list(params))


RESULT = """INSERT INTO results (benchmark, model, model_fingerprint, settings_key, solver, task, is_group, metric,
            filter, value, ci_low, ci_high, n, settings, computed_at)
            VALUES ('arc_easy', 'm', 'fp', '0-shot', 'letter', 'arc_easy', false, 'acc', 'none',
                    ?, ?, ?, 10, '{}', now())"""
GENERATION = """INSERT INTO generations (era, generation, prompt_id, operator, parents, carried_over,
                evaluated_generation, fitness, raw_fitness) VALUES ('e', ?, ?, 'initial', [], false, ?, ?, ?)"""


def test_accuracy_check(warehouse):
    insert(warehouse, RESULT, 0.5, 0.2, 0.8)
    insert(warehouse, RESULT.replace("'acc'", "'word_perplexity'"), 35.2, None, None)  # not an accuracy
    assert run_check(benchmark_checks.accuracies_in_unit_interval, warehouse).passed
    insert(warehouse, "UPDATE results SET value = 1.2, ci_high = 1.3 WHERE metric = 'acc'")
    result = run_check(benchmark_checks.accuracies_in_unit_interval, warehouse)
    assert not result.passed and result.metadata["offending_rows"].value == 1


def test_duplicate_sample_check(warehouse):
    # A warehouse whose samples table was created without its primary key (a lake's, or by hand).
    row = (
        "INSERT INTO samples (benchmark, model, model_fingerprint, settings_key, solver, task, doc_id, filter, prompt, "
        "arguments, metrics) VALUES ('arc_easy', 'm', 'fp', '0-shot', 'letter', 'arc_easy', 0, 'none', 'p', '[]', '{}')"
    )
    with warehouse.get_connection() as conn:
        conn.execute("CREATE TABLE unkeyed AS SELECT * FROM samples")  # CTAS copies no constraints
        conn.execute("DROP TABLE samples")
        conn.execute("ALTER TABLE unkeyed RENAME TO samples")
        conn.execute(row)
    assert run_check(benchmark_checks.no_duplicate_samples, warehouse).passed
    insert(warehouse, row)
    assert not run_check(benchmark_checks.no_duplicate_samples, warehouse).passed


def test_reject_rate_check(warehouse, tmp_path):
    rows = [json.loads(line) for line in open("data/benchmarks/winogrande.jsonl")][:10]
    source = tmp_path / "winogrande.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def ingest():
        materialize_inputs(warehouse, "winogrande", source=source, assets=[benchmark_raw_rows, benchmark_documents])

    ingest()
    assert run_check(benchmark_checks.reject_rate_below_threshold, warehouse).passed
    rows[0]["answer"], rows[1]["answer"] = "3", ""
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ingest()
    result = run_check(benchmark_checks.reject_rate_below_threshold, warehouse)
    assert not result.passed and "winogrande" in result.metadata["examples"].value


def test_judge_failure_rate_check_warns(warehouse):
    sql = (
        "INSERT INTO judge_scores (era, prompt_id, evaluated_generation, judge_name, judge_model, error) "
        "VALUES ('e', ?, 0, ?, 'm', ?)"
    )
    for prompt in ("a", "b", "c"):
        insert(warehouse, sql, prompt, "openai", None)
    assert run_check(evolution_checks.judge_failure_rate, warehouse).passed
    for prompt in ("a", "b", "c"):
        insert(warehouse, sql, prompt, "gemini", "Timeout")
    result = run_check(evolution_checks.judge_failure_rate, warehouse)
    assert not result.passed and result.severity == AssetCheckSeverity.WARN


def test_fitness_check(warehouse):
    insert(warehouse, GENERATION, 0, "a", 0, 0.5, 0.5)
    assert run_check(evolution_checks.fitness_in_unit_interval, warehouse).passed
    insert(warehouse, GENERATION, 0, "b", 0, 1.5, 1.5)
    assert not run_check(evolution_checks.fitness_in_unit_interval, warehouse).passed


def test_generation_stats_check(warehouse):
    for i, fitness in enumerate([0.2, 0.4, 0.9]):
        insert(warehouse, GENERATION, 0, f"p{i}", 0, fitness, fitness)
    from eval_platform.evolution.genetic import statistics_rows
    from eval_platform.evolution.store import EraAnalysisStore

    with warehouse.get_connection() as conn:  # the statistics rows the era writes with its checkpoint
        conn.register("stats", statistics_rows(EraAnalysisStore(conn).load_generation_outcomes()))
        conn.execute("INSERT INTO generation_stats BY NAME SELECT * FROM stats")
    assert run_check(evolution_checks.generation_stats_match_generations, warehouse).passed
    insert(warehouse, "UPDATE generation_stats SET max_fitness = 0.8")
    assert not run_check(evolution_checks.generation_stats_match_generations, warehouse).passed
    insert(warehouse, "DELETE FROM generation_stats")
    assert not run_check(evolution_checks.generation_stats_match_generations, warehouse).passed


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
    from resources import WarehouseResource

    result = materialize_inputs(
        WarehouseResource(database=database),
        partition,
        20,
        assets=[benchmark_raw_rows, benchmark_documents],
        raise_on_error=False,
    )
    sys.exit(0 if result.success else 1)


def test_parallel_processes_share_the_warehouse(tmp_path):
    database = str(tmp_path / "shared.duckdb")
    partitions = ["arc_easy", "arc_challenge", "mmlu", "hellaswag", "winogrande", "truthfulqa"]
    assert in_processes(_ingest, [(database, p) for p in partitions], timeout_s=900) == [0] * len(partitions)
    from resources import WarehouseResource

    with WarehouseResource(database=database).get_connection() as conn:
        assert conn.execute("SELECT count(DISTINCT benchmark), count(*) FROM documents").fetchone() == (6, 120)


def test_every_check_defined_is_in_the_code_location_beside_an_asset_of_it():
    import importlib
    import importlib.util
    import pkgutil

    from dagster import AssetChecksDefinition

    import evaluation_assets
    from evaluation_assets.definitions import defs

    domains = [f"evaluation_assets.{m.name}" for m in pkgutil.iter_modules(evaluation_assets.__path__) if m.ispkg]
    modules = [importlib.import_module(f"{d}.checks") for d in domains if importlib.util.find_spec(f"{d}.checks")]
    defined = {
        value for module in modules for value in vars(module).values() if isinstance(value, AssetChecksDefinition)
    }
    graph = defs.resolve_asset_graph()
    keys = {key for check in defined for key in check.check_keys}
    # each check written in its domain's checks.py (benchmarks 5, evolution 3, judging 4), one key each
    assert len(keys) == len(defined) == 12
    assert keys == set(graph.asset_check_keys)  # ... and nothing else, reaches the code location
    assert {key.asset_key for key in keys} <= set(graph.get_all_asset_keys())
