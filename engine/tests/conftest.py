"""The engine's tests: the real default model (SmolLM2-135M-Instruct, converted once into the
engine's cache folder), tiny seeded models of the other families (eval_engine.tiny_models), and the
harness's prompts (prompt_fixtures.py). Nothing of the platform is imported."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # in the platform's `make test`, two processes on two cores: one torch thread each
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.is_relative_to(Path(__file__).parent):
            item.add_marker("engine")


@pytest.fixture(scope="session")
def local_model():
    from eval_engine import DEFAULT_CACHE_DIR, DEFAULT_LOCAL_MODEL, load_local_model

    return load_local_model(DEFAULT_LOCAL_MODEL, DEFAULT_CACHE_DIR)
