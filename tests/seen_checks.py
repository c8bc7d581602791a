"""A pytest plugin (`-p tests.seen_checks`, with EVAL_SEEN_CHECKS=<file>) that records every asset
check result that fails while a test runs: a JSON line each, the check's name (the code location's
check whose function is on the stack when its result is made) and the test. Every check's result is
made by `eval_platform.evaluation_assets.checks.check_result`, whether Dagster runs the check or a test calls it,
so the plugin wraps the `AssetCheckResult` that function makes."""

import inspect
import json
import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def record_failed_checks(monkeypatch):
    import eval_platform.evaluation_assets.checks as made_by
    from eval_platform.definitions import defs

    names = {key.name for key in defs().resolve_asset_graph().asset_check_keys}
    make = made_by.AssetCheckResult
    record = Path(os.environ["EVAL_SEEN_CHECKS"])

    def recording(**fields):
        result = make(**fields)
        if not result.passed:
            frames = (frame.function for frame in inspect.stack())
            check = next((name for name in frames if name in names), None)
            test = os.environ["PYTEST_CURRENT_TEST"].rsplit(" ", 1)[0]
            with record.open("a") as lines:
                lines.write(json.dumps({"check": check, "test": test}) + "\n")
        return result

    monkeypatch.setattr(made_by, "AssetCheckResult", recording)
