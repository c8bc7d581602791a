"""Shared fixtures: a temporary DuckDB warehouse and the real local model."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_BENCHMARKS = PROJECT_ROOT.parent / "shared" / "benchmarks"


@pytest.fixture
def warehouse(tmp_path):
    from resources import WarehouseResource

    return WarehouseResource(database=str(tmp_path / "warehouse.duckdb"))


@pytest.fixture(scope="session")
def local_model():
    from evaluation_logic.local_model import load_local_model

    return load_local_model()
