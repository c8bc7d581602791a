"""Every asset check of the code location seen failing: each test builds good data (as the real
assets write it, or rows as they write them), sees the check pass, corrupts the rows the check
guards, and sees it fail, naming the offending rows in its metadata (`offending_rows`, `examples`).
The checks already seen failing elsewhere are listed in COVERED with the test that does it, and
one test requires every check in the code location to be listed and runs the listed tests, seeing
each produce a failed result of its check: a new check without a failure test, or a test skipped
or no longer failing its check, fails the suite."""

import ast
import json
import os
import sys

import pytest
from dagster import AssetCheckResult, AssetChecksDefinition, AssetCheckSeverity

from eval_platform.benchmarks.comparison import comparison_rows
from eval_platform.benchmarks.store import ComparisonStore
from eval_platform.definitions import defs
from eval_platform.evaluation_assets.benchmarks import checks as benchmark_checks
from eval_platform.evaluation_assets.benchmarks.assets import benchmark_documents, benchmark_raw_rows
from eval_platform.evaluation_assets.evolution import checks as evolution_checks
from eval_platform.evaluation_assets.judging import checks as judging_checks
from eval_platform.evaluation_assets.judging.assets import (
    judge_agreement,
    judging_sets,
    mt_bench_inputs,
    mt_bench_verdicts,
    pairwise_verdicts,
    recorded_verdicts,
)
from eval_platform.evolution.genetic import statistics_rows
from eval_platform.evolution.store import EraAnalysisStore
from eval_platform.judging.datasets import GPT4_LLMBAR_JUDGE
from tests.conftest import DATA_BENCHMARKS, PROJECT_ROOT
from tests.evaluation import materialize_inputs
from tests.judging.test_judging_assets import LLMBAR_GPT4, ROUNDS, STUB_JUDGE, judging, query, stored_sets
from tests.openai_stub_server import StubServer
from tests.processes import WAIT_S, run_to_end

# Each check of the code location, and the test (file in tests/, name) that sees it fail naming its offending rows.
HERE = "code_location/test_checks_seen_failing.py"
COVERED = {
    "accuracies_in_unit_interval": (HERE, "test_accuracies_in_unit_interval_names_the_result_out_of_range"),
    "no_duplicate_samples": (HERE, "test_no_duplicate_samples_names_the_document_stored_twice"),
    "reject_rate_below_threshold": (HERE, "test_reject_rate_below_threshold_names_the_benchmark_over_it"),
    "accuracy_regression": (
        "benchmarks/test_model_comparison.py",
        "test_the_regression_watch_names_items_that_flipped_to_wrong",
    ),
    "no_drop_against_baseline": (HERE, "test_no_drop_against_baseline_names_the_comparison_that_dropped"),
    "judge_failure_rate": (HERE, "test_judge_failure_rate_names_the_era_over_the_bound"),
    "fitness_in_unit_interval": (HERE, "test_fitness_in_unit_interval_names_the_prompts_out_of_range"),
    "generation_stats_match_generations": (
        HERE,
        "test_generation_stats_match_generations_names_the_changed_and_missing_rows",
    ),
    "set_pairs_in_both_orders": (HERE, "test_set_pairs_in_both_orders_names_the_pair_that_lost_an_order"),
    "mt_bench_pairs_in_both_orders": (HERE, "test_mt_bench_pairs_in_both_orders_names_the_pair_that_lost_an_order"),
    "llmbar_figures_reproduced": (HERE, "test_llmbar_figures_reproduced_names_the_figures_a_changed_verdict_moves"),
    "flag_panel_judges": (
        "judging/test_judging_assets.py",
        "test_the_flag_check_fires_below_the_bound_and_passes_above_it",
    ),
}


def run_check(check: AssetChecksDefinition, warehouse) -> AssetCheckResult:
    """The check's function called directly, as Dagster calls it, on the warehouse."""
    result = check(warehouse=warehouse)
    assert isinstance(result, AssetCheckResult)
    return result


def examples(result: AssetCheckResult) -> list[str]:
    """The offending rows the check lists, one line each."""
    return [line.removeprefix("- ") for line in str(result.metadata["examples"].value).splitlines()]


def fails_naming(result: AssetCheckResult, count: int) -> list[str]:
    """The check failed with `count` offending rows, all listed: the listed rows."""
    assert not result.passed
    assert result.metadata["offending_rows"].value == count
    listed = examples(result)
    assert len(listed) == count, listed
    return listed


def insert(warehouse, sql: str, *params) -> None:
    with warehouse.get_connection() as conn:
        conn.execute(sql, list(params))


# --- benchmarks -------------------------------------------------------------------------------

RESULT = """INSERT INTO results (benchmark, model, model_fingerprint, settings_key, solver, task, is_group, metric,
            filter, value, ci_low, ci_high, n, settings, computed_at)
            VALUES ('arc_easy', ?, 'fp', '0-shot', 'letter', 'arc_easy', false, ?, 'none', ?, ?, ?, 10, '{}', now())"""


def test_accuracies_in_unit_interval_names_the_result_out_of_range(warehouse):
    insert(warehouse, RESULT, "steady", "acc", 0.5, 0.2, 0.8)
    insert(warehouse, RESULT, "drifting", "acc", 0.6, 0.3, 0.9)
    insert(warehouse, RESULT, "drifting", "word_perplexity", 35.2, None, None)  # not an accuracy
    assert run_check(benchmark_checks.accuracies_in_unit_interval, warehouse).passed
    insert(warehouse, "UPDATE results SET value = 1.2, ci_high = 1.3 WHERE model = 'drifting' AND metric = 'acc'")
    (row,) = fails_naming(run_check(benchmark_checks.accuracies_in_unit_interval, warehouse), 1)
    assert row == "('arc_easy', 'drifting', '0-shot', 'letter', 'arc_easy', 'acc', 'none', 1.2)"
    # A value in [0, 1] outside its own interval offends too.
    insert(warehouse, "UPDATE results SET ci_low = 0.55 WHERE model = 'steady'")
    listed = fails_naming(run_check(benchmark_checks.accuracies_in_unit_interval, warehouse), 2)
    assert "('arc_easy', 'steady', '0-shot', 'letter', 'arc_easy', 'acc', 'none', 0.5)" in listed


def test_no_duplicate_samples_names_the_document_stored_twice(warehouse):
    # A warehouse whose samples table was created without its primary key (a lake's, or by hand).
    row = (
        "INSERT INTO samples (benchmark, model, model_fingerprint, settings_key, solver, task, doc_id, filter, prompt, "
        "arguments, metrics) VALUES ('arc_easy', 'm', 'fp', '0-shot', 'letter', 'arc_easy', ?, 'none', 'p', '[]', '{}')"
    )
    with warehouse.get_connection() as conn:
        conn.execute("CREATE TABLE unkeyed AS SELECT * FROM samples")  # CTAS copies no constraints
        conn.execute("DROP TABLE samples")
        conn.execute("ALTER TABLE unkeyed RENAME TO samples")
    for doc_id in (0, 1, 2):
        insert(warehouse, row, doc_id)
    assert run_check(benchmark_checks.no_duplicate_samples, warehouse).passed
    insert(warehouse, row, 1)
    (listed,) = fails_naming(run_check(benchmark_checks.no_duplicate_samples, warehouse), 1)
    assert listed == "('arc_easy', 'm', '0-shot', 'letter', 'arc_easy', 1, 'none', 2)"


def test_reject_rate_below_threshold_names_the_benchmark_over_it(warehouse, tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_MAX_REJECT_RATE", "0.05")
    rows = [json.loads(line) for line in (DATA_BENCHMARKS / "winogrande.jsonl").read_text().splitlines()[:10]]
    source = tmp_path / "winogrande.jsonl"

    def ingest(benchmark: str, rows_file=None) -> None:
        assets = [benchmark_raw_rows, benchmark_documents]
        assert materialize_inputs(warehouse, benchmark, 10, source=rows_file, assets=assets).success

    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ingest("winogrande", source)
    ingest("arc_easy")
    assert run_check(benchmark_checks.reject_rate_below_threshold, warehouse).passed
    rows[0]["answer"], rows[1]["answer"] = "3", ""  # winogrande's answers are "1" or "2"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ingest("winogrande", source)
    (listed,) = fails_naming(run_check(benchmark_checks.reject_rate_below_threshold, warehouse), 1)
    assert listed == "('winogrande', 2, 8, 0.2)"  # 2 of its 10 rows rejected; arc_easy not named


def test_no_drop_against_baseline_names_the_comparison_that_dropped(warehouse, monkeypatch):
    monkeypatch.setenv("EVAL_REGRESSION_ALPHA", "0.05")

    def values(model: str, benchmark: str, right: set[int]) -> list[dict]:
        """The per-document values of a model on twelve documents, as `load_document_values` gives them."""
        return [
            {
                "model": model,
                "model_fingerprint": f"{model}@1",
                "settings_key": "0-shot",
                "solver": "letter",
                "task": benchmark,
                "filter": "none",
                "metric": "acc",
                "item": f"{benchmark}-row-{item}",
                "value": float(item in right),
                "prediction_run_id": None,
            }
            for item in range(12)
        ]

    def store(benchmark: str, new_right: set[int]) -> None:
        rows = values("base", benchmark, set(range(12))) + values("new", benchmark, new_right)
        compared = comparison_rows(benchmark, "new", {"baseline": "base"}, rows, {})
        with warehouse.store(ComparisonStore) as comparisons:
            comparisons.replace_comparisons(benchmark, "new", compared)

    store("arc_easy", set(range(12)))
    store("hellaswag", set(range(1, 12)))  # one document worse: no significant drop
    assert run_check(benchmark_checks.no_drop_against_baseline, warehouse).passed
    store("arc_easy", {10, 11})  # ten documents flipped to wrong
    result = run_check(benchmark_checks.no_drop_against_baseline, warehouse)
    assert result.severity == AssetCheckSeverity.WARN
    (listed,) = fails_naming(result, 1)
    assert listed.startswith("('arc_easy', 'new', 'baseline', 'base', '0-shot', 'letter', 'arc_easy', 'none', 'acc',")
    assert "p=0.00195" in listed  # exact McNemar: 10 discordant pairs, all one way: 2 * 0.5**10
    assert all(f"'arc_easy-row-{i}'" in listed for i in range(10)) and "arc_easy-row-10" not in listed


# --- evolution --------------------------------------------------------------------------------

GENERATION = """INSERT INTO generations (era, generation, prompt_id, operator, parents, carried_over,
                evaluated_generation, fitness, raw_fitness) VALUES (?, ?, ?, 'initial', [], false, ?, ?, ?)"""


def test_judge_failure_rate_names_the_era_over_the_bound(warehouse, monkeypatch):
    monkeypatch.setenv("EVAL_MAX_JUDGE_FAILURE_RATE", "0.34")
    sql = (
        "INSERT INTO judge_scores (era, prompt_id, evaluated_generation, judge_name, judge_model, error) "
        "VALUES (?, ?, 0, ?, 'm', ?)"
    )
    for era in ("steady", "flaky"):
        for prompt in ("a", "b", "c"):
            insert(warehouse, sql, era, prompt, "openai", None)
    insert(warehouse, sql, "flaky", "a", "gemini", "Timeout")  # 1 of 4 calls failed: under the bound
    assert run_check(evolution_checks.judge_failure_rate, warehouse).passed
    for prompt in ("b", "c"):
        insert(warehouse, sql, "flaky", prompt, "gemini", "Timeout")
    result = run_check(evolution_checks.judge_failure_rate, warehouse)
    assert result.severity == AssetCheckSeverity.WARN
    assert fails_naming(result, 1) == ["('flaky', 3, 6, 0.5)"]  # 3 of its 6 calls failed; steady not named


def test_fitness_in_unit_interval_names_the_prompts_out_of_range(warehouse):
    for prompt, fitness in (("a", 0.5), ("b", 0.9), ("c", 0.0)):
        insert(warehouse, GENERATION, "e", 0, prompt, 0, fitness, fitness)
    assert run_check(evolution_checks.fitness_in_unit_interval, warehouse).passed
    insert(warehouse, "UPDATE generations SET fitness = 1.5, raw_fitness = 1.5 WHERE prompt_id = 'b'")
    assert fails_naming(run_check(evolution_checks.fitness_in_unit_interval, warehouse), 1) == ["('e', 0, 'b', 1.5)"]
    insert(warehouse, "UPDATE generations SET raw_fitness = -0.25 WHERE prompt_id = 'a'")  # fitness itself in range
    listed = fails_naming(run_check(evolution_checks.fitness_in_unit_interval, warehouse), 2)
    assert listed == ["('e', 0, 'a', 0.5)", "('e', 0, 'b', 1.5)"]


def test_generation_stats_match_generations_names_the_changed_and_missing_rows(warehouse):
    for generation in (0, 1):
        for i, fitness in enumerate([0.25, 0.5, 0.75]):
            insert(warehouse, GENERATION, "e", generation, f"p{generation}-{i}", generation, fitness, fitness)
    with warehouse.get_connection() as conn:  # the statistics rows the era writes with its checkpoint
        conn.register("stats", statistics_rows(EraAnalysisStore(conn).load_generation_outcomes()))
        conn.execute("INSERT INTO generation_stats BY NAME SELECT * FROM stats")
        assert conn.execute("SELECT count(*) FROM generation_stats").fetchone() == (2,)
    assert run_check(evolution_checks.generation_stats_match_generations, warehouse).passed
    insert(warehouse, "UPDATE generation_stats SET mean_fitness = 0.625 WHERE generation = 1")  # the mean is 0.5
    listed = fails_naming(run_check(evolution_checks.generation_stats_match_generations, warehouse), 1)
    assert listed == ["('e', 1, 0.625, 0.5)"]
    insert(warehouse, "UPDATE generation_stats SET mean_fitness = 0.5, max_fitness = 0.8 WHERE generation = 1")
    listed = fails_naming(run_check(evolution_checks.generation_stats_match_generations, warehouse), 1)
    assert listed == ["('e', 1, 0.5, 0.5)"]  # the mean agrees; the maximum (0.75) does not
    insert(warehouse, "DELETE FROM generation_stats WHERE generation = 0")
    listed = fails_naming(run_check(evolution_checks.generation_stats_match_generations, warehouse), 2)
    assert listed[0].startswith("('e', 0, nan, 0.5") and listed[1] == "('e', 1, 0.5, 0.5)"


# --- judging ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    with StubServer() as stub, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-judging-not-a-real-key")
        yield stub


@pytest.mark.slow
def test_set_pairs_in_both_orders_names_the_pair_that_lost_an_order(warehouse, server):
    stored_sets(warehouse)
    panel = {"judges": [STUB_JUDGE], "sets": ["llmbar_natural", "llmbar_manual"], "items": 3}
    assert judging(warehouse, [pairwise_verdicts], {"pairwise_verdicts": panel}, server).success
    assert query(warehouse, "SELECT set_name, count(*) FROM judge_verdicts GROUP BY ALL ORDER BY ALL") == [
        ("llmbar_manual", 6),
        ("llmbar_natural", 6),
    ]
    assert run_check(judging_checks.set_pairs_in_both_orders, warehouse).passed
    insert(
        warehouse,
        "DELETE FROM judge_verdicts WHERE set_name = 'llmbar_manual' AND item_id = '1' AND shown_order = 'swapped'",
    )
    listed = fails_naming(run_check(judging_checks.set_pairs_in_both_orders, warehouse), 1)
    assert listed == [f"('{STUB_JUDGE}', 'llmbar_manual', '1', 1, ['as_is'])"]
    insert(
        warehouse,
        "DELETE FROM judge_verdicts WHERE set_name = 'llmbar_natural' AND item_id = '2' AND shown_order = 'as_is'",
    )
    listed = fails_naming(run_check(judging_checks.set_pairs_in_both_orders, warehouse), 2)
    assert listed == [
        f"('{STUB_JUDGE}', 'llmbar_manual', '1', 1, ['as_is'])",
        f"('{STUB_JUDGE}', 'llmbar_natural', '2', 1, ['swapped'])",
    ]


def test_mt_bench_pairs_in_both_orders_names_the_pair_that_lost_an_order(warehouse, server):
    config = {"judges": [STUB_JUDGE], "questions": [81], "models": ["gpt-4", "llama-13b", "alpaca-13b"]}
    ops = {"mt_bench_verdicts": {**config, "pairs": "pairwise-all"}}
    assert judging(warehouse, [mt_bench_inputs, mt_bench_verdicts], ops, server).success
    pairs = query(warehouse, "SELECT item_id, list(shown_order ORDER BY shown_order) FROM mt_bench_verdicts GROUP BY 1")
    assert sorted(pairs) == [
        ("81:gpt-4:alpaca-13b", ["as_is", "swapped"]),
        ("81:gpt-4:llama-13b", ["as_is", "swapped"]),
        ("81:llama-13b:alpaca-13b", ["as_is", "swapped"]),
    ]
    assert run_check(judging_checks.mt_bench_pairs_in_both_orders, warehouse).passed
    insert(warehouse, "DELETE FROM mt_bench_verdicts WHERE item_id = '81:gpt-4:llama-13b' AND shown_order = 'as_is'")
    listed = fails_naming(run_check(judging_checks.mt_bench_pairs_in_both_orders, warehouse), 1)
    assert listed == [f"('{STUB_JUDGE}', 'mt_bench', '81:gpt-4:llama-13b', 1, ['swapped'])"]


@pytest.mark.slow
def test_llmbar_figures_reproduced_names_the_figures_a_changed_verdict_moves(warehouse):
    """LLMBar Manual: 46 items, GPT-4 right on 74 of its 92 verdicts (80.43%) and the same in both
    orders on 38 items (82.61%). One verdict changed, on an item it judged right in both orders:
    73 of 92 right (79.35%), 37 of 46 the same (80.43%)."""
    agreement = {"judge_agreement": {"rounds": ROUNDS}}

    def figures() -> AssetCheckResult:
        return run_check(judging_checks.llmbar_figures_reproduced, warehouse)

    assets = [judging_sets, recorded_verdicts, judge_agreement]
    assert judging(warehouse, assets, {"judging_sets": {"blind_sheets": False}, **agreement}).success
    assert figures().passed
    # An item of LLMBar Manual GPT-4 judged right in both orders; its first verdict changed to the other answer.
    items = query(
        warehouse,
        "SELECT i.item_id, i.gold FROM judging_items i JOIN recorded_verdicts v USING (set_name, item_id) "
        "WHERE i.set_name = 'llmbar_manual' AND v.judge = ? GROUP BY ALL "
        "HAVING count(*) = 2 AND bool_and(v.verdict = i.gold) ORDER BY min(i.position) LIMIT 1",
        [GPT4_LLMBAR_JUDGE],
    )
    ((item, gold),) = items
    assert gold in ("a", "b")
    insert(
        warehouse,
        "UPDATE recorded_verdicts SET verdict = ? WHERE judge = ? AND set_name = 'llmbar_manual' AND item_id = ? "
        "AND shown_order = 'as_is'",
        "b" if gold == "a" else "a",
        GPT4_LLMBAR_JUDGE,
        item,
    )
    assert judging(warehouse, [judge_agreement], agreement).success
    listed = [ast.literal_eval(row) for row in fails_naming(figures(), 2)]
    accuracy, consistency = LLMBAR_GPT4["llmbar_manual"]
    assert listed == [
        ("llmbar_manual", "accuracy", accuracy, pytest.approx(73 / 92 * 100)),
        ("llmbar_manual", "position_consistency", consistency, pytest.approx(37 / 46 * 100)),
    ]
    # A set whose GPT-4 figures are missing offends as well, with no figure of ours.
    insert(
        warehouse, "DELETE FROM judge_human_agreement WHERE judge = ? AND set_name = 'llmbar_gptout'", GPT4_LLMBAR_JUDGE
    )
    listed = [ast.literal_eval(row) for row in fails_naming(figures(), 4)]
    accuracy, consistency = LLMBAR_GPT4["llmbar_gptout"]
    assert ("llmbar_gptout", "accuracy", accuracy, None) in listed
    assert ("llmbar_gptout", "position_consistency", consistency, None) in listed


# --- every check ------------------------------------------------------------------------------


@pytest.mark.slow  # it runs the covering tests, some of them slow
def test_every_check_in_the_code_location_has_a_test_that_sees_it_fail(tmp_path):
    """COVERED names a test for each check the code location holds, and for no other; run alone,
    each named test produces a failed `AssetCheckResult` of its check (tests/seen_checks.py)."""
    checks = {key.name for key in defs().resolve_asset_graph().asset_check_keys}
    assert len(checks) == 12 and checks == set(COVERED)
    record = tmp_path / "seen.jsonl"
    tests = sorted({f"tests/{path}::{name}" for path, name in COVERED.values()})
    code, output = run_to_end(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.seen_checks", *tests],
        timeout_s=WAIT_S * 10,
        cwd=PROJECT_ROOT,
        env={**os.environ, "EVAL_SEEN_CHECKS": str(record)},
    )
    assert code == 0 and f"{len(tests)} passed" in output, output[-3000:]
    seen = {(row["check"], row["test"]) for row in map(json.loads, record.read_text().splitlines())}
    for check, (path, name) in COVERED.items():
        assert (check, f"tests/{path}::{name}") in seen, f"tests/{path}::{name} never saw {check} fail"
