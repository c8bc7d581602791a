"""A dataset's inputs: its raw rows and few-shot rows as ingested, and its documents."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pandas as pd

from eval_platform.benchmarks.documents import Document, RowRejection
from eval_platform.benchmarks.store.schema import BenchmarkSchema
from eval_platform.common.ingestion import LoadedRows
from eval_platform.common.warehouse import reads, utc_now, writes

RAW_COLUMNS = ["source_row_id", "row_number", "line", "row_json"]
REJECTION_COLUMNS = ["source_row_id", "line", "row_json", "reason"]


def source_frames(
    benchmark: str, source: str, loaded: LoadedRows, unique_ids: bool = True
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows and rejections of a loaded source, with the file and line of each; with `unique_ids`, a
    repeated id is rejected (its row keeps its position, so later rows' positions are the source's)."""
    now, seen, rows, rejected = utc_now(), set(), [], []
    for number, ((row_id, row), line) in enumerate(zip(loaded.rows, loaded.lines, strict=True)):
        text = json.dumps(row, default=str, ensure_ascii=False)
        if unique_ids and row_id in seen:
            rejected.append([row_id, line, text, "duplicate source row id"])
        else:
            rows.append([row_id, number, line, text])
        seen.add(row_id)
    rejected += [[None, r.line, r.text, r.reason] for r in loaded.rejected]
    return (
        pd.DataFrame(rows, columns=RAW_COLUMNS).assign(benchmark=benchmark, source=source, ingested_at=now),
        pd.DataFrame(rejected, columns=REJECTION_COLUMNS).assign(benchmark=benchmark, source=source, rejected_at=now),
    )


class InputStore(BenchmarkSchema):
    @writes("raw_rows", "ingest_rejections")
    def replace_raw_rows(self, benchmark: str, source: str, loaded: LoadedRows) -> tuple[int, pd.DataFrame]:
        """The benchmark's rows and rejections from a source: rows stored, and the rejections."""
        rows, rejected = source_frames(benchmark, source, loaded)
        self.replace_together("benchmark = ?", [benchmark], raw_rows=rows, ingest_rejections=rejected)
        return len(rows), rejected

    @writes("fewshot_rows", "fewshot_rejections")
    def replace_fewshot_rows(
        self, benchmark: str, source: str | None, loaded: LoadedRows | None
    ) -> tuple[int, pd.DataFrame]:
        """The benchmark's few-shot pool in order (every row kept, as the harness keeps it; none
        without a source): rows stored, and the rejections."""
        rows, rejected = source_frames(benchmark, source or "", loaded or LoadedRows(), unique_ids=False)
        self.replace_together("benchmark = ?", [benchmark], fewshot_rows=rows, fewshot_rejections=rejected)
        return len(rows), rejected

    @reads("raw_rows")
    def load_raw_rows(self, benchmark: str) -> list[tuple[str, Mapping[str, object]]]:
        """(source row id, row) in source order."""
        return [
            (row_id, json.loads(text))
            for row_id, text in self.sql(
                "SELECT source_row_id, row_json FROM raw_rows WHERE benchmark = ? ORDER BY row_number", [benchmark]
            ).fetchall()
        ]

    @reads("fewshot_rows")
    def load_fewshot_rows(self, benchmark: str) -> list[tuple[str, Mapping[str, object]]]:
        return [
            (row_id, json.loads(text))
            for row_id, text in self.sql(
                "SELECT source_row_id, row_json FROM fewshot_rows WHERE benchmark = ? ORDER BY row_number",
                [benchmark],
            ).fetchall()
        ]

    @writes("documents", "document_rejections")
    @reads("raw_rows")
    def replace_documents(
        self, benchmark: str, documents: Sequence[Document], rejected: Sequence[RowRejection]
    ) -> None:
        """The benchmark's documents (numbered as their rows), and the rows rejected, with their text."""
        frame = pd.DataFrame([d.as_row() for d in documents], columns=list(Document.__dataclass_fields__))
        rejections = pd.DataFrame(
            [[r.benchmark, r.source_row_id, r.reason] for r in rejected],
            columns=["benchmark", "source_row_id", "reason"],
        ).assign(rejected_at=utc_now())
        self.sql("DELETE FROM documents WHERE benchmark = ?", [benchmark])
        self.sql("DELETE FROM document_rejections WHERE benchmark = ?", [benchmark])
        self.insert(
            "documents",
            frame,
            "incoming.*, (SELECT r.row_number FROM raw_rows r WHERE r.benchmark = incoming.benchmark "
            "AND r.source_row_id = incoming.source_row_id) AS row_number",
        )
        self.insert(
            "document_rejections",
            rejections,
            "incoming.*, (SELECT r.row_json FROM raw_rows r WHERE r.benchmark = incoming.benchmark "
            "AND r.source_row_id = incoming.source_row_id) AS row_json",
        )

    @reads("documents")
    def load_documents(self, benchmark: str) -> list[Document]:
        """The benchmark's documents in source order."""
        return [
            Document(
                benchmark=row["benchmark"],
                document_id=row["document_id"],
                source_row_id=row["source_row_id"],
                task=row["task"],
                doc=json.loads(row["doc"]),
                system_prompt=row["system_prompt"],
                user_prompt=row["user_prompt"],
                labels=tuple(row["labels"]),
                choices=tuple(row["choices"]),
                real_answer=row["real_answer"],
            )
            for row in self.rows(
                "SELECT * EXCLUDE (row_number) FROM documents WHERE benchmark = ? ORDER BY row_number, source_row_id",
                [benchmark],
            )
        ]

    @reads("ingest_rejections", "document_rejections", "documents")
    def reject_rates_above(self, threshold: float) -> list[tuple]:
        """Benchmarks whose rejected rows (ingest and documents) exceed `threshold` of their rows."""
        return self.sql(
            """
            WITH counts AS (
                SELECT benchmark, count(*) AS rejected, 0 AS kept FROM ingest_rejections GROUP BY benchmark
                UNION ALL SELECT benchmark, count(*), 0 FROM document_rejections GROUP BY benchmark
                UNION ALL SELECT benchmark, 0, count(*) FROM documents GROUP BY benchmark)
            SELECT benchmark, sum(rejected) AS rejected, sum(kept) AS kept,
                   round(sum(rejected) / (sum(rejected) + sum(kept)), 4) AS reject_rate
            FROM counts GROUP BY benchmark HAVING sum(rejected) / (sum(rejected) + sum(kept)) > ?""",
            [threshold],
        ).fetchall()
