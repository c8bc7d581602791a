"""The sample viewer on a team's lake (a DuckLake catalog on PostgreSQL): attached read-only, so no
statement of a page can write, and its pages' reads (positions, two models, paired statistics,
search) as on a file."""

import duckdb
import pytest

from eval_platform.common.connections import ATTACHED_LAKES
from eval_platform.viewer.queries import benchmarks as queries
from eval_platform.viewer.queries.benchmarks import ItemQuery, Side
from eval_platform.viewer.warehouse import Reader, WarehouseSource
from tests import synthetic_evaluations as data
from tests.team.postgres_server import postgres_server

DOCUMENTS = 200


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    with postgres_server(("lake_viewer",)) as url:
        catalog, data_path = (
            f"ducklake:postgres:{url.rsplit('/', 1)[0]}/lake_viewer",
            str(tmp_path_factory.mktemp("lake")),
        )
        data.write(catalog, DOCUMENTS, data_path=data_path)
        reader = Reader(WarehouseSource(catalog, data_path))
        yield reader
        reader.close()
        ATTACHED_LAKES.close()


def test_the_viewer_reads_a_lake_and_cannot_write_it(reader):
    a = Side(data.MODELS[1], data.SETTINGS_KEY, data.SOLVER, "strict-match")
    b = Side(data.MODELS[0], data.SETTINGS_KEY, data.SOLVER, "strict-match")
    right_a = {d for d in range(DOCUMENTS) if data.is_right(a.model, d, 0)}
    right_b = {d for d in range(DOCUMENTS) if data.is_right(b.model, d, 0)}
    with reader.reading() as conn:
        page = queries.items(conn, data.BENCHMARK, a, b, ItemQuery("exact_match", flipped="to_wrong"), size=500)
        found = queries.items(conn, data.BENCHMARK, a, None, ItemQuery("exact_match", search="(problem 123)"))
        with pytest.raises(duckdb.Error, match="read-only"):
            conn.execute("DELETE FROM samples")
    assert {row.task for row in found.rows} == {data.TASKS[123 % len(data.TASKS)]} and found.total == 1
    flipped = {data.TASKS.index(row.task) + row.doc_id * len(data.TASKS) for row in page.rows}
    assert flipped == right_b - right_a and page.total == len(flipped)
    assert page.pooled is not None and (page.pooled.only_a, page.pooled.only_b) == (
        len(right_a - right_b),
        len(right_b - right_a),
    )
