"""The README's SQL runs: every statement of its ```sql blocks, against a warehouse the main command
wrote (`eval-platform run`, as `make run` runs it, on each dataset's first rows)."""

import os
import re
import shutil
import sys
from pathlib import Path

import duckdb
import pytest

from tests.conftest import PROJECT_ROOT
from tests.processes import run_to_end

README = PROJECT_ROOT / "README.md"


def sql_statements() -> list[str]:
    """The README's SQL statements."""
    blocks = re.findall(r"```sql\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    return [s.strip() for block in blocks for s in block.split(";") if re.sub(r"--[^\n]*", "", s).strip()]


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
    command = [str(Path(sys.executable).with_name("eval-platform")), "run", "--limit", "3"]
    returncode, output = run_to_end(command, timeout_s=3600, cwd=PROJECT_ROOT, env=environment)
    assert returncode == 0, output[-3000:]
    return folder / "warehouse.duckdb"


def test_the_readme_has_its_sql_examples():
    statements = sql_statements()
    assert len(statements) >= 5 and any("FROM item_lineage" in s for s in statements)


@pytest.mark.parametrize("statement", sql_statements(), ids=lambda s: " ".join(s.split())[:60])
def test_every_readme_sql_statement_answers_on_the_main_commands_warehouse(statement, main_warehouse):
    with duckdb.connect(str(main_warehouse), read_only=True) as conn:
        rows = conn.execute(statement).fetchall()
    if any(source in statement for source in ABOUT_BAD_INPUT):
        assert rows == [], "the shipped data has no bad input"
    else:
        assert rows, "the main command fills what every README query reads"
