"""Shared fixtures: a temporary DuckDB warehouse and the real local model."""

import contextvars
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs the suite in two processes (pytest-xdist) on two cores: one thread each for
    # torch, and for the processes the tests start. Two threads each would oversubscribe the cores,
    # where OpenMP's spinning threads slowed the model's tests several times over.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# The team tests run in the team's install, as `make test` runs them (EVAL_TEAM_TESTS=1 .venv-team/...).
collect_ignore = [] if os.environ.get("EVAL_TEAM_TESTS") else ["team"]
DATA_BENCHMARKS = PROJECT_ROOT / "data" / "benchmarks"


# The longest test files, longest first: `make test` hands each of its two processes a file at a
# time in this order (`--no-loadscope-reorder`: not by their number of tests), and a long file
# started last would run on alone at the end.
LONGEST_FIRST = (
    "test_lm_eval_parity.py",
    "test_leaderboard_protocol.py",
    "test_readme.py",
    "test_harness_parity.py",
    "test_era_lifecycle.py",
    "test_viewer.py",
)


# The suite is laid out like the code: a folder per domain of the library (benchmarks, models,
# common, evolution, judging, blind, viewer), the code location's rules (code_location), the
# system tests (system: the main command, the docs, the UI in a browser), the fault injection
# (faults) and the team's setup (team). Each test is marked with its folder's name, so that
# `pytest -m judging` runs one domain; `slow` marks what the fast tier (`make test-fast`) leaves out.
FOLDER_MARKERS = ("benchmarks", "models", "common", "evolution", "judging", "blind", "viewer", "code_location",
                  "system", "faults", "team")  # fmt: skip
# Folders whose every test is slow: end to end, processes killed and resumed, servers started.
SLOW_FOLDERS = ("system", "faults", "team")


def pytest_collection_modifyitems(items):
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    for item in items:
        folder = item.path.parent.name
        if folder in FOLDER_MARKERS:
            item.add_marker(folder)
        if folder in SLOW_FOLDERS:
            item.add_marker("slow")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test runs in a context (contextvars) of its own. Dagster keeps the definitions-state
    storage of an open instance in a context variable; one left there by an earlier test, its
    instance gone, fails a later materialisation ("Attempted to resolve undefined DagsterInstance
    weakref"), depending on the order and timing of the tests (seen with tests in parallel
    processes). In a context of its own, no test sees what another left there, and a reset that
    comes late, from another test's context, clears the variable instead of restoring a stale one."""
    from _pytest.runner import runtestprotocol

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    contextvars.Context().run(runtestprotocol, item, nextitem=nextitem)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


@pytest.fixture(autouse=True)
def exports_folder(tmp_path, monkeypatch) -> Path:
    """Where the evaluations a test runs are exported (the model_evaluation job's inspect_log): its
    own folder, never the project's."""
    monkeypatch.setenv("EVAL_EXPORTS_DIR", str(tmp_path / "exports"))
    return tmp_path / "exports"


@pytest.fixture
def warehouse(tmp_path):
    from eval_platform.resources import WarehouseResource

    return WarehouseResource(database=str(tmp_path / "warehouse.duckdb"))


@pytest.fixture(scope="session")
def local_model():
    from eval_engine import DEFAULT_LOCAL_MODEL, load_local_model
    from eval_platform.environment import environment

    settings = environment()
    return load_local_model(DEFAULT_LOCAL_MODEL, settings.model_cache, torch_threads=settings.torch_threads)


@pytest.fixture(scope="module")
def zygote():
    """The tests' own processes (a killed run, an era), forked from a process that imported the
    heavy libraries once (tests/processes.py); stopped with its module's tests, so that nothing a
    module started runs on into another's."""
    from tests.processes import Zygote

    forker = Zygote(str(PROJECT_ROOT))
    yield forker
    forker.stop()


@pytest.fixture(scope="session", autouse=True)
def nothing_left_running():
    """The suite ends with no process it started still running."""
    yield
    from tests.processes import left_running

    leftovers = left_running()
    assert not leftovers, f"processes the tests started are still running: {leftovers}"
