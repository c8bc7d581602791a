"""In-process Dagster materialisations with the real SmolLM2 into a temporary DuckDB file."""

import json
import re

import pytest

from eval_platform.benchmarks.assets import (
    benchmark_predictions,
    benchmark_prompts,
    benchmark_raw_rows,
    benchmark_scores,
)
from eval_platform.benchmarks.harness_format import zero_shot_items
from eval_platform.benchmarks.prediction import MODES
from eval_platform.benchmarks.specs import BENCHMARKS
from eval_platform.benchmarks.store import BenchmarkStore
from eval_platform.common.ingestion import DataFileError
from eval_platform.common.models import Chat, LoglikelihoodRequest
from eval_platform.common.reproducibility import LOGLIKELIHOOD_TOLERANCE
from eval_platform.common.resources import LanguageModelResource
from tests.evaluation import materialize_benchmark, materialize_evaluation, materialize_inputs, roster_with
from tests.reference_scoring import naive_loglikelihoods

# each harness task's metric_list (generative: one metric per filter), as the harness reports them
HARNESS_METRICS = {
    "arc_easy": ("acc", "acc_norm"),
    "arc_challenge": ("acc", "acc_norm"),
    "hellaswag": ("acc", "acc_norm"),
    "mmlu": ("acc",),
    "truthfulqa": ("acc",),
    "truthfulqa_mc2": ("mc2",),
    "winogrande": ("acc",),
    "gsm8k": ("strict-match", "flexible-extract"),
    "gsm8k_cot": ("strict-match", "flexible-extract"),
}
ROWS = 5
MODEL = "smollm2"


def run(warehouse, roster, partition):
    """The benchmark's first ROWS rows, then the roster's model on them."""
    return materialize_benchmark(
        warehouse, partition, roster, MODEL, ROWS, evaluation_model=LanguageModelResource(max_new_tokens=24)
    )


def table_counts(conn):
    return {
        t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
        for t in [
            "raw_rows",
            "ingest_rejections",
            "fewshot_rows",
            "prompt_rejections",
            "prompts",
            "harness_requests",
            "predictions",
            "item_scores",
            "scores",
        ]
    }


def materialization(result, asset):
    return next(e for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == asset.key.path[-1])


@pytest.fixture(scope="module")
def all_benchmarks(tmp_path_factory):
    from eval_platform.common.resources import WarehouseResource

    folder = tmp_path_factory.mktemp("wh")
    warehouse = WarehouseResource(database=str(folder / "warehouse.duckdb"))
    roster = roster_with(folder / "roster", MODEL)
    results = {p: run(warehouse, roster, p) for p in BENCHMARKS}
    return warehouse, roster, results


def test_all_six_benchmarks_materialise_with_the_real_model(all_benchmarks):
    warehouse, _, results = all_benchmarks
    assert all(r.success for r in results.values())
    with warehouse.get_connection() as conn:
        per_benchmark = dict(conn.execute("SELECT benchmark, count(*) FROM prompts GROUP BY ALL").fetchall())
        assert per_benchmark == {name: ROWS for name in BENCHMARKS}
        sums = conn.execute("""SELECT list_sum(map_values(label_probabilities)) FROM predictions
                               WHERE mode = 'letter'""").fetchall()
        letter_benchmarks = [spec for spec in BENCHMARKS.values() if "letter" in spec.modes]
        assert len(sums) == ROWS * len(letter_benchmarks) and all(abs(s - 1) < 1e-5 for (s,) in sums)
        assert conn.execute("SELECT min(accuracy) >= 0 AND max(accuracy) <= 1 FROM scores").fetchone()[0]
        stored = {
            tuple(r)
            for r in conn.execute("SELECT DISTINCT benchmark, mode, prompt_format, metric FROM scores").fetchall()
        }
        expected = {
            (spec.name, mode, fmt, metric)
            for spec in BENCHMARKS.values()
            for mode, requested in (("letter", "chat"), ("loglikelihood", "harness"), ("generate", "chat"))
            for fmt in [requested if spec.chat_format else "harness"]
            if mode in spec.modes
            for metric in (HARNESS_METRICS[spec.name] if fmt == "harness" else MODES[mode].metrics(spec))
        }
        assert stored == expected
        generated = conn.execute(
            "SELECT count(*) FROM predictions WHERE mode = 'generate' AND prompt_format = 'chat' AND output_text <> ''"
        )  # a chat answer is never empty (a harness one may be)
        generating = [spec for spec in BENCHMARKS.values() if spec.modes == ("generate",) and spec.chat_format]
        assert generated.fetchone()[0] == ROWS * len(generating)
        # Lineage: from a score to its predictions, their prompts and the raw rows.
        lineage = conn.execute("""
            SELECT s.benchmark, s.metric, p.user_prompt, r.row_json
            FROM scores s
            JOIN predictions pr USING (model_fingerprint, benchmark, mode, prompt_format)
            JOIN prompts p USING (prompt_id)
            JOIN raw_rows r ON r.benchmark = p.benchmark AND r.source_row_id = p.source_row_id
            WHERE s.benchmark = 'arc_easy' AND s.mode = 'letter'""").fetchall()
        assert len(lineage) == ROWS and all(json.loads(row)["question"] in prompt for _, _, prompt, row in lineage)
        # Per-item scores in the lineage view average back to every stored accuracy.
        assert (
            conn.execute("""SELECT count(*) FROM (SELECT benchmark, mode, prompt_format, num_fewshot, metric,
                                   avg(item_score) AS recomputed, any_value(accuracy) AS stored
                               FROM score_lineage GROUP BY ALL) WHERE abs(recomputed - stored) > 1e-9""").fetchone()[0]
            == 0
        )
        assert conn.execute(
            "SELECT count(*) FROM (SELECT DISTINCT benchmark, mode, prompt_format, metric FROM score_lineage)"
        ).fetchone()[0] == len(expected)
        report = conn.execute("SELECT report FROM scores WHERE benchmark = 'mmlu' AND mode = 'letter'").fetchone()[0]
        assert report.splitlines()[0].startswith("0. Output: ") and report.splitlines()[-1].startswith("Score: ")


def test_every_item_is_in_view_with_its_prompt_answer_reference_and_metrics(all_benchmarks):
    """The `samples` metadata of each benchmark's scores: every item, the exact prompt, the answer
    (choice log-likelihoods, label probabilities, or generated text with each filter's answer)."""
    warehouse, _, results = all_benchmarks
    for benchmark in ("winogrande", "gsm8k_cot", "mmlu"):
        view = materialization(results[benchmark], benchmark_scores).materialization.metadata["samples"].value
        with warehouse.get_connection() as conn:
            items = conn.execute(
                """SELECT source_row_id, mode, prompt_format, metric, item_score, predicted, reference,
                                           user_prompt, harness_contexts, output_text
                                    FROM score_lineage WHERE benchmark = ?""",
                [benchmark],
            ).fetchall()
        assert len({(i[0], i[1], i[2]) for i in items}) == ROWS * len({(i[1], i[2]) for i in items}) > 0
        for row_id, mode, prompt_format, metric, value, predicted, reference, user, contexts, text in items:
            assert f"#### {row_id}\n" in view and f"reference `{reference}`" in view
            assert f"{metric} **{value:.4g}**" in view
            prompt = user if prompt_format == "chat" else contexts[-1]
            assert prompt in view and (text is None or text in view)


def test_item_lineage_holds_every_scored_item_with_the_prompt_the_ui_shows(all_benchmarks):
    """`item_lineage`, the one lineage view of either kind of benchmark: every spec item score, its
    exact prompt as the samples view renders it, the answer and the source row."""
    from eval_platform.benchmarks.samples import item_prompt

    warehouse, _, _ = all_benchmarks
    key = ("model", "benchmark", "mode", "prompt_format", "num_fewshot", "metric", "source_row_id")
    with warehouse.store(BenchmarkStore) as store:
        items = {tuple(row[k] for k in key): row for row in store.rows("SELECT * FROM score_lineage")}
        # metric and filter as the harness names them: a generated answer's exact_match under each filter
        lineage = store.rows(
            "SELECT *, item AS source_row_id, CASE WHEN mode = 'generate' THEN filter ELSE metric "
            "END AS spec_metric FROM item_lineage"
        )
    assert len(lineage) == len(items) > 0 and {row["kind"] for row in lineage} == {"spec"}
    assert {(row["metric"], row["filter"]) for row in lineage if row["mode"] == "generate"} == {
        ("exact_match", "strict-match"),
        ("exact_match", "flexible-extract"),
    }
    assert {row["filter"] for row in lineage if row["mode"] != "generate"} == {"none"}
    for row in lineage:
        item = items[tuple(row[k] for k in key[:-2]) + (row["spec_metric"], row["source_row_id"])]
        assert row["prompt"] == item_prompt(item)
        assert (json.loads(row["item_value"]), row["score"], row["extracted"], row["reference"]) == (
            item["item_score"],
            item["accuracy"],
            item["predicted"],
            item["reference"],
        )
        answer = json.loads(row["answer"])
        assert answer == (
            item["output_text"]
            if item["output_text"] is not None
            else dict(item["label_probabilities"])
            if item["label_probabilities"]
            else item["choice_loglikelihoods"]
        )
        assert json.loads(row["source_row"]) == json.loads(item["row_json"]) and row["source"] == item["source"]
    assert {row["prompt_format"] for row in lineage} == {"chat", "harness"}
    assert any(row["prompt"].startswith("[context 1]") for row in lineage)  # Winogrande: a context per choice


def test_letter_probabilities_match_an_unbatched_pass(all_benchmarks, local_model):
    warehouse, _, _ = all_benchmarks
    with warehouse.get_connection() as conn:
        rows = conn.execute("""SELECT p.system_prompt, p.user_prompt, p.labels, pr.label_probabilities
                               FROM predictions pr JOIN prompts p USING (prompt_id)
                               WHERE p.benchmark = 'hellaswag' AND pr.mode = 'letter'""").fetchall()
    assert len(rows) == ROWS
    for system, user, labels, stored in rows:
        (alone,) = local_model.label_probabilities([Chat(system, user)], [labels], batch_size=1)
        assert all(abs(alone[label] - stored[label]) <= LOGLIKELIHOOD_TOLERANCE for label in labels)


def test_rerun_replaces_rows_and_reuses_predictions(all_benchmarks):
    warehouse, roster, _ = all_benchmarks
    with warehouse.get_connection() as conn:
        before = table_counts(conn)
    result = run(warehouse, roster, "arc_easy")
    with warehouse.get_connection() as conn:
        assert table_counts(conn) == before
    assert all(before[t] for t in ("raw_rows", "prompts", "harness_requests", "predictions", "item_scores", "scores"))
    modes = materialization(result, benchmark_predictions).materialization.metadata["modes"].value
    assert modes["letter/chat/0-shot"] == {"computed": 0, "reused": ROWS, "forward_passes": 0}


def test_a_partition_predicted_twice_at_once_keeps_one_prediction_per_prompt(all_benchmarks, monkeypatch):
    """A second run of a partition's predictions that read before the first one wrote (a worker's task
    handed to a second worker): its predictions replace the first run's instead of adding to them."""
    warehouse, roster, _ = all_benchmarks
    with warehouse.get_connection() as conn:
        before = table_counts(conn)
    monkeypatch.setattr(BenchmarkStore, "stored_prediction_ids", lambda store, key: set())  # nothing stored yet
    result = materialize_evaluation(warehouse, "winogrande", MODEL, roster, assets=[benchmark_predictions])
    modes = materialization(result, benchmark_predictions).materialization.metadata["modes"].value
    assert modes and all(counts["computed"] == ROWS and counts["reused"] == 0 for counts in modes.values())
    with warehouse.get_connection() as conn:
        assert table_counts(conn) == before


def test_malformed_rows_are_kept_with_their_reason(warehouse, tmp_path):
    rows = [json.loads(line) for line in open("data/benchmarks/mmlu.jsonl")][:3]
    rows[1]["answer"] = 9  # label out of range
    rows.append({"question": "Missing choices?", "subject": "x", "answer": 0})
    source = tmp_path / "mmlu_with_bad_rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = materialize_inputs(warehouse, "mmlu", source=source, assets=[benchmark_raw_rows, benchmark_prompts])
    metadata = materialization(result, benchmark_prompts).materialization.metadata
    assert metadata["rejected_rows"].value == 2 and metadata["dagster/row_count"].value == 2
    with warehouse.get_connection() as conn:
        rejected = conn.execute("SELECT source_row_id, reason, row_json FROM prompt_rejections ORDER BY 1").fetchall()
        assert conn.execute("SELECT count(*) FROM rejected_rows WHERE stage = 'preprocess'").fetchone()[0] == 2
    assert [(r[0], r[1]) for r in rejected] == [
        ("row-1", "answer '9' in field 'answer' is out of range for 4 choices"),
        ("row-3", "field 'choices' is not a list of choices"),
    ]
    assert json.loads(rejected[0][2])["answer"] == 9


def test_missing_data_file_fails_naming_it(warehouse, tmp_path):
    missing = tmp_path / "nowhere" / "arc.jsonl"
    with pytest.raises(DataFileError, match="Data file not found: " + re.escape(str(missing))):
        materialize_inputs(warehouse, "arc_easy", source=missing, assets=[benchmark_raw_rows])


def test_a_malformed_line_is_kept_with_its_line_and_the_good_rows_land(warehouse, tmp_path):
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "question": "ok"}\n{not json at all\n{"id": "b", "question": "fine"}\n')
    assert materialize_inputs(warehouse, "arc_easy", source=broken, assets=[benchmark_raw_rows]).success
    with warehouse.get_connection() as conn:
        assert conn.execute("SELECT source_row_id, line FROM raw_rows ORDER BY line").fetchall() == [("a", 1), ("b", 3)]
        ((source, line, reason),) = conn.execute("SELECT source, line, reason FROM ingest_rejections").fetchall()
    assert (source, line) == (str(broken), 2) and reason.startswith("invalid JSON")


def test_shared_context_loglikelihoods_equal_the_naive_loop(local_model):
    requests = []
    for name in ["winogrande", "arc_challenge"]:
        rows = [json.loads(line) for line in open(f"data/benchmarks/{BENCHMARKS[name].data_file}").readlines()[:2]]
        requests += [
            LoglikelihoodRequest(c, k) for item in zero_shot_items(BENCHMARKS[name], rows) for c, k in item.requests()
        ]
    batched = local_model.loglikelihoods(requests, batch_size=4)
    naive = naive_loglikelihoods(local_model, requests)
    assert batched == pytest.approx(naive, abs=LOGLIKELIHOOD_TOLERANCE)
