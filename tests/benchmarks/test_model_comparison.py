"""Model against model on the same items (exact McNemar, Newcombe's paired interval) in DuckDB and metadata,
the regression watch of the nightly refresh, and scores as numbers Dagster can plot."""

import pytest
from dagster import AssetCheckSeverity, DagsterInstance

from eval_engine import cpu_name
from eval_platform.benchmarks.comparison import (
    NO_PAIRED_TEST,
    compare,
    comparison_rows,
    exact_mcnemar,
    flipped_to_wrong,
)
from eval_platform.benchmarks.samples import side_by_side
from eval_platform.evaluation_assets.benchmarks import checks
from eval_platform.evaluation_assets.benchmarks.assets import model_comparison
from eval_platform.resources import LanguageModelResource
from tests.evaluation import materialize_evaluation, materialize_inputs, roster_with

BFLOAT16 = LanguageModelResource(device="cpu", dtype="bfloat16")


def test_exact_mcnemar_and_the_paired_interval():
    assert exact_mcnemar(5, 0) == pytest.approx(2 * 0.5**5)
    assert exact_mcnemar(3, 3) == pytest.approx(1.0) and exact_mcnemar(0, 0) == 1.0
    first, second = [1.0] * 30 + [0.0] * 10, [1.0] * 20 + [0.0] * 20
    result = compare({str(i): v for i, v in enumerate(first)}, {str(i): v for i, v in enumerate(second)})
    assert result.ci_low < 0.25 < result.ci_high and result.ci_low > 0
    assert result.interval == "Newcombe's paired score interval"
    assert (result.items, result.only_first, result.only_second) == (40, 10, 0)
    assert result.difference == pytest.approx(0.25) and result.mcnemar_p == pytest.approx(exact_mcnemar(10, 0))
    assert compare({"a": 0.3, "b": 0.8}, {"a": 0.5, "b": 0.1}).mcnemar_p is None  # mc2: no McNemar
    assert flipped_to_wrong({"a": 1.0, "b": 1.0, "c": 0.0}, {"a": 0.0, "b": 1.0, "c": 0.0, "d": 0.0}) == ["a"]


def item_rows(model: str, values: dict[str, float], metric: str = "acc", task: str = "arc_easy") -> list[dict]:
    """Document values as `load_document_values` gives them."""
    return [
        {
            "model": model,
            "model_fingerprint": f"{model}@1",
            "settings_key": "0-shot",
            "solver": "harness",
            "task": task,
            "filter": "none",
            "metric": metric,
            "item": f"row-{item}",
            "value": value,
            "prediction_run_id": None,
        }
        for item, value in values.items()
    ]


def test_a_comparison_names_flipped_items_and_says_when_no_paired_test_applies():
    references = {"baseline": "base", "previous": "step-1"}
    rows = (
        item_rows("new", {"a": 0.0, "b": 1.0, "c": 1.0})
        + item_rows("base", {"a": 1.0, "b": 1.0, "c": 0.0})
        + item_rows("new", {"a": 0.2, "b": 0.9}, "mc2")
        + item_rows("base", {"a": 0.3, "b": 0.8}, "mc2")
    )
    compared = comparison_rows("arc_easy", "new", references, rows, {})
    assert [(c["metric"], c["model_b"], c["relation"]) for c in compared] == [
        ("acc", "base", "baseline"),
        ("mc2", "base", "baseline"),
    ]
    binary, fractional = compared
    assert binary["flipped_to_wrong"] == ["row-a"] and binary["difference"] == pytest.approx(0.0)
    assert binary["paired_test"] == "exact McNemar" and binary["mcnemar_p"] == pytest.approx(1.0)
    assert fractional["mcnemar_p"] is None and fractional["paired_test"] == NO_PAIRED_TEST
    assert fractional["flipped_to_wrong"] is None and fractional["difference"] == pytest.approx(0.0)


def test_a_significant_drop_against_the_baseline_warns_naming_the_flipped_items(warehouse):
    """The check on the comparisons of any benchmark: a dataset's documents are named by their source
    rows, a harness task's by task/doc_id."""
    from eval_platform.benchmarks.store import ComparisonStore

    assert checks.no_drop_against_baseline(warehouse=warehouse).passed
    rows = item_rows("base", {str(i): 1.0 for i in range(12)}) + item_rows(
        "new", {str(i): float(i >= 10) for i in range(12)}
    )
    navigate = "leaderboard_bbh_navigate"
    harness = [{**row, "settings_key": "default shots", "task": navigate, "item": f"{navigate}/{row['item'][4:]}"}
               for row in rows]  # fmt: skip
    with warehouse.store(ComparisonStore) as store:
        store.replace_comparisons("arc_easy", "new", comparison_rows("arc_easy", "new", {"baseline": "base"}, rows, {}))
        store.replace_comparisons(
            "leaderboard_bbh", "new", comparison_rows("leaderboard_bbh", "new", {"baseline": "base"}, harness, {})
        )
    result = checks.no_drop_against_baseline(warehouse=warehouse)
    assert (
        not result.passed
        and result.severity == AssetCheckSeverity.WARN
        and result.metadata["offending_rows"].value == 2
    )
    report = result.metadata["examples"].value
    assert "('arc_easy', 'new', 'baseline', 'base', '0-shot', 'harness', 'arc_easy', 'none', 'acc'," in report
    assert "p=0.00195" in report and "'row-9'" in report  # 10 flipped, named by source row
    assert f"('leaderboard_bbh', 'new', 'baseline', 'base', 'default shots', 'harness', '{navigate}', 'none'" in report
    assert f"'{navigate}/9'" in report


def test_side_by_side_lists_the_items_scored_differently_first():
    rows = [
        {
            **row,
            "predicted": f"{row['model']}-{row['item'][4:]}",
            "reference": "B",
            "question": f"Q {row['item']}",
        }
        for row in item_rows("new", {"a": 1.0, "b": 1.0, "c": 0.0, "d": 1.0})
        + item_rows("base", {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0})
    ]
    view = side_by_side("new", "base", rows)
    assert "2 of 4 documents differ" in view
    listed = [
        line.split("|")[1].strip().strip("*")
        for line in view.splitlines()
        if line.startswith("| **row-") or line.startswith("| row-")
    ]
    assert listed == ["row-b", "row-c", "row-a", "row-d"]  # the two that differ, then the rest
    assert "| new-b | 1 | base-b | 0 |" in view  # each side's answer beside its score


@pytest.mark.slow
def test_two_precisions_of_smollm2_compared_on_shared_items(warehouse, tmp_path):
    instance = DagsterInstance.ephemeral()
    roster_with(tmp_path, "f32")
    roster = roster_with(tmp_path, "bf16", baseline="f32")
    assert materialize_inputs(warehouse, "arc_easy", 6).success
    for name, model in (("f32", LanguageModelResource()), ("bf16", BFLOAT16)):
        result = materialize_evaluation(
            warehouse, "arc_easy", name, roster, {"solvers": ["harness"]}, evaluation_model=model, instance=instance
        )
        metadata = evaluation_metadata(result)
        assert 0 <= metadata["harness/arc_easy/acc_norm"].value <= 1  # a number Dagster plots
        tags = instance.get_run_by_id(result.run_id).tags
        assert tags["eval/model"] == "local/smollm2-135m-instruct"
        assert tags["eval/model_fingerprint"].endswith("+bfloat16") == (model.dtype == "bfloat16")
    result = materialize_evaluation(warehouse, "arc_easy", "bf16", roster, assets=[model_comparison])
    metadata = result.get_asset_materialization_events()[0].materialization.metadata
    assert metadata["compared_with"].value == {"baseline": "f32"} and metadata["not_comparable_yet"].value == []
    assert "| f32 " in metadata["comparison"].value and "baseline" in metadata["comparison"].value
    assert (
        "## bf16 (a) against f32 (b)" in metadata["items"].value and "of 6 documents differ" in metadata["items"].value
    )
    # any two entries: float32 against bfloat16, chosen in the launchpad
    chosen = materialize_evaluation(
        warehouse,
        "arc_easy",
        "f32",
        roster,
        assets=[model_comparison],
        ops={"model_comparison": {"config": {"compare_with": "bf16"}}},
    )
    metadata = chosen.get_asset_materialization_events()[0].materialization.metadata
    assert metadata["compared_with"].value == {"chosen": "bf16"}
    assert "## f32 (a) against bf16 (b)" in metadata["items"].value
    with warehouse.get_connection() as conn:
        rows = conn.execute(
            "SELECT metric, items, accuracy_a, accuracy_b, difference, only_a, only_b, mcnemar_p, "
            "ci_low, ci_high FROM comparisons WHERE model_a = 'bf16' AND model_b = 'f32' "
            "AND fingerprint_a LIKE '%+bfloat16' ORDER BY metric"
        ).fetchall()
    assert [r[0] for r in rows] == ["acc", "acc_norm"]
    for _, items, a, b, difference, only_a, only_b, p, low, high in rows:
        assert items == 6 and difference == pytest.approx(a - b) and low <= difference <= high
        assert p == pytest.approx(exact_mcnemar(only_a, only_b))


@pytest.mark.slow
def test_the_regression_watch_names_items_that_flipped_to_wrong(warehouse, tmp_path):
    """The model's stored answers changed (as a changed model would answer): the next run, which
    reuses them, scores every document again, and the check compares it with the run before."""
    roster = roster_with(tmp_path, "m")

    def evaluate():
        assert materialize_evaluation(warehouse, "arc_easy", "m", roster, {"solvers": ["letter"]}).success

    def answer(labels: str) -> None:
        """Every stored letter answer puts all its probability on the label `labels` picks."""
        with warehouse.get_connection() as conn:
            conn.execute(f"""
                UPDATE answers a SET response = to_json(map_from_entries(list_transform(d.labels,
                    lambda l: {{'key': l, 'value': CASE WHEN l = {labels} THEN 1.0 ELSE 0.0 END}})))
                FROM documents d WHERE a.request_type = 'label_probabilities'
                    AND a.arguments ->> '$[1]' = d.user_prompt""")

    assert materialize_inputs(warehouse, "arc_easy", 12).success
    evaluate()
    assert checks.accuracy_regression(warehouse=warehouse).passed  # one run: nothing to compare
    answer("d.real_answer")  # a model that answers every question right ...
    evaluate()
    assert checks.accuracy_regression(warehouse=warehouse).passed  # better is no regression
    answer("CASE d.real_answer WHEN 'A' THEN 'B' ELSE 'A' END")  # ... then, refreshed, none
    with warehouse.get_connection() as conn:
        flipped = {r[0] for r in conn.execute("SELECT source_row_id FROM documents").fetchall()}
    evaluate()
    result = checks.accuracy_regression(warehouse=warehouse)
    assert not result.passed and result.severity == AssetCheckSeverity.WARN
    report = result.metadata["examples"].value
    assert "p=0.000488" in report and all(row_id in report for row_id in flipped)


def evaluation_metadata(result) -> dict:
    return next(
        e for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == "benchmark_evaluation"
    ).materialization.metadata


@pytest.mark.slow
def test_each_prediction_run_records_where_it_ran_and_comparisons_name_what_differs(warehouse, tmp_path):
    roster_with(tmp_path, "f32")
    roster = roster_with(tmp_path, "bf16", baseline="f32")
    assert materialize_inputs(warehouse, "arc_easy", 6).success

    def refresh(name, model, recompute=False):
        result = materialize_evaluation(
            warehouse,
            "arc_easy",
            name,
            roster,
            {"solvers": ["harness"], "recompute": recompute},
            evaluation_model=model,
        )
        assert result.success
        return result

    def prediction_run_ids() -> dict[str, set[str]]:
        with warehouse.get_connection() as conn:
            return {
                fingerprint: set(ids)
                for fingerprint, ids in conn.execute(
                    "SELECT model_fingerprint, list(DISTINCT run_id) FROM answers GROUP BY ALL"
                ).fetchall()
            }

    first = refresh("f32", LanguageModelResource(batch_size=4))
    second = refresh("bf16", LanguageModelResource(device="cpu", dtype="bfloat16", batch_size=8))
    assert evaluation_metadata(first)["environment"].value["batch_size"] == 4
    with warehouse.get_connection() as conn:
        stored = conn.execute(
            "SELECT run_id, batch_size, device, device_name, dtype, threads, cpu_features, "
            "torch_version, transformers_version FROM evaluation_runs ORDER BY batch_size"
        ).fetchall()
        named = conn.execute(
            "SELECT count(*), count(r.run_id) FROM answers a LEFT JOIN evaluation_runs r USING (run_id)"
        ).fetchone()
    assert [row[:3] + (row[4],) for row in stored] == [
        (first.run_id, 4, "cpu", "float32"),
        (second.run_id, 8, "cpu", "bfloat16"),
    ]
    assert all(row[3] == cpu_name() and row[5] >= 1 and row[7] and row[8] for row in stored)
    assert named == (48, 48)  # every answer (4 choices of 6 documents, 2 models) names the run that computed it

    assert materialize_evaluation(warehouse, "arc_easy", "bf16", roster, assets=[model_comparison]).success
    with warehouse.get_connection() as conn:
        ((differences,),) = conn.execute("SELECT DISTINCT environment_differences FROM comparisons").fetchall()
    assert differences == "batch_size: 8 vs 4; dtype: bfloat16 vs float32"

    before = prediction_run_ids()
    reused = refresh("f32", LanguageModelResource(batch_size=16))  # nothing to compute: reused, with their run
    assert evaluation_metadata(reused)["solvers"].value["harness (0-shot)"]["computed"] == 0
    assert prediction_run_ids() == before
    assert (
        checks.accuracy_regression(warehouse=warehouse)
        .metadata["environment_changes"]
        .value.startswith("_the compared runs had the same settings and environment")
    )
    refresh("f32", LanguageModelResource(batch_size=16), recompute=True)
    changes = checks.accuracy_regression(warehouse=warehouse).metadata["environment_changes"].value
    assert "'acc', 'batch_size: 4 vs 16')" in changes and "'acc_norm', 'batch_size: 4 vs 16')" in changes, changes
    with warehouse.get_connection() as conn:
        kept = conn.execute("SELECT run_id FROM evaluation_runs ORDER BY recorded_at").fetchall()
    assert len(kept) == 3  # the replaced run stays while a stored result's history names it
