"""Sampled evaluations of harness tasks: a task that samples runs by name at its own `repeats`
(gsm8k_cot_self_consistency, 64 answers a document, the harness's own majority filters on our
samples); sampling set from the launchpad names itself in the settings key, keeps each answer with
its score, reduces them per item (pass@k, maj@k) as the stored answers say by hand, agrees with the
harness's own majority filter, and a second run reuses every sample instead of drawing new ones."""

import json

import pytest
from dagster import DagsterInstance

from eval_engine.tiny_models import FAMILIES, smollm2_tokenizer, tiny_model
from eval_platform.benchmarks.declarations import DeclarationError, EvaluationSettings, settings_key
from eval_platform.benchmarks.engine_lm import EngineLM
from eval_platform.benchmarks.harness import HarnessRun, build_tasks, evaluate, outcome_results, outcome_samples
from eval_platform.benchmarks.roster import RosterEntry, write_entry
from eval_platform.evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions
from eval_platform.resources import WarehouseResource
from tests.benchmarks.test_harness_tasks import launchpad
from tests.conftest import DATA_BENCHMARKS
from tests.peers import INSPECT_LOG_READER, peer_json

TASK = "gsm8k_cot_self_consistency"
GSM8K = {TASK: {"test": str(DATA_BENCHMARKS / "gsm8k.jsonl")}}


def test_a_task_that_samples_runs_by_name_at_its_own_repeats():
    """64 answers of one document from a tiny model within 4 new tokens each: the harness's own
    filters (score-first, maj@64, maj@8) score our 64 samples, each its own answer."""
    model = tiny_model(FAMILIES["llama"], smollm2_tokenizer())
    settings = EvaluationSettings(task=TASK, limit=1, data_files=GSM8K, max_gen_toks=4)
    run = HarnessRun((TASK,), settings)
    tasks = build_tasks(run)
    assert tasks[0].config.repeats == 64 and tasks[0].config.generation_kwargs["do_sample"]
    lm = EngineLM(model, 16, max_gen_toks=4)
    outcome = evaluate(run, tasks, lm)
    samples = outcome_samples(outcome, tasks=tasks)
    assert {r.filter for r in outcome_results(outcome)} == {"score-first", "maj@64", "maj@8"}
    assert len(lm.answers) == 64 and all(len(s.request_keys) == 64 for s in samples)
    assert len({json.dumps(a.arguments[-1]) for a in lm.answers.values()}) == 64  # one seed, 64 sample indices
    assert all(len(s.sample_metrics or []) == 64 for s in samples)


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.setenv("EVAL_BENCHMARKS_DIR", str(tmp_path / "benchmarks"))
    (tmp_path / "benchmarks").mkdir()
    write_entry(tmp_path / "roster", RosterEntry(name="smollm2", model="local/smollm2-135m-instruct"))
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(roster_partitions.name, ["smollm2"])
    instance.add_dynamic_partitions(benchmark_partitions.name, [TASK])
    return tmp_path, instance


SAMPLING = {"data_files": GSM8K, "limit": 2, "max_gen_toks": 24, "repeats": 8, "temperature": 0.7, "seed": 5}


@pytest.mark.slow
def test_sampling_from_the_launchpad_keeps_every_sample_and_reduces_them_per_item(project, capsys, exports_folder):
    from eval_platform.cli.summary import print_sampled
    from eval_platform.definitions import defs

    root, instance = project
    config = launchpad(root / "warehouse.duckdb", root / "roster", {"benchmark_evaluation": {"config": SAMPLING}})

    def materialise():
        result = (
            defs()
            .resolve_job_def("model_evaluation")
            .execute_in_process(partition_key=evaluation_key(TASK, "smollm2"), instance=instance, run_config=config)
        )
        assert result.success
        return next(
            e.materialization.metadata
            for e in result.get_asset_materialization_events()
            if e.asset_key.path[-1] == "benchmark_evaluation"
        )

    key = "default shots, first 2 documents, 24 new tokens, 8 samples at temperature 0.7, seed 5"
    assert settings_key(EvaluationSettings(**SAMPLING).describe()) == key
    metadata = materialise()
    first = metadata["solvers"].value[f"harness ({key})"]
    assert "8 samples:" in metadata["samples"].value and "sample 7:" in metadata["samples"].value  # each one shown
    assert (first["answers"], first["computed"]) == (16, 16)
    warehouse = WarehouseResource(database=str(root / "warehouse.duckdb"))
    with warehouse.get_connection() as conn:
        scores = conn.execute(
            "SELECT filter, doc_id, sample, answer, value FROM sample_scores "
            "WHERE metric = 'exact_match' ORDER BY filter, doc_id, sample"
        ).fetchall()
        results = {
            (metric, filter_name): (value, stderr, n)
            for metric, filter_name, value, stderr, n in conn.execute(
                "SELECT metric, filter, value, stderr, n FROM results WHERE settings_key = ?", [key]
            ).fetchall()
        }
        keys = conn.execute("SELECT count(DISTINCT request_key) FROM answers").fetchone()[0]
        item_means = conn.execute(
            "SELECT doc_id, value FROM document_values WHERE metric = 'exact_match pass@1' "
            "AND filter = 'score-first' ORDER BY doc_id"
        ).fetchall()
    assert len(scores) == 3 * 2 * 8 and keys == 16  # three filters, two documents, eight samples
    by_item: dict[tuple[str, int], list[tuple[str, float]]] = {}
    for filter_name, doc_id, _, answer, value in scores:
        by_item.setdefault((filter_name, doc_id), []).append((answer, value))
    first_filter = [items for (f, _), items in by_item.items() if f == "score-first"]
    # by hand: pass@1 is the mean of every answer's score, pass@8 the share of items with one right
    # answer at least, maj@8 the score of each item's most frequent answer (the first seen of a tie)
    pass1 = sum(v for items in first_filter for _, v in items) / 16
    pass8 = sum(max(v for _, v in items) for items in first_filter) / 2
    majority = []
    for items in first_filter:
        answers = [a for a, _ in items]
        top = max(answers, key=lambda a: (answers.count(a), -answers.index(a)))
        majority.append(items[answers.index(top)][1])
    assert results[("exact_match pass@1", "score-first")][0] == pytest.approx(pass1, abs=1e-12)
    # each item's mean, what the paired comparison and the regression watch compare per item
    assert item_means == [(doc, pytest.approx(sum(v for _, v in items) / 8)) for doc, items in enumerate(first_filter)]
    assert results[("exact_match pass@8", "score-first")][0] == pytest.approx(pass8, abs=1e-12)
    assert results[("exact_match maj@8", "score-first")][0] == pytest.approx(sum(majority) / 2, abs=1e-12)
    # the harness's own majority filters over the same eight samples give the same number
    assert results[("exact_match", "maj@64")][0] == results[("exact_match maj@8", "score-first")][0]
    assert results[("exact_match", "maj@8")][0] == results[("exact_match maj@8", "score-first")][0]
    assert results[("exact_match pass@1", "score-first")][2] == 2  # items, not answers
    # every answer says why it ended, and each result the share of them cut at its 24 tokens
    with warehouse.get_connection() as conn:
        endings = dict(conn.execute("SELECT request_key, ended FROM answers").fetchall())
        shares = {
            row[0] for row in conn.execute("SELECT cut_at_budget FROM results WHERE settings_key = ?", [key]).fetchall()
        }
    assert set(endings.values()) <= {"budget", "stop_sequence", "end_token"} and len(endings) == 16
    with warehouse.get_connection() as conn:  # every sample's answer found by its key, the budget in it
        assert {k for (k,) in conn.execute("SELECT DISTINCT request_key FROM sample_scores").fetchall()} == set(endings)
    assert shares == {sum(ended == "budget" for ended in endings.values()) / 16}

    # the main command's summary of it: each reduction with its interval, a line per task, metric and filter
    print_sampled(warehouse)
    printed = capsys.readouterr().out
    line = next(line for line in printed.splitlines() if "exact_match,score-first" in line)
    assert all(f"{reducer} " in line for reducer in ("pass@1", "pass@2", "pass@4", "pass@8", "maj@8"))
    assert f"pass@8 {pass8:.3f} [" in line and key in printed

    again = materialise()["solvers"].value[f"harness ({key})"]
    assert (again["answers"], again["computed"]) == (16, 0)  # every sample reused, none drawn again
    with warehouse.get_connection() as conn:
        assert dict(conn.execute("SELECT request_key, ended FROM answers").fetchall()) == endings  # kept with them
        query = "SELECT cut_at_budget FROM results WHERE settings_key = ?"
        assert {row[0] for row in conn.execute(query, [key]).fetchall()} == shares
        assert (
            conn.execute(
                "SELECT filter, doc_id, sample, answer, value FROM sample_scores "
                "WHERE metric = 'exact_match' ORDER BY filter, doc_id, sample"
            ).fetchall()
            == scores
        )

    # exported with it (the job's inspect_log), read by inspect_ai's own reader: each answer an
    # epoch, scored as sample_scores holds it, and each document's reduction as its sample's metric
    (log_file,) = (exports_folder / TASK).glob("*.eval")
    log = peer_json(INSPECT_LOG_READER, str(log_file), cwd=root)
    with warehouse.get_connection() as conn:
        answers = conn.execute("SELECT task, doc_id, filter, sample, metric, value FROM sample_scores").fetchall()
    expected: dict[tuple[str, int], dict[str, float]] = {}
    for task, doc_id, filter_name, sample, metric, value in answers:
        expected.setdefault((f"{task}:{doc_id}", sample + 1), {})[f"{metric},{filter_name}"] = value
    assert log["epochs"] == 8 and {(s["id"], s["epoch"]): s["scores"] for s in log["samples"]} == expected
    with warehouse.get_connection() as conn:
        means = conn.execute(
            "SELECT metric || ',' || filter, task || ':' || doc_id, value FROM document_values "
            "WHERE metric LIKE '% pass@1'"
        ).fetchall()
    assert len(means) == 3 * 2 and means == [
        (name, item, pytest.approx(log["reductions"][name][item], abs=1e-12)) for name, item, _ in means
    ]


def test_sampling_settings_layer_declaration_roster_entry_and_launchpad(tmp_path):
    """A benchmark declares a temperature, a roster entry its model's recommended settings over it,
    the launchpad over both; the settings key names what was asked, and a greedy run's key is as it
    was before there were sampling settings."""
    from eval_platform.benchmarks.declarations import Benchmark
    from eval_platform.benchmarks.evaluation import evaluation_plan

    benchmark = Benchmark(name="gsm", task=TASK, temperature=1.0, top_p=0.9)
    entry = RosterEntry(name="reasoner", temperature=0.6, top_p=0.95, repeats=4)
    plan = evaluation_plan(benchmark, entry.evaluation_settings(), {"seed": 3, "repeats": 16})
    described = plan.settings.describe()
    assert (described["temperature"], described["top_p"], described["repeats"], described["seed"]) == (0.6, 0.95, 16, 3)
    assert settings_key(described) == "default shots, 16 samples at temperature 0.6, top-p 0.95, seed 3"
    greedy = Benchmark(name="gsm", task=TASK).evaluation_settings().describe()
    assert settings_key(greedy) == "default shots" and "temperature" not in greedy
    with pytest.raises(DeclarationError, match="filter maj@8 takes the first 8 answers of each document; repeats 4"):
        build_tasks(HarnessRun((TASK,), EvaluationSettings(task=TASK, repeats=4, data_files=GSM8K)))
