"""Shared fixtures: a temporary DuckDB warehouse and the real local model."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# The team tests run in the team's install, as `make test` runs them (EVAL_TEAM_TESTS=1 .venv-team/...).
collect_ignore = [] if os.environ.get("EVAL_TEAM_TESTS") else ["team"]
DATA_BENCHMARKS = PROJECT_ROOT / "data" / "benchmarks"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Each test starts with no Dagster instance's definitions-state storage in context: a storage
    left there by an instance an earlier test opened outlives that instance, and the next
    materialisation in the same process then fails on its dead weak reference, depending on the
    order the tests ran in."""
    from dagster._core.storage.defs_state.base import _current_storage

    _current_storage.set(None)


@pytest.fixture
def warehouse(tmp_path):
    from eval_platform.common.resources import WarehouseResource

    return WarehouseResource(database=str(tmp_path / "warehouse.duckdb"))


@pytest.fixture(scope="session")
def local_model():
    from eval_platform.common.models.local import load_local_model

    return load_local_model()


@pytest.fixture(scope="session", autouse=True)
def nothing_left_running():
    """The suite ends with no process it started still running."""
    yield
    from tests.processes import left_running

    leftovers = left_running()
    assert not leftovers, f"processes the tests started are still running: {leftovers}"
