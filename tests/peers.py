"""The peer tools' own code, run in interpreters of their own that never import the platform
(`make test` installs both): inspect_ai's (.venv-peers), a script of the tests' there with its JSON
read back; Every Eval Ever's (.venv-eee, Python 3.12), its own command line."""

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT_ROOT

PEER_PYTHON = PROJECT_ROOT / ".venv-peers" / "bin" / "python"
PEER_BIN = PEER_PYTHON.parent
EEE_PYTHON = PROJECT_ROOT / ".venv-eee" / "bin" / "python"
INSPECT_LOG_READER = PROJECT_ROOT / "tests" / "benchmarks" / "inspect_log_reader.py"  # read_eval_log's view


def require_peers(python: Path = PEER_PYTHON) -> None:
    """Skip (fail on CI) where the peer interpreter is not installed."""
    if not python.exists():
        reason = f"no peer interpreter at {python}: `make {python.parents[1].name}/...` (part of `make test`) makes it"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def peer_json(script: Path, *arguments: str, cwd: Path, timeout_s: float = 300) -> Any:
    """What `script` prints (JSON), run by the peer interpreter in `cwd` with `arguments`; `-I`: no
    PYTHONPATH and no script folder on its path, so nothing of the platform can be imported."""
    require_peers()
    done = subprocess.run(
        [str(PEER_PYTHON), "-I", str(script), *arguments],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=cwd,
        env={**os.environ, "INSPECT_LOG_DIR": str(cwd)},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)
