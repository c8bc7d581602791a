"""The team tests (tests/team/) pass in the team's install, `.venv-team`, which `make test` builds:
its DuckDB (1.4.4, for the DuckLake extension) cannot share this process's. They run here, as one
test in a process of their own, so that they run beside the rest of the suite."""

import os
import re

from tests.conftest import PROJECT_ROOT
from tests.processes import run_to_end

TEAM_PYTHON = PROJECT_ROOT / ".venv-team" / "bin" / "python"


def test_the_team_tests_pass_in_the_teams_install():
    assert TEAM_PYTHON.exists(), f"{TEAM_PYTHON} is missing: `make test` builds it (the `team` extra)"
    environment = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    # a bound for a hang, far above the minutes they take
    returncode, output = run_to_end([str(TEAM_PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/team"],
                                    timeout_s=1800, grace_s=10, cwd=PROJECT_ROOT,
                                    env={**environment, "EVAL_TEAM_TESTS": "1"})
    print(output)
    summary = output.strip().splitlines()[-1]
    assert returncode == 0, output[-6000:]
    assert re.fullmatch(r"=* ?\d+ passed( in|,).*", summary) and "skipped" not in summary, summary
