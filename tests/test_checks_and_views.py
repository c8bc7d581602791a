"""Every asset check fails on bad data and passes on good data; the lineage views walk back to rows;
parallel processes share the warehouse without tripping over DuckDB's single-writer lock."""

import json
import sys

from dagster import AssetCheckSeverity

from eval_platform.benchmarks import checks as benchmark_checks
from eval_platform.benchmarks.assets import benchmark_prompts, benchmark_raw_rows
from eval_platform.evolution import checks as evolution_checks
from tests.evaluation import materialize_inputs
from tests.processes import in_processes


def run_check(check, warehouse):
    return check(warehouse=warehouse)


def insert(warehouse, sql, *params):
    with warehouse.get_connection() as conn:
        conn.execute(sql, list(params))


SCORE = "INSERT INTO scores VALUES ('m', 'fp', 'arc_easy', 'letter', 'chat', 0, 'acc', 10, ?, ?, ?, ?, 'r', now())"
GENERATION = """INSERT INTO generations (era, generation, prompt_id, operator, parents, carried_over,
                evaluated_generation, fitness, raw_fitness) VALUES ('e', ?, ?, 'initial', [], false, ?, ?, ?)"""


def test_accuracy_check(warehouse):
    insert(warehouse, SCORE, 5, 0.5, 0.2, 0.8)
    assert run_check(benchmark_checks.accuracies_in_unit_interval, warehouse).passed
    insert(warehouse, "UPDATE scores SET accuracy = 1.2, ci_high = 1.3")
    result = run_check(benchmark_checks.accuracies_in_unit_interval, warehouse)
    assert not result.passed and result.metadata["offending_rows"].value == 1


def test_duplicate_prediction_check(warehouse):
    # A warehouse whose predictions table was created without its primary key (by hand, or an old version).
    row = (
        "INSERT INTO predictions (model, model_fingerprint, benchmark, prompt_id, mode, prompt_format, num_fewshot, "
        "predicted_at) VALUES ('m', 'fp', 'arc_easy', 'p1', 'letter', 'chat', 0, now())"
    )
    with warehouse.get_connection() as conn:
        conn.execute("CREATE TABLE unkeyed AS SELECT * FROM predictions")  # CTAS copies no constraints
        conn.execute("DROP TABLE predictions")
        conn.execute("ALTER TABLE unkeyed RENAME TO predictions")
        conn.execute(row)
    assert run_check(benchmark_checks.no_duplicate_predictions, warehouse).passed
    insert(warehouse, row)
    assert not run_check(benchmark_checks.no_duplicate_predictions, warehouse).passed


def test_reject_rate_check(warehouse, tmp_path):
    rows = [json.loads(line) for line in open("data/benchmarks/winogrande.jsonl")][:10]
    source = tmp_path / "winogrande.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def ingest():
        materialize_inputs(warehouse, "winogrande", source=source, assets=[benchmark_raw_rows, benchmark_prompts])

    ingest()
    assert run_check(benchmark_checks.reject_rate_below_threshold, warehouse).passed
    rows[0]["answer"], rows[1]["answer"] = "3", ""
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ingest()
    result = run_check(benchmark_checks.reject_rate_below_threshold, warehouse)
    assert not result.passed and "winogrande" in result.metadata["examples"].value


def test_judge_failure_rate_check_warns(warehouse):
    sql = "INSERT INTO judge_scores (era, prompt_id, evaluated_generation, judge_name, judge_model, error) VALUES ('e', ?, 0, ?, 'm', ?)"
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
    from eval_platform.evolution.store import EvolutionStore

    with warehouse.get_connection() as conn:  # the statistics rows the era writes with its checkpoint
        conn.register("stats", statistics_rows(EvolutionStore(conn).load_generation_outcomes()))
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
    """One process's run: a benchmark's rows and prompts into the shared warehouse (exit 0 on success)."""
    from eval_platform.common.resources import WarehouseResource

    result = materialize_inputs(
        WarehouseResource(database=database),
        partition,
        20,
        assets=[benchmark_raw_rows, benchmark_prompts],
        raise_on_error=False,
    )
    sys.exit(0 if result.success else 1)


def test_parallel_processes_share_the_warehouse(tmp_path):
    database = str(tmp_path / "shared.duckdb")
    partitions = ["arc_easy", "arc_challenge", "mmlu", "hellaswag", "winogrande", "truthfulqa"]
    assert in_processes(_ingest, [(database, p) for p in partitions], timeout_s=900) == [0] * len(partitions)
    from eval_platform.common.resources import WarehouseResource

    with WarehouseResource(database=database).get_connection() as conn:
        assert conn.execute("SELECT count(DISTINCT benchmark), count(*) FROM prompts").fetchone() == (6, 120)


def test_every_check_defined_is_in_the_code_location_beside_an_asset_of_it():
    from dagster import AssetChecksDefinition

    from eval_platform.definitions import defs

    defined = {
        value
        for module in (benchmark_checks, evolution_checks)
        for value in vars(module).values()
        if isinstance(value, AssetChecksDefinition)
    }
    graph = defs.resolve_asset_graph()
    keys = {key for check in defined for key in check.check_keys}
    assert len(keys) == len(defined) == 10  # each check written in a domain's checks.py, one key each
    assert keys == set(graph.asset_check_keys)  # ... and nothing else, reaches the code location
    assert {key.asset_key for key in keys} <= set(graph.get_all_asset_keys())
