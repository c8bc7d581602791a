"""Hostile data files: every bad record is kept with its file, line and reason while every good
one lands; a file that cannot be read at all fails naming it and replaces nothing."""

import csv
import io
import json

import duckdb
import pytest
from dagster import DagsterInstance

from eval_platform.common.ingestion import MAX_FIELD_CHARS
from eval_platform.evaluation_assets.benchmarks.assets import benchmark_documents, benchmark_raw_rows
from eval_platform.evaluation_assets.evolution.assets import source_paragraphs
from eval_platform.resources import WarehouseResource
from tests.conftest import DATA_BENCHMARKS, PROJECT_ROOT
from tests.evaluation import materialize_configured, with_partitions

WINOGRANDE = [json.loads(line) for line in (DATA_BENCHMARKS / "winogrande.jsonl").read_text().strip().split("\n")[:4]]


def ingest(path, source, assets=(benchmark_raw_rows, benchmark_documents), benchmark="winogrande"):
    return materialize_configured(
        list(assets),
        {"warehouse": WarehouseResource(database=str(path))},
        {"benchmark_raw_rows": {"config": {"file": str(source)}}},
        partition_key=benchmark,
        instance=with_partitions(None, benchmark),
        raise_on_error=False,
    )


def query(path, sql):
    with duckdb.connect(str(path), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def line(row) -> bytes:
    return json.dumps(row).encode() + b"\n"


def test_every_bad_jsonl_line_is_kept_with_its_line_and_every_good_row_lands(tmp_path):
    good = [dict(row, id=f"w{i}") for i, row in enumerate(WINOGRANDE)]
    source = tmp_path / "winogrande.jsonl"
    source.write_bytes(
        b"".join(
            [
                line(good[0]),  # 1
                b'{"id": "broken", "sentence": "unterminated\n',  # 2 invalid JSON
                b'{"id": "latin1", "sentence": "caf\xe9 _", "option1": "a"}\n',  # 3 not UTF-8
                b"[1, 2, 3]\n",  # 4 an array
                b"\n",  # 5 blank: skipped
                line(dict(good[1], sentence="x" * 100_000 + " _")),  # 6 100,000 characters
                line(good[1]),  # 7
                line(dict(good[2], id="w1")),  # 8 id of line 7 again
                line({"id": "no-options", "sentence": "A _ sentence.", "answer": "1"}),  # 9 unparseable row
                line(good[3]),  # 10, no newline at the end
            ]
        ).rstrip(b"\n")
    )
    path = tmp_path / "warehouse.duckdb"
    assert ingest(path, source).success
    assert query(path, "SELECT source_row_id, line FROM raw_rows ORDER BY line") == [
        ("w0", 1),
        ("w1", 7),
        ("no-options", 9),
        ("w3", 10),
    ]
    assert query(path, "SELECT source_row_id FROM documents ORDER BY row_number") == [("w0",), ("w1",), ("w3",)]
    rejected = query(path, "SELECT stage, source, line, reason FROM rejected_rows ORDER BY line")
    assert [(stage, src, number) for stage, src, number, _ in rejected] == [
        ("ingest", str(source), n) for n in (2, 3, 4, 6, 8)
    ] + [("preprocess", str(source), 9)]
    reasons = [reason for *_, reason in rejected]
    assert reasons[0].startswith("invalid JSON")
    assert reasons[1] == "not UTF-8: byte 0xe9 at column 34"
    assert reasons[2] == "a JSON list where an object (one row) belongs"
    assert reasons[3] == f"field 'sentence' holds 100,002 characters (limit {MAX_FIELD_CHARS:,})"
    assert reasons[4] == "duplicate source row id"
    assert "option1" in reasons[5]
    kept = query(path, "SELECT max(length(row_json)) FROM ingest_rejections")[0][0]
    assert kept <= 2_000 + 10  # a rejected record is kept, cut short


def csv_text(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    return buffer.getvalue()


def test_csv_records_with_wrong_headers_or_field_counts_are_kept_with_their_lines(tmp_path):
    header = ["sentence", "option1", "option2", "answer"]
    records = [[r[k] for k in header] for r in WINOGRANDE]
    source = tmp_path / "winogrande.csv"
    source.write_text(
        csv_text(
            [
                header,
                records[0],
                records[1] + ["extra"],
                ["multi\nline _ sentence", "a", "b", "1"],
                records[2][:2],
                records[3],
            ]
        ),
        encoding="utf-8",
    )
    path = tmp_path / "warehouse.duckdb"
    assert ingest(path, source).success
    assert query(path, "SELECT line FROM raw_rows ORDER BY line") == [(2,), (4,), (7,)]  # line 4 runs on to 5
    assert query(path, "SELECT line, reason FROM ingest_rejections ORDER BY line") == [
        (3, "5 fields where the header has 4"),
        (6, "2 fields where the header has 4"),
    ]


def test_a_csv_whose_headers_name_other_fields_rejects_each_row_with_its_line(tmp_path):
    source = tmp_path / "winogrande.csv"
    source.write_text(
        csv_text(
            [["text", "first", "second", "label"]]
            + [[r["sentence"], r["option1"], r["option2"], r["answer"]] for r in WINOGRANDE]
        )
    )
    path = tmp_path / "warehouse.duckdb"
    assert ingest(path, source).success
    rejected = query(path, "SELECT stage, line, reason FROM rejected_rows ORDER BY line")
    assert rejected == [("preprocess", n, "missing field 'sentence'") for n in (2, 3, 4, 5)]
    assert query(path, "SELECT count(*) FROM documents") == [(0,)]


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "Data file is empty: {path}"),
        ("sentence,sentence,answer\na,b,1\n", "{path} line 1: unusable CSV header (column(s) sentence repeated)"),
        ("sentence,,answer\na,b,1\n", "{path} line 1: unusable CSV header (column 2 has no name)"),
        (None, "Data file not found: {path}"),
    ],
)
def test_a_file_that_cannot_be_read_fails_naming_it_and_replaces_nothing(tmp_path, content, message):
    path = tmp_path / "warehouse.duckdb"
    assert ingest(path, DATA_BENCHMARKS / "winogrande.jsonl").success
    before = query(path, "SELECT source_row_id FROM raw_rows ORDER BY ALL")
    source = tmp_path / ("hostile.csv" if content and "," in content else "hostile.jsonl")
    if content is not None:
        source.write_text(content)
    result = ingest(path, source, assets=[benchmark_raw_rows])
    assert not result.success
    error = next(e.event_specific_data.error for e in result.all_events if e.is_step_failure)
    errors = []
    while error is not None:
        errors.append(error.message)
        error = error.cause
    assert any(message.format(path=source) in e for e in errors), errors
    assert query(path, "SELECT source_row_id FROM raw_rows ORDER BY ALL") == before  # nothing lost


def test_hostile_paragraph_lines_are_kept_and_the_good_paragraphs_land(tmp_path):
    good = [
        json.loads(text)
        for text in (PROJECT_ROOT / "data" / "evolution" / "paragraphs.jsonl").read_text().split("\n")
        if text.strip()
    ]
    source = tmp_path / "paragraphs.jsonl"
    source.write_bytes(
        line(good[0])
        + b"{oops\n"
        + line({"paragraph_id": "empty", "text": " "})
        + line(dict(good[1], paragraph_id=good[0]["paragraph_id"]))
        + b"\xff\xfe\n"
        + line(good[1])
    )
    path = tmp_path / "warehouse.duckdb"
    result = materialize_configured(
        [source_paragraphs],
        {"warehouse": WarehouseResource(database=str(path))},
        {"source_paragraphs": {"config": {"source": str(source)}}},
        instance=DagsterInstance.ephemeral(),
    )
    assert result.success
    assert query(path, "SELECT paragraph_id FROM source_paragraphs ORDER BY 1") == sorted(
        [(good[0]["paragraph_id"],), (good[1]["paragraph_id"],)]
    )
    rejected = query(path, "SELECT line, reason FROM paragraph_rejections ORDER BY line")
    assert [n for n, _ in rejected] == [2, 3, 4, 5]
    assert rejected[1][1] == "missing text"
    assert rejected[2][1] == f"paragraph_id {good[0]['paragraph_id']!r} repeated (first at line 1)"
    assert rejected[3][1].startswith("not UTF-8")
