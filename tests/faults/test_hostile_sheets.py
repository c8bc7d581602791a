"""Hostile sheets: formulas and links in any cell, macro-enabled, encrypted, non-workbook, huge
and rearranged files are refused with every problem's cell, nothing is tallied from them, and the
issued sheet and its key never contain a formula, whatever the questions and answers start with."""

import csv
import os
import shutil
import zipfile

import pytest
from openpyxl import load_workbook

from eval_platform.blind import sheets
from eval_platform.blind.sheets import KEY_FILE, SHEET_FILE
from eval_platform.evaluation_assets.blind.assets import blind_eval_answers, blind_eval_questions, blind_eval_sheet
from tests.blind.test_blind_evaluation import fill, issued, tally  # noqa: F401 (issued is a fixture)
from tests.conftest import PROJECT_ROOT
from tests.evaluation import materialize_configured


def problems_of(path, key):
    rows, problems = sheets.read_filled_sheet(path, key)
    assert rows == [], "a sheet with problems must yield no rows"
    return [str(problem) for problem in problems]


def add_part(path, name, data=b"<x/>"):
    with zipfile.ZipFile(path, "a") as package:
        package.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)


def formula_parts(path):
    """Every worksheet part of a workbook that holds a formula element."""
    with zipfile.ZipFile(path) as package:
        return [
            name
            for name in package.namelist()
            if name.startswith("xl/worksheets/") and ("<f>" in (xml := package.read(name).decode()) or "<f " in xml)
        ]


def swap_rows(first, second):
    def edit(sheet):
        for column in range(1, len(sheets.SHEET_COLUMNS) + 1):
            a, b = sheet.cell(first, column), sheet.cell(second, column)
            a.value, b.value = b.value, a.value

    return edit


def swap_answer_columns(sheet):
    for row in range(1, sheet.max_row + 1):
        d, e = sheet.cell(row, 4), sheet.cell(row, 5)
        d.value, e.value = e.value, d.value


def in_rubric(cell, value):
    def edit(sheet):
        sheet.parent[sheets.RUBRIC_SHEET][cell] = value

    return edit


def set_cell(cell, value):
    def edit(sheet):
        sheet[cell] = value

    return edit


def link(cell, target):
    def edit(sheet):
        sheet[cell].hyperlink = target

    return edit


@pytest.mark.parametrize(
    "edit, expected",
    [
        (set_cell("F3", "=4+1"), "F3: holds a formula (=4+1)"),
        (set_cell("I4", "=SUM(F2:G6)"), "I4: holds a formula (=SUM(F2:G6))"),
        (in_rubric("D2", "=1+1"), "Rubric!D2: holds a formula (=1+1)"),
        (set_cell("I2", "='[budget.xlsx]Sheet1'!A1"), "I2: holds a formula (='[budget.xlsx]Sheet1'!A1)"),
        (link("I3", "https://example.invalid/steal"), "I3: holds a link (https://example.invalid/steal)"),
        (swap_rows(2, 3), "A2: question Q2 was issued in row 3: rows were moved"),
        (swap_answer_columns, "D1: column Answer_B was issued in column E: columns were moved"),
        (lambda sheet: sheet.insert_cols(3), "D1: column Ground_Truth was issued in column C: columns were moved"),
        (set_cell("J1", "Reviewer"), "J1: column 'Reviewer' was not issued"),
    ],
)
def test_sheets_with_formulas_links_or_moved_cells_are_refused_by_cell(issued, edit, expected):  # noqa: F811
    folder, key = issued
    assert expected in problems_of(fill(folder, key, "mallory", edit=edit), key)


def test_a_formula_is_refused_even_where_its_cached_value_is_a_valid_score(issued):  # noqa: F811
    folder, key = issued
    path = fill(folder, key, "mallory", edit=set_cell("F2", "=5"))
    assert "F2: holds a formula (=5)" in problems_of(path, key)


def test_an_external_link_part_is_refused(issued):  # noqa: F811
    folder, key = issued
    path = fill(folder, key, "mallory")
    add_part(path, "xl/externalLinks/externalLink1.xml")
    assert problems_of(path, key) == ["mallory.xlsx links to another workbook (xl/externalLinks/externalLink1.xml)"]


def test_macro_workbooks_are_refused(issued):  # noqa: F811
    folder, key = issued
    path = fill(folder, key, "mallory")
    macro_enabled = path.with_suffix(".xlsm")
    shutil.copy(path, macro_enabled)
    assert problems_of(macro_enabled, key) == [
        "mallory.xlsm is a macro-enabled workbook (.xlsm); save the sheet as .xlsx"
    ]
    add_part(path, "xl/vbaProject.bin", b"\x00" * 64)
    assert problems_of(path, key) == ["mallory.xlsx contains macros (xl/vbaProject.bin)"]


def test_an_encrypted_workbook_is_refused(issued):  # noqa: F811
    from msoffcrypto.format.ooxml import OOXMLFile

    folder, key = issued
    plain = fill(folder, key, "mallory")
    encrypted = plain.with_name("locked.xlsx")
    with plain.open("rb") as source, encrypted.open("wb") as target:
        OOXMLFile(source).encrypt("s3cret", target)
    assert problems_of(encrypted, key) == [
        "locked.xlsx is encrypted (password-protected) or a legacy .xls file; save it as an unprotected .xlsx"
    ]


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"Question_ID,Score_A\nQ1,5\n", "is not a readable .xlsx workbook (not a zip package)"),
        (b"", "is not a readable .xlsx workbook (not a zip package)"),
    ],
)
def test_files_that_are_not_workbooks_are_refused(issued, content, expected):  # noqa: F811
    folder, key = issued
    path = folder / "filled" / "mallory.xlsx"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content)
    assert problems_of(path, key) == [f"mallory.xlsx {expected}"]


def test_a_zip_that_is_not_a_workbook_is_refused(issued):  # noqa: F811
    folder, key = issued
    path = folder / "filled" / "mallory.xlsx"
    path.parent.mkdir(exist_ok=True)
    with zipfile.ZipFile(path, "w") as package:
        package.writestr("notes.txt", "hello")
    assert problems_of(path, key) == ["mallory.xlsx is not a readable .xlsx workbook (KeyError)"]


def test_a_workbook_without_the_scoring_sheet_is_refused(issued):  # noqa: F811
    folder, key = issued

    def rename(sheet):
        sheet.title = "Scores"

    assert problems_of(fill(folder, key, "mallory", edit=rename), key) == ["mallory.xlsx has no 'Scoring' sheet"]


def test_huge_sheets_are_refused_before_they_are_loaded(issued):  # noqa: F811
    folder, key = issued
    path = fill(folder, key, "mallory", edit=set_cell("I200000", "far away"))
    assert problems_of(path, key) == [f"mallory.xlsx: the Scoring sheet has more than {sheets.MAX_SHEET_ROWS:,} rows"]


def test_a_sheet_over_5_mb_or_unpacking_to_over_40_mb_is_refused_unopened(issued):  # noqa: F811
    folder, key = issued
    large = fill(folder, key, "mallory")
    add_part(large, "xl/media/padding.bin", os.urandom(sheets.MAX_SHEET_BYTES))  # incompressible
    size = large.stat().st_size
    assert problems_of(large, key) == [
        f"mallory.xlsx is {size:,} bytes, more than a scoring sheet can be ({sheets.MAX_SHEET_BYTES:,})"
    ]
    bomb = fill(folder, key, "trudy")
    add_part(bomb, "xl/media/zeros.bin", bytes(sheets.MAX_UNPACKED_BYTES))  # a few KB packed
    with zipfile.ZipFile(bomb) as package:
        unpacked = sum(part.file_size for part in package.infolist())
    assert bomb.stat().st_size < sheets.MAX_SHEET_BYTES and unpacked > sheets.MAX_UNPACKED_BYTES
    assert problems_of(bomb, key) == [
        f"trudy.xlsx unpacks to {unpacked:,} bytes, more than a scoring sheet can be ({sheets.MAX_UNPACKED_BYTES:,})"
    ]


def test_thousands_of_problems_are_reported_up_to_a_cap_and_summed_up(issued):  # noqa: F811
    folder, key = issued

    def junk(sheet):
        for row in range(7, 3007):
            sheet.cell(row, 1, f"X{row}")

    problems = problems_of(fill(folder, key, "mallory", edit=junk), key)
    assert len(problems) == sheets.MAX_PROBLEMS + 1
    assert problems[0] == "A7: question 'X7' was not issued"
    assert problems[-1] == f"A{7 + sheets.MAX_PROBLEMS}:A3006: {3000 - sheets.MAX_PROBLEMS} more problems"


def test_only_clean_sheets_are_tallied_and_every_problem_is_kept(issued, warehouse):  # noqa: F811
    folder, key = issued
    fill(folder, key, "alice")
    fill(folder, key, "mallory", edit=set_cell("F3", "=4+1"))
    (folder / "filled" / "eve.xlsm").write_bytes((folder / "filled" / "alice.xlsx").read_bytes())
    assert tally(folder, warehouse).success
    with warehouse.get_connection() as conn:
        raters = conn.execute("SELECT DISTINCT rater FROM blind_scores").fetchall()
        problems = conn.execute("SELECT DISTINCT file, cell FROM blind_sheet_problems ORDER BY file").fetchall()
        (ratings,) = conn.execute("SELECT sum(ratings) FROM blind_tallies WHERE scope = 'pooled'").fetchone()
    assert raters == [("alice",)]
    assert problems == [("eve.xlsm", ""), ("mallory.xlsx", "F3")]
    assert ratings == 10  # alice's five questions, two systems each


HOSTILE = ['=HYPERLINK("https://example.invalid", "click")', "+1+1", "-2+3", "@SUM(1,1)"]


def rewrite_csv(path, change):
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(change(i, row) for i, row in enumerate(rows))


def renamed_q5(i, row):
    return {**row, "Question_ID": "=Q5"} if row["Question_ID"] == "Q5" else row


def test_issued_sheet_and_key_never_hold_formulas_whatever_the_text(tmp_path, warehouse):
    folder = tmp_path / "blind_eval"
    shutil.copytree(PROJECT_ROOT / "data" / "blind_eval", folder, ignore=shutil.ignore_patterns("issued", "*.xlsx"))
    rewrite_csv(folder / "questions.csv", renamed_q5)
    for system in ("demo-rag", "demo-generic"):
        rewrite_csv(
            folder / "answers" / f"{system}.csv",
            lambda i, row: renamed_q5(i, {**row, "Answer": HOSTILE[i]} if i < len(HOSTILE) else row),
        )
    folder_config = {"config": {"folder": str(folder)}}
    result = materialize_configured(
        [blind_eval_questions, blind_eval_answers, blind_eval_sheet],
        {"warehouse": warehouse},
        {name: folder_config for name in ("blind_eval_questions", "blind_eval_answers", "blind_eval_sheet")},
    )
    assert result.success
    sheet_path, key_path = folder / "issued" / SHEET_FILE, folder / "issued" / KEY_FILE
    assert formula_parts(sheet_path) == [] and formula_parts(key_path) == []
    sheet = load_workbook(sheet_path)["Scoring"]
    written = {sheet.cell(row, column).value for row in range(2, 7) for column in (4, 5)}
    assert set(HOSTILE) <= written and "=Q5" in {sheet.cell(row, 1).value for row in range(2, 7)}
    key = sheets.read_answer_key(key_path)
    assert "=Q5" in key["sides"]
    rows, problems = sheets.read_filled_sheet(
        fill(
            folder,
            key,
            "alice",
            scores=({**{f"Q{i}": 4 for i in range(1, 5)}, "=Q5": 5}, {**{f"Q{i}": 2 for i in range(1, 5)}, "=Q5": 5}),
        ),
        key,
    )
    assert problems == [] and len(rows) == 5
