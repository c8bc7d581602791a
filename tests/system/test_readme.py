"""The documented SQL runs: every statement of the ```sql blocks of the README and of the docs, against
a warehouse the main command wrote (`eval-platform run`, as `make run` runs it, on each benchmark's
first rows), on version 10's tables. And what that command prints at its end: one screen, its
figures those of the warehouse, no library noise."""

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
DOCUMENTS = [README, *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]
# Version 9's tables and views, which version 10 replaced: no example may read them.
OLD_TABLES = (
    "prompts", "prompt_rejections", "harness_requests", "predictions", "prediction_runs", "model_evaluations",
    "item_scores", "scores", "score_history", "model_comparisons", "protocol_results", "harness_answers",
    "harness_samples", "harness_runs", "harness_history", "harness_results", "harness_comparisons",
    "normalized_scores", "score_lineage", "harness_lineage",
)  # fmt: skip


def sql_statements(*documents) -> list[str]:
    """The statements of the documents' SQL blocks (each block split at its semicolons)."""
    blocks = [
        block
        for document in documents or DOCUMENTS
        for block in re.findall(r"```sql\n(.*?)```", document.read_text(encoding="utf-8"), flags=re.S)
    ]
    return [s.strip() for block in blocks for s in block.split(";") if re.sub(r"--[^\n]*", "", s).strip()]


# Statements that list bad input: nothing in the shipped data is bad, so they answer no rows.
ABOUT_BAD_INPUT = ("FROM rejected_rows", "FROM blind_sheet_problems")
ABOUT_IMPORTS = "JOIN import_lineage"  # the main command imports nothing: tests/benchmarks/test_imports.py asks them


@pytest.fixture(scope="module")
def main_warehouse(tmp_path_factory):
    """The main command's warehouse: every declared benchmark on its first 3 rows, the roster, the
    protocols and leaderboard, the era and the blind demo."""
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
    (folder / "output.txt").write_text(output)
    return folder / "warehouse.duckdb"


def test_the_main_command_ends_with_one_screen_of_the_warehouses_figures(main_warehouse):
    output = (main_warehouse.parent / "output.txt").read_text()
    summary = output[output.index("\nSummary of ") + 1 :].splitlines()
    assert summary[0] == f"Summary of {main_warehouse} (first 3 documents)"
    assert len(summary) <= 40 and max(map(len, summary)) <= 120, "one screen: 40 lines of 120 columns"
    assert "nanobind" not in output and "leaked" not in output  # nothing after the last line
    with duckdb.connect(str(main_warehouse), read_only=True) as conn:
        headlines = conn.execute("SELECT benchmark, model, value, ci_low, ci_high FROM leaderboard").fetchall()
        best = conn.execute("SELECT era, max(max_fitness) FROM generation_stats GROUP BY era").fetchall()
        kappas = conn.execute("SELECT judge, kappa FROM judge_vs_human WHERE kappa IS NOT NULL").fetchall()
    for benchmark, model, value, low, high in headlines:  # each on its benchmark's line, as the table holds it
        line = next(line for line in summary if line.startswith(f"  {benchmark} "))
        assert (f"{value:.3f} [{low:.3f}, {high:.3f}]" if low is not None else f"{value:.3f}") in line, (model, line)
    for era, fitness in best:
        assert any(f"era {era}: best fitness {fitness:.4f}" in line for line in summary)
    judged = " ".join(summary[[line.startswith("Judges against") for line in summary].index(True) :])
    assert all(f"{round(kappa, 3):.2f}" in judged for _, kappa in kappas)  # the table's three digits, shown two
    assert "Blind evaluation: " in output and "eval-platform results" in summary[-2]


def test_the_readme_has_its_sql_examples_on_version_10s_tables():
    statements = sql_statements(README)
    assert len(statements) >= 5
    for table in ("leaderboard_wide", "results", "item_lineage", "comparisons", "samples", "answers"):
        assert any(re.search(rf"\b{table}\b", s) for s in statements), table
    every = sql_statements()
    assert len(every) >= 25, "the docs' examples (tables, evolution, blind evaluation, guides)"
    old = [(t, s[:60]) for s in every for t in OLD_TABLES if re.search(rf"\bFROM {t}\b|\bJOIN {t}\b", s)]
    assert not old, f"examples reading version 9's tables: {old}"


@pytest.mark.parametrize("statement", sql_statements(), ids=lambda s: " ".join(s.split())[:60])
def test_every_documented_sql_statement_answers_on_the_main_commands_warehouse(statement, main_warehouse):
    with duckdb.connect(str(main_warehouse), read_only=True) as conn:
        rows = conn.execute(statement).fetchall()
    if any(source in statement for source in ABOUT_BAD_INPUT):
        assert rows == [], "the shipped data has no bad input"
    elif ABOUT_IMPORTS in statement:
        assert rows == [], "the main command imports nothing"
    else:
        assert rows, "the main command fills what every documented query reads"
