"""The judging, evolution and blind-evaluation domains on a team's lake (a DuckLake catalog on
PostgreSQL, data files in a folder), materialised as Dagster materialises them: each domain's rows
read back by a DuckDB of its own that attaches the lake read-only, each key held once (a lake has no
primary key to refuse a second copy), a rerun leaving the lake as the first run left it, and the
domain's asset checks passing. Judges and compressors are the OpenAI-compatible stub on 127.0.0.1."""

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance, materialize

from eval_platform.blind import sheets
from eval_platform.blind.sheets import KEY_FILE
from eval_platform.blind.store import BlindStore
from eval_platform.common.connections import lake_extensions
from eval_platform.common.warehouse import Store, table_key
from eval_platform.evaluation_assets.blind.assets import (
    blind_eval_answers,
    blind_eval_questions,
    blind_eval_scores,
    blind_eval_sheet,
    blind_eval_tally,
)
from eval_platform.evaluation_assets.evolution.assets import evolution_era, gene_pools, source_paragraphs
from eval_platform.evaluation_assets.evolution.checks import EVOLUTION_CHECKS
from eval_platform.evaluation_assets.judging.assets import (
    judge_agreement,
    judging_sets,
    mt_bench_inputs,
    mt_bench_verdicts,
    pairwise_verdicts,
    recorded_verdicts,
)
from eval_platform.evolution.store import EraStore
from eval_platform.judging.datasets import GPT4_LLMBAR_JUDGE
from eval_platform.judging.store import JudgingStore
from eval_platform.resources import LanguageModelResource, ModelGatewayResource, WarehouseResource
from tests.blind.test_blind_evaluation import fill
from tests.conftest import PROJECT_ROOT
from tests.evaluation import materialize_configured
from tests.judging.test_judging_assets import STUB_JUDGE, era_file, judging, llmbar_natural
from tests.openai_stub_server import CLIENT_TIMEOUT_S, StubServer
from tests.tables import assert_same_rows, snapshot
from tests.team.postgres_server import postgres_server

LAKES = ("lake_judging", "lake_evolution", "lake_blind")
ROUNDS = 20  # bootstrap rounds: the figures are exact, only their intervals are resampled
ITEMS = 5  # LLMBar Natural's first items, judged in both orders
# The judging tables each run rewrites whole, and the column saying when.
REWRITTEN = {"judging_sets": "stored_at", "recorded_verdicts": "judged_at", "judge_human_agreement": "computed_at"}


@pytest.fixture(scope="module")
def catalogs():
    with postgres_server(LAKES) as url:
        yield {name: f"ducklake:postgres:{url.rsplit('/', 1)[0]}/{name}" for name in LAKES}


@pytest.fixture(scope="module")
def server():
    with StubServer() as stub, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-lake-not-a-real-key")
        yield stub


def lake(catalogs, name: str, tmp_path) -> WarehouseResource:
    return WarehouseResource(database=catalogs[name], data_path=str(tmp_path / name))


@contextmanager
def reread(warehouse: WarehouseResource) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB of its own with the lake attached read-only (not the platform's attachment, nor its
    connection code): what it reads is what the lake's catalog and data files hold."""
    conn = duckdb.connect(config={"extension_directory": lake_extensions(), "autoinstall_known_extensions": False})
    try:
        conn.execute("LOAD ducklake")
        conn.execute("LOAD postgres")
        conn.execute(f"ATTACH '{warehouse.database}' AS reread (DATA_PATH '{warehouse.data_path}', READ_ONLY)")
        conn.execute("USE reread")
        yield conn
    finally:
        conn.close()


def through_the_lake(warehouse: WarehouseResource, sql: str, params=()) -> list[tuple]:
    with reread(warehouse) as conn:
        return conn.execute(sql, list(params)).fetchall()


def lake_snapshot(warehouse: WarehouseResource) -> dict[str, list[tuple]]:
    """Every table's rows, read back through the lake, without the columns that say when they were made."""
    with reread(warehouse) as conn:
        return snapshot(conn)


def keys_held_twice(warehouse: WarehouseResource, store: type[Store]) -> dict[str, int]:
    """For each of the store's keyed tables whose key a row shares with another: how many rows too many."""
    with reread(warehouse) as conn:
        counted = {
            table: conn.execute(
                f"SELECT count(*) - count(DISTINCT ({', '.join(table_key(columns))})) FROM {table}"
            ).fetchall()
            for table, columns in store.tables.items()
            if table_key(columns)
        }
    return {table: extra for table, [(extra,)] in counted.items() if extra}


def data_files(warehouse: WarehouseResource, table: str) -> list[Path]:
    """The Parquet files of the table's rows, as the lake's catalog lists them: each one in the lake's
    data folder, on disk."""
    with reread(warehouse) as conn:
        found = conn.execute(f"SELECT data_file FROM ducklake_list_files('reread', '{table}')").fetchall()
    files = [Path(path) for (path,) in found]
    assert all(path.is_relative_to(str(warehouse.data_path)) and path.is_file() for path in files), files
    return files


def rows_in(warehouse: WarehouseResource, *tables: str) -> dict[str, int]:
    return {table: through_the_lake(warehouse, f"SELECT count(*) FROM {table}")[0][0] for table in tables}


def rewritten(warehouse: WarehouseResource, table: str, column: str, before) -> bool:
    """Whether every row of the table was written after `before` (the latest time its rows bore before a rerun)."""
    ((earliest,),) = through_the_lake(warehouse, f"SELECT min({column}) FROM {table}")
    return earliest is not None and earliest > before


def written_last(warehouse: WarehouseResource, table: str, column: str):
    ((latest,),) = through_the_lake(warehouse, f"SELECT max({column}) FROM {table}")
    return latest


def checks_of(result) -> dict[str, bool]:
    return {c.check_name: c.passed for c in result.get_asset_check_evaluations()}


# --- judging ------------------------------------------------------------------------------------


def test_judging_on_the_lake_stores_verdicts_and_agreement_once_and_its_checks_pass(
    catalogs, server, tmp_path, monkeypatch
):
    """The shipped sets, GPT-4's recorded verdicts, a stub judge on LLMBar Natural in both orders and
    on an MT-Bench question's pairs, and every judge's agreement with the humans: materialised twice
    on one lake, the second run replacing the first's rows."""
    warehouse = lake(catalogs, "lake_judging", tmp_path)
    eras = tmp_path / "eras"  # a panel measured on the lake: GPT-4's recorded kappa 0.908 passes 0.9
    gpt4 = {"gpt4": GPT4_LLMBAR_JUDGE}
    era_file(eras, "trusting", judge_panel=gpt4, agreement_set="llmbar_natural", min_judge_agreement=0.9)
    monkeypatch.setenv("EVAL_ERAS_DIR", str(eras))
    assets = [judging_sets, recorded_verdicts, pairwise_verdicts, judge_agreement, mt_bench_inputs, mt_bench_verdicts]
    ops = {
        "judging_sets": {"blind_sheets": False},
        "pairwise_verdicts": {"judges": [STUB_JUDGE], "sets": ["llmbar_natural"], "items": ITEMS},
        "judge_agreement": {"rounds": ROUNDS},
        "mt_bench_verdicts": {"judges": [STUB_JUDGE], "questions": [81], "pairs": "pairwise-baseline"},
    }
    calls = server.calls["judge-pairwise"]
    first = judging(warehouse, assets, ops, server)
    assert first.success
    assert server.calls["judge-pairwise"] - calls == 2 * ITEMS + 7 * 2
    assert checks_of(first) == {
        "set_pairs_in_both_orders": True,
        "mt_bench_pairs_in_both_orders": True,
        "llmbar_figures_reproduced": True,
        "flag_panel_judges": True,
    }
    # Read back through the lake: the stub's verdicts in both orders, the longer answer preferred.
    verdicts = through_the_lake(
        warehouse,
        "SELECT shown_order, verdict FROM judge_verdicts WHERE judge = ? ORDER BY item_id::INT, shown_order",
        [STUB_JUDGE],
    )
    expected = []
    for a, b, _ in llmbar_natural(ITEMS):
        longer = "a" if len(a) > len(b) else "b" if len(b) > len(a) else "tie"
        expected += [("as_is", longer), ("swapped", longer)]
    assert verdicts == expected
    stored = rows_in(
        warehouse, "judging_sets", "judging_items", "recorded_verdicts", "mt_bench_verdicts", "judge_human_agreement"
    )
    assert stored["judging_sets"] == 7 and stored["recorded_verdicts"] == 2 * 419 + 999 + 999
    assert stored["mt_bench_verdicts"] == 7 * 2  # seven models against the baseline, in both orders
    (accuracy,) = through_the_lake(
        warehouse,
        "SELECT accuracy FROM judge_vs_human WHERE judge = ? AND set_name = 'llmbar_natural'",
        [GPT4_LLMBAR_JUDGE],
    )
    assert accuracy[0] * 100 == pytest.approx(95.5)  # LLMBar's published figure, from the lake's rows
    assert data_files(warehouse, "judge_verdicts") and data_files(warehouse, "judge_human_agreement")
    assert keys_held_twice(warehouse, JudgingStore) == {}
    before = lake_snapshot(warehouse)
    written = {table: written_last(warehouse, table, column) for table, column in REWRITTEN.items()}

    again = judging(warehouse, assets, ops, server)
    assert again.success and all(checks_of(again).values())
    # Every row written again (a later time), each held once: the lake holds what the first run left.
    assert all(rewritten(warehouse, table, column, written[table]) for table, column in REWRITTEN.items())
    assert keys_held_twice(warehouse, JudgingStore) == {}
    assert_same_rows(lake_snapshot(warehouse), before)


# --- evolution ----------------------------------------------------------------------------------

ERA = {
    "population_size": 4,
    "generations": 1,
    "compression_model": "openai/compressor",
    "seed": 5,
    # "harsh" is no provider judge's name: generations.quality_scores gains a field, on the lake.
    "judge_panel": {"openai": "openai/judge-fast", "harsh": "openai/judge-harsh"},
}


STATISTICS = "SELECT * EXCLUDE (cache_hits) FROM generation_stats ORDER BY ALL"


def run_era(warehouse, server, era: str, config: dict, instance: DagsterInstance):
    if era not in instance.get_dynamic_partitions("eras"):
        instance.add_dynamic_partitions("eras", [era])
    resources = {
        "warehouse": warehouse,
        "evaluation_model": LanguageModelResource(),
        "gateway": ModelGatewayResource(
            api_base=server.api_base, timeout_s=CLIENT_TIMEOUT_S, max_retries=2, backoff_s=0.05
        ),
    }
    assert materialize([source_paragraphs, gene_pools], resources=resources, instance=instance).success
    return materialize(
        [evolution_era, *EVOLUTION_CHECKS],
        partition_key=era,
        resources=resources,
        instance=instance,
        run_config={"ops": {"evolution_era": {"config": config}}},
    )


def test_an_era_on_the_lake_stores_each_generation_once_and_its_checks_pass(catalogs, server, tmp_path):
    """An era of two generations against the stub (its compressor and two judges), then the same era
    restarted: the restart replaces the era's rows, and the lake holds what the first run left."""
    warehouse = lake(catalogs, "lake_evolution", tmp_path)
    instance = DagsterInstance.ephemeral()
    first = run_era(warehouse, server, "lake-era", ERA, instance)
    assert first.success
    assert checks_of(first) == {
        "judge_failure_rate": True,
        "fitness_in_unit_interval": True,
        "generation_stats_match_generations": True,
    }
    assert through_the_lake(warehouse, "SELECT status, generations_done FROM eras WHERE era = 'lake-era'") == [
        ("complete", 1)
    ]
    per_generation = through_the_lake(
        warehouse, "SELECT generation, count(*) FROM generations WHERE era = 'lake-era' GROUP BY 1 ORDER BY 1"
    )
    assert per_generation == [(0, 4), (1, 4)]
    assert through_the_lake(warehouse, "SELECT count(*) FROM era_checkpoints WHERE era = 'lake-era'") == [(2,)]
    # Each judge's score, in the field of its name (the quality_scores struct widened on the lake).
    scored = through_the_lake(
        warehouse,
        "SELECT g.quality_scores.openai, g.quality_scores.harsh, j.judge_name, j.score FROM generations g "
        "JOIN judge_scores j ON j.era = g.era AND j.prompt_id = g.prompt_id AND j.evaluated_generation = g.generation",
    )
    assert {name for _, _, name, _ in scored} == {"openai", "harsh"}
    assert all(score == (openai if name == "openai" else harsh) for openai, harsh, name, score in scored)
    assert rows_in(warehouse, "gateway_calls")["gateway_calls"] > 0 and data_files(warehouse, "generations")
    assert keys_held_twice(warehouse, EraStore) == {}
    before, stats = lake_snapshot(warehouse), through_the_lake(warehouse, STATISTICS)
    calls, checkpointed = sum(server.calls.values()), written_last(warehouse, "era_checkpoints", "completed_at")

    again = run_era(warehouse, server, "lake-era", {**ERA, "restart": True}, instance)
    assert again.success and all(checks_of(again).values())
    metadata = again.get_asset_materialization_events()[0].materialization.metadata
    assert metadata["resumed_after_generation"].value == -1  # the whole era again, not resumed
    # Every call answered by the response cache on the lake (its rows kept once), none by the stub.
    assert metadata["cache_hit_rate"].value == 1.0 and sum(server.calls.values()) == calls
    assert rewritten(warehouse, "era_checkpoints", "completed_at", checkpointed)  # each generation stored anew
    assert keys_held_twice(warehouse, EraStore) == {}
    after = lake_snapshot(warehouse)
    # The era's statistics as the first run's, but for the cache hits they count.
    assert through_the_lake(warehouse, STATISTICS) == stats
    assert_same_rows(
        {table: rows for table, rows in after.items() if table != "generation_stats"},
        {table: rows for table, rows in before.items() if table != "generation_stats"},
    )


# --- blind evaluation ---------------------------------------------------------------------------


def issue(warehouse: WarehouseResource, folder) -> None:
    """The questions, the systems' answers (read from answers/), and the sheet and its key, issued."""
    blind = {"config": {"folder": str(folder)}}
    issuing = [blind_eval_questions, blind_eval_answers, blind_eval_sheet]
    assert materialize_configured(issuing, {"warehouse": warehouse}, {a.key.path[-1]: blind for a in issuing}).success


def tally(warehouse: WarehouseResource, folder) -> None:
    """The filled sheets read back, checked against the issued one, and tallied."""
    tallying = [blind_eval_scores, blind_eval_tally]
    blind = {"config": {"folder": str(folder)}}
    assert materialize_configured(tallying, {"warehouse": warehouse}, {"blind_eval_scores": blind}).success


def test_a_blind_sheet_on_the_lake_is_issued_read_back_and_tallied_once(catalogs, server, tmp_path):
    """The sheet issued, a rater's filled-in sheet read back and tallied, twice over on one lake; then
    the sheet as a judging set, judged by the stub, whose checks pass."""
    warehouse = lake(catalogs, "lake_blind", tmp_path)
    folder = tmp_path / "blind_eval"
    shutil.copytree(PROJECT_ROOT / "data" / "blind_eval", folder, ignore=shutil.ignore_patterns("issued", "*.xlsx"))
    issue(warehouse, folder)
    key = sheets.read_answer_key(folder / "issued" / KEY_FILE)
    fill(folder, key, "rater-1")
    tally(warehouse, folder)
    assert rows_in(
        warehouse, "blind_questions", "blind_answers", "blind_issues", "blind_key", "blind_scores", "blind_results"
    ) == {
        "blind_questions": 5,
        "blind_answers": 10,
        "blind_issues": 1,
        "blind_key": 5,
        "blind_scores": 10,
        "blind_results": 2,  # the rater's and the pooled
    }
    # The key's sides as the lake keeps them, and the tally by hand (tests/blind/test_blind_evaluation.py).
    assert through_the_lake(warehouse, "SELECT sheet_id FROM blind_issues") == [(key["sheet_id"],)]
    sides = through_the_lake(warehouse, "SELECT Question_ID, system_a, system_b FROM blind_key ORDER BY 1")
    assert {qid: [a, b] for qid, a, b in sides} == {qid: list(pair) for qid, pair in key["sides"].items()}
    assert through_the_lake(
        warehouse,
        "SELECT system, wins, losses, ties, average_score FROM blind_tallies WHERE scope = 'pooled' ORDER BY system",
    ) == [("demo-generic", 0, 4, 1, 2.4), ("demo-rag", 4, 0, 1, 4.4)]
    assert data_files(warehouse, "blind_scores") and data_files(warehouse, "blind_tallies")
    assert keys_held_twice(warehouse, BlindStore) == {}
    before, issued = lake_snapshot(warehouse), written_last(warehouse, "blind_issues", "issued_at")

    issue(warehouse, folder)  # the same sheet issued again (its id is its rows' and seed's digest)
    assert sheets.read_answer_key(folder / "issued" / KEY_FILE) == key
    tally(warehouse, folder)  # the same filled sheet read back and tallied again
    assert rewritten(warehouse, "blind_issues", "issued_at", issued)
    assert keys_held_twice(warehouse, BlindStore) == {}
    assert rows_in(warehouse, "blind_sheet_problems") == {"blind_sheet_problems": 0}
    assert_same_rows(lake_snapshot(warehouse), before)

    # The tallied sheet as a human-labelled judging set, its rater's winners its labels.
    panel = {"judges": [STUB_JUDGE], "sets": ["blind|*"], "items": None}
    result = judging(
        warehouse,
        [judging_sets, pairwise_verdicts, judge_agreement],
        {"pairwise_verdicts": panel, "judge_agreement": {"rounds": ROUNDS}},
        server,
    )
    assert result.success and checks_of(result)["set_pairs_in_both_orders"]
    (name,) = [n for (n,) in through_the_lake(warehouse, "SELECT set_name FROM judging_sets WHERE kind = 'blind'")]
    labels = through_the_lake(
        warehouse, "SELECT item_id, gold FROM judging_items WHERE set_name = ? ORDER BY 1", [name]
    )
    winners = {qid: "tie" if qid == "Q4" else "a" if a == "demo-rag" else "b" for qid, (a, _) in key["sides"].items()}
    assert dict(labels) == winners
    assert through_the_lake(warehouse, "SELECT items, verdicts FROM judge_vs_human WHERE set_name = ?", [name]) == [
        (5, 10)
    ]
    assert keys_held_twice(warehouse, JudgingStore) == {}
