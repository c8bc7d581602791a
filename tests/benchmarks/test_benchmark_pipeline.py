"""In-process Dagster materialisations of every declared dataset with the real SmolLM2 into a
temporary DuckDB file."""

import json
import re

import pytest

from eval_engine import LOGLIKELIHOOD_TOLERANCE
from eval_platform.benchmarks.declarations import declared_benchmarks
from eval_platform.benchmarks.store import EvaluationStore
from eval_platform.common.ingestion import DataFileError
from eval_platform.common.models import Chat
from eval_platform.environment import environment
from eval_platform.evaluation_assets.benchmarks.assets import (
    benchmark_documents,
    benchmark_evaluation,
    benchmark_raw_rows,
)
from eval_platform.resources import LanguageModelResource
from tests.evaluation import (
    dataset_requests,
    materialize_benchmark,
    materialize_evaluation,
    materialize_inputs,
    roster_with,
)
from tests.reference_scoring import naive_loglikelihoods

# every test here shares a module fixture that takes seconds to a minute: the fast tier leaves them out
pytestmark = pytest.mark.slow

DATASETS = {name: b for name, b in declared_benchmarks(environment().benchmarks_dir).items() if b.is_dataset}
# each solver's metrics (and filters), and the harness tasks' own metric_list as they report them
CHAT_METRICS = {
    "letter": {("acc", "none")},
    "generate": {("exact_match", "strict-match"), ("exact_match", "flexible-extract")},
}
HARNESS_METRICS = {
    "arc_easy": {("acc", "none"), ("acc_norm", "none")},
    "arc_challenge": {("acc", "none"), ("acc_norm", "none")},
    "hellaswag": {("acc", "none"), ("acc_norm", "none")},
    "mmlu": {("acc", "none")},
    "truthfulqa": {("acc", "none")},
    "truthfulqa_mc2": {("acc", "none")},
    "winogrande": {("acc", "none")},
    "gsm8k_cot": {("exact_match", "strict-match"), ("exact_match", "flexible-extract")},
}
ROWS = 5
MODEL = "smollm2"
TABLES = ["raw_rows", "ingest_rejections", "fewshot_rows", "documents", "document_rejections", "answers", "samples",
          "results", "evaluations", "history"]  # fmt: skip


def run(warehouse, roster, partition):
    """The benchmark's first ROWS rows, then the roster's model on them."""
    return materialize_benchmark(
        warehouse, partition, roster, MODEL, ROWS, evaluation_model=LanguageModelResource(max_new_tokens=24)
    )


def table_counts(conn):
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def materialization(result, asset):
    return next(e for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == asset.key.path[-1])


@pytest.fixture(scope="module")
def all_benchmarks(tmp_path_factory):
    from eval_platform.resources import WarehouseResource

    folder = tmp_path_factory.mktemp("wh")
    warehouse = WarehouseResource(database=str(folder / "warehouse.duckdb"))
    roster = roster_with(folder / "roster", MODEL)
    results = {name: run(warehouse, roster, name) for name in DATASETS}
    return warehouse, roster, results


def test_every_declared_dataset_materialises_with_the_real_model(all_benchmarks):
    warehouse, _, results = all_benchmarks
    assert all(r.success for r in results.values())
    with warehouse.get_connection() as conn:
        per_benchmark = dict(conn.execute("SELECT benchmark, count(*) FROM documents GROUP BY ALL").fetchall())
        assert per_benchmark == {name: ROWS for name in DATASETS}
        letter_responses = conn.execute("SELECT responses FROM samples WHERE solver = 'letter'").fetchall()
        probabilities = [json.loads(r)[0] for (r,) in letter_responses]
        letter = [b for b in DATASETS.values() if "letter" in b.solvers]
        assert len(probabilities) == ROWS * len(letter) and all(abs(sum(p.values()) - 1) < 1e-5 for p in probabilities)
        assert conn.execute(
            "SELECT min(value) >= 0 AND max(value) <= 1 FROM results WHERE metric IN ('acc', 'acc_norm', 'exact_match')"
        ).fetchone()[0]
        stored = {
            tuple(r) for r in conn.execute("SELECT DISTINCT benchmark, solver, metric, filter FROM results").fetchall()
        }
        expected = {
            (name, solver, metric, filter_name)
            for name, benchmark in DATASETS.items()
            for solver in benchmark.solvers
            for metric, filter_name in (HARNESS_METRICS[name] if solver == "harness" else CHAT_METRICS[solver])
        }
        assert stored == expected
        generated = conn.execute("SELECT count(DISTINCT (benchmark, doc_id)) FROM samples WHERE solver = 'generate' "
                                 "AND responses ->> '$[0]' <> ''")  # fmt: skip
        generating = [b for b in DATASETS.values() if "generate" in b.solvers]
        assert generated.fetchone()[0] == ROWS * len(generating)  # a chat answer is never empty
        # Lineage: from a result to its samples, their documents and the raw rows.
        lineage = conn.execute("""
            SELECT d.user_prompt, raw.row_json
            FROM results r
            JOIN samples s USING (benchmark, model, settings_key, solver, task, filter)
            JOIN documents d ON d.benchmark = s.benchmark AND d.document_id = s.document_id
            JOIN raw_rows raw ON raw.benchmark = d.benchmark AND raw.source_row_id = d.source_row_id
            WHERE r.benchmark = 'arc_easy' AND r.solver = 'letter'""").fetchall()
        assert len(lineage) == ROWS and all(json.loads(row)["question"] in prompt for prompt, row in lineage)
        # Each document's value in the lineage view averages back to every stored result of its task.
        assert (
            conn.execute("""
            SELECT count(*) FROM (SELECT benchmark, solver, settings_key, task, metric, filter,
                                         avg(item_value::DOUBLE) AS recomputed, any_value(score) AS stored
                                  FROM item_lineage GROUP BY ALL) WHERE abs(recomputed - stored) > 1e-9""").fetchone()[
                0
            ]
            == 0
        )
        # MMLU's own number is over every subject's documents
        ((mmlu, documents),) = conn.execute(
            "SELECT value, n FROM results WHERE benchmark = 'mmlu' AND solver = 'harness' AND task = 'mmlu'"
        ).fetchall()
        assert documents == ROWS and mmlu == pytest.approx(conn.execute(
            "SELECT avg((metrics->>'acc')::DOUBLE) FROM samples WHERE benchmark = 'mmlu' AND solver = 'harness'"
        ).fetchone()[0])  # fmt: skip


def test_every_item_is_in_view_with_its_prompt_answer_reference_and_metrics(all_benchmarks):
    """The `samples` metadata of an evaluation: its documents (all ROWS of them here, at most ten),
    the end of the exact prompt, the answer and what each filter took, the reference, the metrics."""
    warehouse, _, results = all_benchmarks
    for benchmark in ("winogrande", "gsm8k_cot", "mmlu"):
        view = materialization(results[benchmark], benchmark_evaluation).materialization.metadata["samples"].value
        with warehouse.get_connection() as conn:
            items = conn.execute(
                "SELECT solver, task, doc_id, target, metrics, prompt FROM samples WHERE benchmark = ?", [benchmark]
            ).fetchall()
        assert len(items) >= ROWS
        for solver, task, doc_id, target, metrics, prompt in items:
            assert f"{solver} (" in view and f"· {task} document {doc_id}\n" in view
            assert f"reference `{target}`" in view
            assert all(f"{metric} **{value:.4g}**" in view for metric, value in json.loads(metrics).items())
            assert prompt[-1500:] in view


def test_item_lineage_holds_every_scored_document_with_its_prompt_answer_and_row(all_benchmarks):
    """`item_lineage`: every document's value of every result's metric, its exact prompt, the answer
    and what the filter took out of it, the reference, and a dataset's source row."""
    warehouse, _, _ = all_benchmarks
    with warehouse.store(EvaluationStore) as store:
        lineage = store.rows("SELECT * FROM item_lineage")
        samples = {(s["benchmark"], s["solver"], s["task"], s["doc_id"], s["filter"]): s
                   for s in store.rows("SELECT * FROM samples")}  # fmt: skip
        rows = {(r["benchmark"], r["source_row_id"]): r for r in store.rows("SELECT * FROM raw_rows")}
    assert lineage and {(row["benchmark"], row["solver"]) for row in lineage} == {
        (name, solver) for name, b in DATASETS.items() for solver in b.solvers
    }
    for row in lineage:
        sample = samples[(row["benchmark"], row["solver"], row["task"], row["doc_id"], row["filter"])]
        assert row["prompt"] == sample["prompt"] and row["answer"] == sample["responses"]
        assert json.loads(row["item_value"]) == json.loads(sample["metrics"])[row["metric"]]
        assert (row["extracted"], row["reference"]) == (sample["filtered_responses"], sample["target"])
        raw = rows[(row["benchmark"], row["source_row_id"])]
        assert (row["source_row"], row["source"], row["line"]) == (raw["row_json"], raw["source"], raw["line"])
    assert any(row["prompt"].startswith("[system]") for row in lineage)  # a chat prompt
    assert any(len(json.loads(row["arguments"])) == 2 and json.loads(row["arguments"])[0][0] !=
               json.loads(row["arguments"])[1][0] for row in lineage if row["benchmark"] == "winogrande"
               and row["solver"] == "harness")  # Winogrande: a context per choice  # fmt: skip


def test_letter_probabilities_match_an_unbatched_pass(all_benchmarks, local_model):
    warehouse, _, _ = all_benchmarks
    with warehouse.get_connection() as conn:
        rows = conn.execute("""SELECT d.system_prompt, d.user_prompt, d.labels, s.responses
                               FROM samples s JOIN documents d USING (benchmark, document_id)
                               WHERE s.benchmark = 'hellaswag' AND s.solver = 'letter'""").fetchall()
    assert len(rows) == ROWS
    for system, user, labels, stored in rows:
        (alone,) = local_model.label_probabilities([Chat(system, user)], [labels], batch_size=1)
        assert all(abs(alone[label] - json.loads(stored)[0][label]) <= LOGLIKELIHOOD_TOLERANCE for label in labels)


def test_rerun_replaces_rows_and_reuses_answers(all_benchmarks):
    warehouse, roster, _ = all_benchmarks
    with warehouse.get_connection() as conn:
        before = table_counts(conn)
    result = run(warehouse, roster, "arc_easy")
    with warehouse.get_connection() as conn:
        after = table_counts(conn)
    assert {t: after[t] for t in TABLES if t != "history"} == {t: before[t] for t in TABLES if t != "history"}
    assert all(before[t] for t in ("raw_rows", "documents", "answers", "samples", "results"))
    assert after["history"] > before["history"]  # the run is one more in the regression watch's history
    solvers = materialization(result, benchmark_evaluation).materialization.metadata["solvers"].value
    assert solvers["letter (0-shot)"]["computed"] == 0 and solvers["harness (0-shot)"]["computed"] == 0


def test_a_partition_evaluated_twice_at_once_keeps_one_sample_per_document(all_benchmarks, monkeypatch):
    """A second run of a partition's evaluation that read before the first one wrote (a worker's task
    handed to a second worker): its answers and samples replace the first run's instead of adding."""
    warehouse, roster, _ = all_benchmarks
    with warehouse.get_connection() as conn:
        before = table_counts(conn)
    monkeypatch.setattr(EvaluationStore, "load_answers", lambda store, fingerprint: {})  # nothing stored yet
    result = materialize_evaluation(warehouse, "winogrande", MODEL, roster)
    solvers = materialization(result, benchmark_evaluation).materialization.metadata["solvers"].value
    assert solvers and all(counts["computed"] == counts["answers"] > 0 for counts in solvers.values())
    with warehouse.get_connection() as conn:
        after = table_counts(conn)
    assert {t: after[t] for t in TABLES if t != "history"} == {t: before[t] for t in TABLES if t != "history"}


def test_malformed_rows_are_kept_with_their_reason(warehouse, tmp_path):
    rows = [json.loads(line) for line in open("data/benchmarks/mmlu.jsonl")][:3]
    rows[1]["answer"] = 9  # label out of range
    rows.append({"question": "Missing choices?", "subject": "x", "answer": 0})
    source = tmp_path / "mmlu_with_bad_rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = materialize_inputs(warehouse, "mmlu", source=source, assets=[benchmark_raw_rows, benchmark_documents])
    metadata = materialization(result, benchmark_documents).materialization.metadata
    assert metadata["rejected_rows"].value == 2 and metadata["dagster/row_count"].value == 2
    with warehouse.get_connection() as conn:
        rejected = conn.execute("SELECT source_row_id, reason, row_json FROM document_rejections ORDER BY 1").fetchall()
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
    requests = dataset_requests("winogrande", 2) + dataset_requests("arc_challenge", 2)
    batched = local_model.loglikelihoods(requests, batch_size=4)
    naive = naive_loglikelihoods(local_model, requests)
    assert batched == pytest.approx(naive, abs=LOGLIKELIHOOD_TOLERANCE)
