"""Reading benchmark rows with `datasets.load_dataset`, from local files or the Hugging Face hub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eval_platform.core.benchmarks import BenchmarkSpec

LOCAL_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


class DataFileError(RuntimeError):
    """A data file that is missing or cannot be read; the message names it."""


def default_source(spec: BenchmarkSpec, data_dir: Path) -> str:
    return str(data_dir / "benchmarks" / spec.data_file)


def is_local_source(source: str) -> bool:
    return Path(source).suffix.lower() in LOCAL_BUILDERS or Path(source).exists()


def load_rows(
    spec: BenchmarkSpec, source: str, hub_config: str | None = None, split: str | None = None, limit: int | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(source_row_id, row) pairs. `source` is a local JSONL/JSON/Parquet/CSV file or a hub dataset id;
    the row id is the row's own `id` field where it has one, else its position in the source."""
    import datasets

    datasets.disable_progress_bars()
    if is_local_source(source):
        path = Path(source)
        if not path.is_file():
            raise DataFileError(f"Benchmark data file not found for {spec.name}: {path}")
        builder = LOCAL_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise DataFileError(f"Unsupported data file type {path.suffix!r} for {spec.name}: {path}")
        try:
            dataset = datasets.load_dataset(builder, data_files=str(path), split="train")
        except Exception as error:  # datasets raises several types for unreadable files
            raise DataFileError(f"Cannot read benchmark data file {path} for {spec.name}: {error}") from error
    else:
        dataset = datasets.load_dataset(
            source, hub_config if hub_config is not None else spec.hub_name, split=split or spec.hub_split
        )
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    return [(str(row.get("id") or f"row-{index}"), row) for index, row in enumerate(dataset)]
