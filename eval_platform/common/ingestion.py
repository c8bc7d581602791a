"""Reading rows from local files or the Hugging Face hub, keeping what cannot be read.

JSON Lines and CSV files are read record by record, so a bad record (invalid JSON, bytes that are
not UTF-8, an array where an object belongs, a CSV record with the wrong number of fields, a field
longer than `MAX_FIELD_CHARS`) is rejected with its line number and reason while every good record
still loads. Parquet and whole-file JSON go through `datasets.load_dataset`, as do hub ids.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOCAL_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
MAX_FIELD_CHARS = 20_000  # longer than any benchmark field, and than a small model's context
KEPT_CHARS = 2_000  # how much of a rejected record is kept


class DataFileError(RuntimeError):
    """A data source that is missing, empty or cannot be read at all; the message names it."""


@dataclass(frozen=True)
class Rejection:
    line: int | None  # 1-based line of the file, where the source has lines
    text: str  # what was read (cut to KEPT_CHARS characters)
    reason: str


@dataclass
class LoadedRows:
    """(source_row_id, row) pairs in source order, and what could not be read."""

    rows: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lines: list[int | None] = field(default_factory=list)  # the line of each row, where known
    rejected: list[Rejection] = field(default_factory=list)

    def add(self, row: Any, line: int | None, text: str | None = None) -> None:
        """Keep a record that parsed as `row` (read as `text`), or reject it with the reason."""
        reason = row_problem(row)
        if reason:
            text = json.dumps(row, default=str, ensure_ascii=False) if text is None else text
            self.rejected.append(Rejection(line, text[:KEPT_CHARS], reason))
            return
        self.rows.append((_row_id(row, len(self.rows)), row))
        self.lines.append(line)


def not_an_object(record: object) -> str | None:
    """Why a parsed record is not one row's object, or None."""
    return None if isinstance(record, dict) else f"a JSON {type(record).__name__} where an object (one row) belongs"


def row_problem(row: Any) -> str | None:
    """Why a parsed record cannot be a row (not an object; a field that is too long), or None."""
    if problem := not_an_object(row):
        return problem
    for name, value in row.items():
        length = _longest_text(value)
        if length > MAX_FIELD_CHARS:
            return f"field {name!r} holds {length:,} characters (limit {MAX_FIELD_CHARS:,})"
    return None


def _longest_text(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return max(map(_longest_text, value.values()), default=0)
    if isinstance(value, (list, tuple)):
        return max(map(_longest_text, value), default=0)
    return 0


def is_local_source(source: str) -> bool:
    return Path(source).suffix.lower() in LOCAL_BUILDERS or Path(source).exists()


def load_rows(
    source: str, hub_name: str | None = None, hub_split: str | None = None, limit: int | None = None
) -> LoadedRows:
    """Rows of a local JSONL/JSON/Parquet/CSV file or a hub dataset (`hub_name`, `hub_split`). A
    row's id is its own `id` field where it has one, else its position among the rows read."""
    if is_local_source(source):
        path = Path(source)
        if not path.is_file():
            raise DataFileError(f"Data file not found: {path}")
        suffix = path.suffix.lower()
        builder = LOCAL_BUILDERS.get(suffix)
        if builder is None:
            raise DataFileError(f"Unsupported data file type {path.suffix!r}: {path}")
        readers = {".jsonl": _jsonl, ".csv": _csv}
        loaded = (
            readers[suffix](path, limit)
            if suffix in readers
            else _dataset(
                lambda datasets: datasets.load_dataset(builder, data_files=str(path), split="train"), path, limit
            )
        )
        if not loaded.rows and not loaded.rejected:
            raise DataFileError(f"Data file is empty: {path}")
        return loaded
    return _dataset(lambda datasets: datasets.load_dataset(source, hub_name, split=hub_split), source, limit)


def _row_id(row: Mapping[str, object], position: int) -> str:
    return str(row.get("id") or f"row-{position}")


def _decoded_lines(path: Path, rejected: list[Rejection]) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line that is UTF-8; the others are rejected."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as error:
                rejected.append(
                    Rejection(
                        number,
                        raw[:KEPT_CHARS].decode("utf-8", "replace"),
                        f"not UTF-8: byte 0x{raw[error.start]:02x} at column {error.start + 1}",
                    )
                )


def jsonl_records(path: Path, rejected: list[Rejection]) -> Iterator[tuple[object, int, str]]:
    """(parsed record, line number, text) of each non-blank line of a JSON Lines file, read as it is
    pulled; a line that is not UTF-8 or not JSON is added to `rejected` instead."""
    for number, text in _decoded_lines(path, rejected):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            rejected.append(Rejection(number, text[:KEPT_CHARS], f"invalid JSON: {error.msg} at column {error.colno}"))
            continue
        yield record, number, text


def _jsonl(path: Path, limit: int | None) -> LoadedRows:
    loaded = LoadedRows()
    records = jsonl_records(path, loaded.rejected)
    while limit is None or len(loaded.rows) < limit:
        record = next(records, None)
        if record is None:
            break
        loaded.add(*record)
    return loaded


def _csv(path: Path, limit: int | None) -> LoadedRows:
    """A CSV file with a header line. Values stay text, except a cell holding a JSON list or object
    (such as ARC's `choices`), which is decoded. A record is rejected when its number of fields is
    not the header's; a header with a blank or repeated column name refuses the file."""
    loaded = LoadedRows()
    lines = list(_decoded_lines(path, loaded.rejected))
    reader = csv.reader(io.StringIO("".join(text for _, text in lines), newline=""))
    numbers = [number for number, _ in lines]
    header = next(reader, None)
    if header is None:
        return loaded
    names = [name.strip() for name in header]
    blank = [i + 1 for i, name in enumerate(names) if not name]
    repeated = sorted({name for name in names if name and names.count(name) > 1})
    if blank or repeated:
        problems = ([f"column {', '.join(map(str, blank))} has no name"] if blank else []) + (
            [f"column(s) {', '.join(repeated)} repeated"] if repeated else []
        )
        raise DataFileError(f"{path} line {numbers[0]}: unusable CSV header ({'; '.join(problems)})")
    end = reader.line_num
    for values in reader:
        if limit is not None and len(loaded.rows) >= limit:
            break
        start, end = end + 1, reader.line_num
        line = numbers[start - 1] if start - 1 < len(numbers) else None
        text = ",".join(values)
        if not any(v.strip() for v in values):
            continue
        if len(values) != len(names):
            loaded.rejected.append(
                Rejection(line, text[:KEPT_CHARS], f"{len(values)} fields where the header has {len(names)}")
            )
            continue
        loaded.add({name: _cell(value) for name, value in zip(names, values, strict=False)}, line, text)
    return loaded


def _cell(value: str) -> object:
    if value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            pass
    return value


def _dataset(load, label: Path | str, limit: int | None) -> LoadedRows:
    import datasets

    datasets.disable_progress_bars()
    try:
        dataset = load(datasets)
    except FileNotFoundError as error:
        raise DataFileError(f"Data source not found: {label} ({error})") from error
    except Exception as error:  # datasets raises many types for unreadable sources
        raise DataFileError(f"Cannot read data source {label}: {type(error).__name__}: {error}") from error
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    loaded = LoadedRows()
    for row in dataset:
        loaded.add(row, None)
    return loaded
