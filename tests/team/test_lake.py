"""The warehouse on DuckLake (a catalog on PostgreSQL, data files in a folder): a partition's tables
replaced in one transaction whoever else writes, a conflicting commit retried and one that outlasts
its retries failing with the table and partition named, readers served while writers write, a
file warehouse moved into a lake with every row kept."""

import gzip
import multiprocessing
import os
import shutil
import subprocess
import sys
import threading
from contextlib import closing

import pandas as pd
import pytest

from eval_platform.benchmarks.store import EvaluationStore, InputStore
from eval_platform.benchmarks.store.inputs import source_frames
from eval_platform.common.ingestion import LoadedRows
from eval_platform.common.warehouse import CommitConflictError, writes
from eval_platform.evaluation_assets.benchmarks.assets import benchmark_evaluation
from eval_platform.resources import WarehouseResource
from tests.conftest import PROJECT_ROOT
from tests.evaluation import materialize_benchmark, materialize_evaluation, roster_with
from tests.processes import in_processes
from tests.tables import SKIPPED_TABLES
from tests.team.postgres_server import postgres_server

LAKES = (
    "lake_moved",
    "lake_exported",
    "lake_writers",
    "lake_conflicts",
    "lake_empty_partition",
    "lake_twice",
    "lake_reattached",
)
ROWS = 5


@pytest.fixture(scope="module")
def catalogs():
    with postgres_server(LAKES) as url:
        yield {name: f"ducklake:postgres:{url.rsplit('/', 1)[0]}/{name}" for name in LAKES}


def lake(catalogs, name: str, tmp_path, **fields) -> WarehouseResource:
    return WarehouseResource(database=catalogs[name], data_path=str(tmp_path / name), **fields)


def every_row(warehouse: WarehouseResource) -> dict[str, list[tuple]]:
    """Every table's every row, every column, sorted."""
    with warehouse.get_connection() as conn:
        tables = [
            t
            for (t,) in conn.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
            ).fetchall()
            if t not in SKIPPED_TABLES
        ]
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall() for table in tables}


ROWS_READ = LoadedRows(rows=[(f"r{i}", {"i": i}) for i in range(ROWS)], lines=list(range(1, ROWS + 1)))


def replace_raw_rows(store: InputStore, benchmark: str, copy: int) -> None:
    """A partition's rows as the `copy`-th writer writes them (each writer's rows are its own source)."""
    store.replace_raw_rows(benchmark, f"writer {copy}", ROWS_READ)


def raw_rows(benchmark: str, copy: int) -> pd.DataFrame:
    return source_frames(benchmark, f"writer {copy}", ROWS_READ)[0]


def move(env: dict, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "eval_platform.cli", "move-warehouse", *arguments],
        cwd=PROJECT_ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_file_warehouse_moves_into_a_lake_with_every_row_kept(catalogs, tmp_path):
    file = WarehouseResource(database=str(tmp_path / "warehouse.duckdb"))
    roster = roster_with(tmp_path / "roster", "smollm2", model="local/smollm2-135m-instruct", solvers=["harness"])
    assert materialize_benchmark(file, "arc_easy", roster, "smollm2", limit=ROWS).success
    expected = every_row(file)
    assert all(expected[t] for t in ("raw_rows", "documents", "answers", "samples", "results", "history"))

    moved = lake(catalogs, "lake_moved", tmp_path)
    done = move({"EVAL_WAREHOUSE": moved.database, "EVAL_LAKE_DATA_PATH": moved.data_path}, "--from", file.database)
    assert done.returncode == 0, done.stderr
    assert f"answers: {len(expected['answers'])}" in done.stdout
    assert every_row(moved) == expected

    # Through an export (how a file DuckDB 2.0 wrote reaches the team's DuckDB 1.4.4)
    exported = lake(catalogs, "lake_exported", tmp_path)
    done = move({"EVAL_WAREHOUSE": file.database}, "--export", str(tmp_path / "export"))
    assert done.returncode == 0, done.stderr
    done = move(
        {"EVAL_WAREHOUSE": exported.database, "EVAL_LAKE_DATA_PATH": exported.data_path},
        "--from",
        str(tmp_path / "export"),
    )
    assert done.returncode == 0, done.stderr
    assert every_row(exported) == expected

    # Into a lake that holds rows already: refused, nothing changed.
    done = move({"EVAL_WAREHOUSE": moved.database, "EVAL_LAKE_DATA_PATH": moved.data_path}, "--from", file.database)
    assert done.returncode != 0 and "already holds rows" in done.stderr and "'answers'" in done.stderr
    assert every_row(moved) == expected


def test_a_file_from_duckdb_2_says_how_to_move_it(catalogs, tmp_path):
    newer = tmp_path / "warehouse.duckdb"  # a file written by DuckDB 2.0.0
    with gzip.open(PROJECT_ROOT / "tests" / "data" / "duckdb_2_file.duckdb.gz") as packed, open(newer, "wb") as out:
        shutil.copyfileobj(packed, out)
    target = lake(catalogs, "lake_exported", tmp_path)
    done = move({"EVAL_WAREHOUSE": target.database, "EVAL_LAKE_DATA_PATH": target.data_path}, "--from", str(newer))
    assert done.returncode == 2
    assert "newer DuckDB" in done.stderr and "--export FOLDER" in done.stderr and str(newer) in done.stderr


@pytest.mark.parametrize(
    "catalog",
    [
        "ducklake:postgres:dbname=lake host=h user=u password=hunter2",
        "ducklake:postgres:postgresql://u:hunter2@h:5432/lake",
    ],
)
def test_a_catalog_string_with_a_password_is_refused_without_showing_it(catalog, tmp_path):
    with pytest.raises(ValueError, match="PGPASSWORD") as refused:
        with WarehouseResource(database=catalog, data_path=str(tmp_path)).get_connection():
            pass
    assert "hunter2" not in str(refused.value)


class RivalledStore(InputStore):
    """The inputs' store, with a write that another writer's commit interrupts `rivals` times."""

    rivals = 0

    @writes("raw_rows")
    def replace_raw_rows_against_a_rival(self, benchmark: str, rows: pd.DataFrame, rival) -> None:
        self.replace("raw_rows", rows, "benchmark = ?", [benchmark])
        if RivalledStore.rivals:
            RivalledStore.rivals -= 1
            rival()  # another host replaces the same partition and commits first


def test_a_conflicting_commit_is_retried_and_one_that_outlasts_its_retries_names_table_and_partition(
    catalogs, tmp_path
):
    warehouse = lake(catalogs, "lake_conflicts", tmp_path, commit_retries=2)
    with warehouse.store(InputStore) as store:
        replace_raw_rows(store, "arc_easy", 0)

    def rival():
        with warehouse.store(InputStore) as other:
            replace_raw_rows(other, "arc_easy", 2)

    RivalledStore.rivals = 2  # two conflicts, two retries: the third attempt commits
    with warehouse.store(RivalledStore) as store:
        store.replace_raw_rows_against_a_rival("arc_easy", raw_rows("arc_easy", 1), rival)
    with warehouse.store(InputStore) as store:
        assert store.rows("SELECT source, count(*) AS n FROM raw_rows GROUP BY source") == [
            {"source": "writer 1", "n": ROWS}
        ]

    RivalledStore.rivals = 3  # one more than the retries
    with warehouse.store(RivalledStore) as store, pytest.raises(CommitConflictError) as failure:
        store.replace_raw_rows_against_a_rival("arc_easy", raw_rows("arc_easy", 3), rival)
    assert "raw_rows" in str(failure.value) and "arc_easy" in str(failure.value) and "3 times" in str(failure.value)
    with warehouse.store(InputStore) as store:  # the rival's rows, whole: the failed write left nothing
        assert store.rows("SELECT source, count(*) AS n FROM raw_rows GROUP BY source") == [
            {"source": "writer 2", "n": ROWS}
        ]


def test_two_writers_of_an_empty_partition_leave_one_copy(catalogs, tmp_path):
    """DuckLake finds no conflict between two inserts: without the write's claim on its tables,
    both writers of a partition neither found would commit, and it would hold both copies."""
    warehouse = lake(catalogs, "lake_empty_partition", tmp_path)

    def rival():
        with warehouse.store(InputStore) as other:
            replace_raw_rows(other, "winogrande", 2)

    RivalledStore.rivals = 1
    with warehouse.store(RivalledStore) as store:
        store.replace_raw_rows_against_a_rival("winogrande", raw_rows("winogrande", 1), rival)
        assert RivalledStore.rivals == 0  # the rival did commit in the middle of the write
        assert store.rows(
            "SELECT source, count(*) AS n FROM raw_rows WHERE benchmark = 'winogrande' GROUP BY source"
        ) == [{"source": "writer 1", "n": ROWS}]


def test_a_partition_evaluated_twice_at_once_keeps_one_answer_per_request(catalogs, tmp_path, monkeypatch):
    """As when a step outlasts the broker's visibility timeout and a second worker runs it too: the
    second run found no answer stored, and the answers it computed replace the first run's instead of
    adding to them, as its samples replace the first run's (DuckLake has no primary key to refuse them)."""
    warehouse = lake(catalogs, "lake_twice", tmp_path)
    roster = roster_with(tmp_path / "roster", "smollm2", model="local/smollm2-135m-instruct", solvers=["harness"])
    assert materialize_benchmark(warehouse, "arc_easy", roster, "smollm2", limit=ROWS).success
    with warehouse.store(EvaluationStore) as store:
        first = store.rows("SELECT count(*) AS n, count(DISTINCT request_key) AS requests FROM answers")
    monkeypatch.setattr(EvaluationStore, "load_answers", lambda store, fingerprint: {})  # nothing stored yet
    result = materialize_evaluation(warehouse, "arc_easy", "smollm2", roster, assets=[benchmark_evaluation])
    assert result.success
    with warehouse.store(EvaluationStore) as store:
        assert store.rows(
            "SELECT count(*) AS n, count(DISTINCT request_key) AS requests, count(DISTINCT run_id) AS runs FROM answers"
        ) == [{**first[0], "runs": 1}]
        assert first[0]["n"] == first[0]["requests"] > ROWS  # a request per choice of each document
        assert store.rows("SELECT DISTINCT run_id FROM answers") == [{"run_id": result.run_id}]
        assert store.rows(
            "SELECT count(*) AS n, count(DISTINCT doc_id) AS documents, count(DISTINCT run_id) AS runs FROM samples"
        ) == [{"n": ROWS, "documents": ROWS, "runs": 1}]


def replace_repeatedly(catalog: str, data_path: str, copy: int, times: int) -> None:
    warehouse = WarehouseResource(database=catalog, data_path=data_path, commit_retries=20)
    for _ in range(times):
        with warehouse.store(InputStore) as store:
            replace_raw_rows(store, "arc_easy", copy)


def test_many_writers_replace_one_partition_while_readers_read_whole_versions_of_it(catalogs, tmp_path):
    warehouse = lake(catalogs, "lake_writers", tmp_path)
    with warehouse.get_connection():
        pass  # the lake's tables, before the writers race for them
    seen, stop = [], threading.Event()

    def read():
        while not stop.is_set():
            with warehouse.store(InputStore) as store:
                seen.append(store.rows("SELECT source, count(*) AS n FROM raw_rows GROUP BY source ORDER BY 1"))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        codes = in_processes(
            replace_repeatedly,
            [(warehouse.database, warehouse.data_path, copy, 10) for copy in range(4)],
            timeout_s=300,
        )
    finally:
        stop.set()
        reader.join(60)
    assert codes == [0, 0, 0, 0]
    with warehouse.store(InputStore) as store:
        final = store.rows("SELECT source, count(*) AS n FROM raw_rows GROUP BY source")
    assert len(final) == 1 and final[0]["n"] == ROWS
    # Every read saw one writer's partition whole (or none yet): never half of one, never two.
    assert seen and all(view == [] or (len(view) == 1 and view[0]["n"] == ROWS) for view in seen)


def on_catalog_server(catalogs, sql: str, *arguments) -> list[tuple]:
    """`sql`'s rows, run on the catalogs' PostgreSQL server."""
    import psycopg2

    server = next(iter(catalogs.values())).removeprefix("ducklake:postgres:").rsplit("/", 1)[0]
    with closing(psycopg2.connect(f"{server}/postgres")) as conn, conn.cursor() as cursor:
        cursor.execute(sql, arguments)
        return cursor.fetchall()


def catalog_backends(catalogs, name: str) -> set[int]:
    """The PostgreSQL backends serving the catalog `name`."""
    return {pid for (pid,) in on_catalog_server(catalogs, "SELECT pid FROM pg_stat_activity WHERE datname = %s", name)}


def read_partition(warehouse: WarehouseResource, source: str) -> None:
    with warehouse.store(InputStore) as store:
        assert store.rows("SELECT source, count(*) AS n FROM raw_rows GROUP BY source") == [
            {"source": source, "n": ROWS}
        ]


def read_in_a_child(warehouse: WarehouseResource, catalogs: dict, parents: set[int]) -> None:
    """Read the partition, then exit 0 only if the catalog has a backend of this child's own."""
    read_partition(warehouse, "writer 3")
    os._exit(0 if catalog_backends(catalogs, "lake_reattached") - parents else 1)


def test_a_process_attaches_the_lake_once_and_again_when_its_catalog_connections_drop(catalogs, tmp_path):
    warehouse = lake(catalogs, "lake_reattached", tmp_path)
    with warehouse.store(InputStore) as store:
        replace_raw_rows(store, "arc_easy", 1)
    attached = catalog_backends(catalogs, "lake_reattached")
    assert attached  # the attached catalog stays open between stores
    for copy in (2, 3):
        with warehouse.store(InputStore) as store:
            replace_raw_rows(store, "arc_easy", copy)
    assert catalog_backends(catalogs, "lake_reattached") == attached  # no store attached it again

    # A forked child (as a Celery worker's) attaches its own; the parent's attachment stays whole.
    child = multiprocessing.get_context("fork").Process(target=read_in_a_child, args=(warehouse, catalogs, attached))
    child.start()
    child.join(120)
    if child.is_alive():
        child.kill()
        child.join(10)
    assert child.exitcode == 0
    read_partition(warehouse, "writer 3")
    assert catalog_backends(catalogs, "lake_reattached") == attached

    # The catalog's connections drop (a server restart, an idle timeout): the next store attaches anew.
    on_catalog_server(
        catalogs, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", "lake_reattached"
    )
    read_partition(warehouse, "writer 3")
    assert catalog_backends(catalogs, "lake_reattached").isdisjoint(attached)

    # The resource's DuckDB config (`connection_config`) is its instance's.
    limited = lake(catalogs, "lake_reattached", tmp_path, connection_config={"memory_limit": "1GB"})
    with limited.store(InputStore) as store:
        assert store.rows("SELECT current_setting('memory_limit') AS memory_limit") == [{"memory_limit": "953.6 MiB"}]
