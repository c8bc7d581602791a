"""The README's SQL runs: every statement of its ```sql blocks, against a warehouse the main command
wrote (`python -m jobs.run_all`, as `make run` runs it, on each benchmark's first rows)."""

import os
import re
import shutil
import sys

import duckdb
import pytest

from tests.conftest import PROJECT_ROOT
from tests.processes import run_to_end

README = PROJECT_ROOT / "README.md"


# What the Open LLM Leaderboard v2 run of the main command writes, its tables and the wide leaderboard's
# v2 columns (its statements are run on that command's warehouse in tests/test_harness_tasks.py)
HARNESS_SOURCES = (
    "harness_samples",
    "harness_results",
    "harness_history",
    "harness_lineage",
    "normalized_scores",
    "open_llm_leaderboard_v2",
)


def sql_statements(harness: bool | None = None) -> list[str]:
    """The README's SQL statements; `harness`: only those that read (True) or do not read (False) the
    v2 run's tables and columns (HARNESS_SOURCES)."""
    blocks = re.findall(r"```sql\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    statements = [s.strip() for block in blocks for s in block.split(";") if re.sub(r"--[^\n]*", "", s).strip()]
    return [s for s in statements if harness is None or any(source in s for source in HARNESS_SOURCES) == harness]


# Statements that list bad input: nothing in the shipped data is bad, so they answer no rows.
ABOUT_BAD_INPUT = ("FROM rejected_rows", "FROM blind_sheet_problems")


@pytest.fixture(scope="module")
def main_warehouse(tmp_path_factory):
    """The main command's warehouse: its jobs, era and blind demo, on the first 3 rows of each benchmark."""
    folder = tmp_path_factory.mktemp("main")
    shutil.copytree(
        PROJECT_ROOT / "data" / "blind_eval", folder / "blind_eval", ignore=shutil.ignore_patterns("issued", "*.xlsx")
    )
    (folder / "home").mkdir()
    environment = {
        **os.environ,
        "EVAL_WAREHOUSE": str(folder / "warehouse.duckdb"),
        "DAGSTER_HOME": str(folder / "home"),
        "EVAL_BLIND_DIR": str(folder / "blind_eval"),
    }
    # a bound for a hang, far above the minutes it takes
    returncode, output = run_to_end(
        [sys.executable, "-m", "jobs.run_all", "--limit", "3"], timeout_s=3600, cwd=PROJECT_ROOT, env=environment
    )
    assert returncode == 0, output[-3000:]
    return folder / "warehouse.duckdb"


def test_the_readme_has_its_sql_examples():
    statements = sql_statements()
    assert len(statements) >= 13 and any("FROM score_lineage" in s for s in statements)


@pytest.mark.parametrize("statement", sql_statements(harness=False), ids=lambda s: " ".join(s.split())[:60])
def test_every_readme_sql_statement_answers_on_the_main_commands_warehouse(statement, main_warehouse):
    with duckdb.connect(str(main_warehouse), read_only=True) as conn:
        rows = conn.execute(statement).fetchall()
    if any(source in statement for source in ABOUT_BAD_INPUT):
        assert rows == [], "the shipped data has no bad input"
    else:
        assert rows, "the main command fills what every README query reads"
