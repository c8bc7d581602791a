"""The README's SQL runs: every statement of its ```sql blocks, against a warehouse the main command
wrote (`python -m jobs.run_all`, as `make run` runs it, on each benchmark's first rows)."""

import os
import re
import shutil
import subprocess
import sys

import duckdb
import pytest

from tests.conftest import PROJECT_ROOT
from tests.processes import STARTED

README = PROJECT_ROOT / "README.md"


def sql_statements() -> list[str]:
    blocks = re.findall(r"```sql\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    return [s.strip() for block in blocks for s in block.split(";") if re.sub(r"--[^\n]*", "", s).strip()]


@pytest.fixture(scope="module")
def main_warehouse(tmp_path_factory):
    """The main command's warehouse: its jobs, era and blind demo, on the first 3 rows of each benchmark."""
    folder = tmp_path_factory.mktemp("main")
    shutil.copytree(PROJECT_ROOT / "data" / "blind_eval", folder / "blind_eval",
                    ignore=shutil.ignore_patterns("issued", "*.xlsx"))
    (folder / "home").mkdir()
    environment = {**os.environ, "EVAL_WAREHOUSE": str(folder / "warehouse.duckdb"), "DAGSTER_HOME": str(folder / "home"),
                   "EVAL_BLIND_DIR": str(folder / "blind_eval")}
    process = subprocess.Popen([sys.executable, "-m", "jobs.run_all", "--limit", "3"], cwd=PROJECT_ROOT, env=environment,
                               start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    STARTED.append(process.pid)
    output, _ = process.communicate(timeout=1200)
    assert process.returncode == 0, output[-3000:]
    return folder / "warehouse.duckdb"


def test_the_readme_has_its_sql_examples():
    statements = sql_statements()
    assert len(statements) >= 13 and any("FROM score_lineage" in s for s in statements)


@pytest.mark.parametrize("statement", sql_statements(), ids=lambda s: " ".join(s.split())[:60])
def test_every_readme_sql_statement_runs_on_the_main_commands_warehouse(statement, main_warehouse):
    with duckdb.connect(str(main_warehouse), read_only=True) as conn:
        rows = conn.execute(statement).fetchall()
    if "FROM score_lineage" in statement or "FROM scores" in statement:
        assert rows, "the main command scores every benchmark"
