"""Reading benchmark rows from local files or the Hugging Face hub.

JSON Lines files are read line by line, so one malformed line (bad JSON, bytes that are not UTF-8,
an array where an object belongs) is rejected with its line number and reason while every good
line still loads. Parquet, CSV and whole-file JSON go through `datasets.load_dataset`, as do hub ids.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOCAL_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


class DataFileError(RuntimeError):
    """A data source that is missing, empty or cannot be read at all; the message names it."""


@dataclass(frozen=True)
class Rejection:
    line: int | None  # 1-based line of the file, where the source has lines
    text: str  # what was read (cut to 2,000 characters)
    reason: str


@dataclass
class LoadedRows:
    """(source_row_id, row) pairs in source order, and what could not be read."""

    rows: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    lines: list[int | None] = field(default_factory=list)  # the line of each row, where known
    rejected: list[Rejection] = field(default_factory=list)


def is_local_source(source: str) -> bool:
    return Path(source).suffix.lower() in LOCAL_BUILDERS or Path(source).exists()


def load_rows(source: str, hub_name: str | None = None, hub_split: str | None = None,
              limit: int | None = None) -> LoadedRows:
    """Rows of a local JSONL/JSON/Parquet/CSV file or a hub dataset (`hub_name`, `hub_split`). A
    row's id is its own `id` field where it has one, else its position among the rows read."""
    if is_local_source(source):
        path = Path(source)
        if not path.is_file():
            raise DataFileError(f"Data file not found: {path}")
        builder = LOCAL_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise DataFileError(f"Unsupported data file type {path.suffix!r}: {path}")
        loaded = _jsonl(path, limit) if path.suffix.lower() == ".jsonl" else _dataset(
            lambda datasets: datasets.load_dataset(builder, data_files=str(path), split="train"), path, limit)
        if not loaded.rows and not loaded.rejected:
            raise DataFileError(f"Data file is empty: {path}")
        return loaded
    return _dataset(lambda datasets: datasets.load_dataset(source, hub_name, split=hub_split), source, limit)


def _row_id(row: dict[str, Any], position: int) -> str:
    return str(row.get("id") or f"row-{position}")


def _jsonl(path: Path, limit: int | None) -> LoadedRows:
    loaded = LoadedRows()
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if limit is not None and len(loaded.rows) >= limit:
                break
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                loaded.rejected.append(Rejection(number, raw[:2000].decode("utf-8", "replace"),
                                                 f"not UTF-8: byte 0x{raw[error.start]:02x} at column {error.start + 1}"))
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as error:
                loaded.rejected.append(Rejection(number, text[:2000], f"invalid JSON: {error.msg} at column {error.colno}"))
                continue
            if not isinstance(row, dict):
                loaded.rejected.append(Rejection(number, text[:2000],
                                                 f"a JSON {type(row).__name__} where an object (one row) belongs"))
                continue
            loaded.rows.append((_row_id(row, len(loaded.rows)), row))
            loaded.lines.append(number)
    return loaded


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
    for position, row in enumerate(dataset):
        loaded.rows.append((_row_id(row, position), row))
        loaded.lines.append(None)
    return loaded
