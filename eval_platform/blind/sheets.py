"""Blind evaluation's files: questions and answers read from csv, jsonl or xlsx; the scoring sheet
and answer key written as xlsx; a filled sheet read back with every problem reported by cell."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, cast

import pandas as pd

if TYPE_CHECKING:
    from openpyxl.workbook.workbook import Workbook
    from openpyxl.worksheet.worksheet import Worksheet


SHEET_FILE, KEY_FILE, RUBRIC_FILE = (
    "blind_evaluation_scoring_sheet.xlsx",
    "blind_evaluation_answer_key.xlsx",
    "rubric.json",
)
SHEET_COLUMNS = [
    "Question_ID",
    "Question",
    "Ground_Truth",
    "Answer_A",
    "Answer_B",
    "Score_A",
    "Score_B",
    "Winner",
    "Notes",
]
ISSUED_COLUMNS = SHEET_COLUMNS[:5]
SHEET_NAME, RUBRIC_SHEET = "Scoring", "Rubric"
WINNERS = ("A", "B", "Tie")
SCORES = range(1, 6)


class BlindEvaluationInputError(ValueError):
    """An input table that cannot be used; the message names the file (and row or column)."""


@dataclass(frozen=True)
class Rubric:
    """The 1-5 scoring rubric raters apply: what is rated, each level's criteria, and the rules."""

    subject: str  # what the questions are, e.g. "legal question"
    levels: tuple[tuple[int, str, str], ...]  # (score, level, criteria), 5 first
    rules: tuple[str, ...]

    @classmethod
    def from_file(cls, path: Path) -> Rubric:
        """A rubric from JSON: {"subject": ..., "levels": [{"score", "level", "criteria"}], "rules": [...]}."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            levels = tuple((int(item["score"]), str(item["level"]), str(item["criteria"])) for item in data["levels"])
            rubric = cls(str(data["subject"]), levels, tuple(str(rule) for rule in data.get("rules", ())))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise BlindEvaluationInputError(f"{path}: not a usable rubric ({type(error).__name__}: {error})") from error
        if sorted(score for score, _, _ in rubric.levels) != list(SCORES):
            raise BlindEvaluationInputError(f"{path}: the rubric must define each score from 1 to 5 once")
        return rubric


def _active_sheet(workbook: Workbook) -> Worksheet:
    """A new workbook's one worksheet."""
    from openpyxl.worksheet.worksheet import Worksheet

    sheet = workbook.active
    assert isinstance(sheet, Worksheet)
    return sheet


def read_table(path: Path, required: Sequence[str]) -> pd.DataFrame:
    """A CSV, JSONL or xlsx table with the required columns, all values as text."""
    path = Path(path)
    if not path.is_file():
        raise BlindEvaluationInputError(f"{path}: file not found")
    readers = {
        ".csv": lambda p: pd.read_csv(p, dtype=str, keep_default_na=False),
        ".jsonl": lambda p: pd.read_json(p, lines=True, dtype=False),
        ".xlsx": lambda p: pd.read_excel(p, dtype=str, keep_default_na=False),
    }
    if path.suffix.lower() not in readers:
        raise BlindEvaluationInputError(f"{path}: expected a .csv, .jsonl or .xlsx file")
    try:
        frame = readers[path.suffix.lower()](path)
    except Exception as error:  # pandas raises many types for unreadable files
        raise BlindEvaluationInputError(f"{path}: cannot be read ({error})") from error
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise BlindEvaluationInputError(f"{path}: missing column(s) {', '.join(missing)}")
    frame = frame[list(required)].astype(str).apply(lambda column: column.str.strip())
    duplicated = frame[frame[required[0]].duplicated()][required[0]].tolist()
    if duplicated:
        raise BlindEvaluationInputError(f"{path}: {required[0]} repeated: {', '.join(duplicated)}")
    empty = frame.index[frame[required[0]] == ""].tolist()
    if empty:
        raise BlindEvaluationInputError(f"{path}: row {empty[0] + 2} has no {required[0]}")
    return frame


def text_digest(text: str) -> str:
    return hashlib.sha256(str(text).encode()).hexdigest()[:16]


def assign_sides(question_ids: Sequence[str], systems: Sequence[str], seed: int) -> dict[str, tuple[str, str]]:
    """Which system answers as A and which as B, drawn per question from the recorded seed."""
    if len(systems) != 2:
        raise ValueError(f"Blind evaluation compares exactly two systems, got {list(systems)}")
    sides = {}
    for qid in question_ids:
        flip = random.Random(f"{seed}:{qid}").random() < 0.5
        sides[qid] = (systems[1], systems[0]) if flip else (systems[0], systems[1])
    return sides


def issued_rows(
    questions: pd.DataFrame, answers: Mapping[str, Mapping[str, str]], sides: Mapping[str, tuple[str, str]]
) -> list[dict[str, str]]:
    """Rows of the sheet: each question with the answers of system A and system B."""
    rows = []
    for q in questions.to_dict("records"):
        qid = q["Question_ID"]
        system_a, system_b = sides[qid]
        for system in (system_a, system_b):
            if qid not in answers[system]:
                raise BlindEvaluationInputError(f"system {system!r} has no answer for question {qid}")
        rows.append(
            {
                "Question_ID": qid,
                "Question": q["Question"],
                "Ground_Truth": q["Ground_Truth"],
                "Answer_A": answers[system_a][qid],
                "Answer_B": answers[system_b][qid],
            }
        )
    return rows


def _write_text(cell, value: object) -> None:
    """Write a value as text, never as a formula, whatever it starts with."""
    cell.value = "" if value is None else str(value)
    cell.data_type = "s"
    if cell.value[:1] in ("=", "+", "-", "@"):
        cell.quotePrefix = True


def _append_text(sheet, values: Sequence[object]) -> None:
    """Append a row of text cells (numbers stay numbers): nothing written becomes a formula."""
    row = sheet.max_row + 1 if sheet.max_row > 1 or sheet.cell(1, 1).value is not None else 1
    for column, value in enumerate(values, start=1):
        cell = sheet.cell(row=row, column=column)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            cell.value = value
        else:
            _write_text(cell, value)


def write_scoring_sheet(path: Path, rows: Sequence[Mapping[str, str]], rubric: Rubric) -> Path:
    """The rater's workbook: the instructions' columns, frozen header, wrapped text, drop-downs and
    a rubric sheet."""
    from openpyxl import Workbook
    from openpyxl.styles import Alignment, Font, PatternFill
    from openpyxl.utils import get_column_letter
    from openpyxl.worksheet.datavalidation import DataValidation

    workbook = Workbook()
    sheet = _active_sheet(workbook)
    sheet.title = SHEET_NAME
    widths = {
        "Question_ID": 12,
        "Question": 45,
        "Ground_Truth": 45,
        "Answer_A": 60,
        "Answer_B": 60,
        "Score_A": 9,
        "Score_B": 9,
        "Winner": 9,
        "Notes": 40,
    }
    for column, name in enumerate(SHEET_COLUMNS, start=1):
        cell = sheet.cell(row=1, column=column, value=name)
        cell.font, cell.fill = Font(bold=True), PatternFill("solid", fgColor="DDEBF7")
        sheet.column_dimensions[cell.column_letter].width = widths[name]
    for r, row in enumerate(rows, start=2):
        for column, name in enumerate(ISSUED_COLUMNS, start=1):
            cell = sheet.cell(row=r, column=column)
            _write_text(cell, row[name])
            cell.alignment = Alignment(wrap_text=True, vertical="top")
        sheet.cell(row=r, column=len(SHEET_COLUMNS)).alignment = Alignment(wrap_text=True, vertical="top")
    sheet.freeze_panes = "B2"
    last = len(rows) + 1
    letter = {name: get_column_letter(i) for i, name in enumerate(SHEET_COLUMNS, start=1)}
    scores = DataValidation(
        type="whole",
        operator="between",
        formula1="1",
        formula2="5",
        showDropDown=False,
        error="Enter a whole number from 1 to 5",
        errorTitle="Score",
        showErrorMessage=True,
    )
    winner = DataValidation(type="list", formula1='"A,B,Tie"', error="Choose A, B or Tie", showErrorMessage=True)
    sheet.add_data_validation(scores)
    sheet.add_data_validation(winner)
    scores.add(f"{letter['Score_A']}2:{letter['Score_B']}{last}")
    winner.add(f"{letter['Winner']}2:{letter['Winner']}{last}")
    rubric_sheet = workbook.create_sheet(RUBRIC_SHEET)
    _append_text(rubric_sheet, ["Score", "Level", "Criteria"])
    for score, level, criteria in rubric.levels:
        _append_text(rubric_sheet, [score, level, criteria])
    for rule in rubric.rules:
        _append_text(rubric_sheet, ["", "Rule", rule])
    rubric_sheet.column_dimensions["C"].width = 100
    path.parent.mkdir(parents=True, exist_ok=True)
    workbook.save(path)
    return path


def write_answer_key(
    path: Path, rows: Sequence[Mapping[str, str]], sides: Mapping[str, tuple[str, str]], seed: int, sheet_id: str
) -> Path:
    """The separate key: which system is A and B per question, and digests of the issued texts."""
    from openpyxl import Workbook

    workbook = Workbook()
    key = _active_sheet(workbook)
    key.title = "Key"
    _append_text(key, ["Question_ID", "System_A", "System_B"])
    for row in rows:
        _append_text(key, [row["Question_ID"], *sides[row["Question_ID"]]])
    issued = workbook.create_sheet("Issued")
    _append_text(issued, ISSUED_COLUMNS)
    for row in rows:
        _append_text(issued, [row["Question_ID"]] + [text_digest(row[c]) for c in ISSUED_COLUMNS[1:]])
    about = workbook.create_sheet("About")
    for item in (["sheet_id", sheet_id], ["seed", seed]):
        _append_text(about, item)
    path.parent.mkdir(parents=True, exist_ok=True)
    workbook.save(path)
    return path


class AnswerKey(TypedDict):
    """An answer key as read: which system answered as A and B, and the issued texts' digests, by
    question; the questions in their issued order; the sheet's id and seed (its About sheet)."""

    sides: dict[str, tuple[str, str]]
    digests: dict[str, dict[str, str]]
    order: list[str]
    sheet_id: str
    seed: int


def read_answer_key(path: Path) -> AnswerKey:
    from openpyxl import load_workbook

    workbook = load_workbook(path, read_only=True)
    sides = {str(q): (a, b) for q, a, b in list(workbook["Key"].iter_rows(values_only=True))[1:]}
    digests = {
        str(r[0]): dict(zip(ISSUED_COLUMNS[1:], r[1:], strict=False))
        for r in list(workbook["Issued"].iter_rows(values_only=True))[1:]
    }
    about = {str(k): v for k, v in workbook["About"].iter_rows(values_only=True)}
    workbook.close()
    # openpyxl types a cell as any value it can hold; `write_answer_key` wrote these as text (the seed a number)
    return cast(AnswerKey, {"sides": sides, "digests": digests, "order": list(sides), **about})


@dataclass(frozen=True)
class Problem:
    cell: str  # e.g. "F3", or "" for the whole file
    message: str

    def __str__(self) -> str:
        return f"{self.cell}: {self.message}" if self.cell else self.message


def _score(value: object) -> tuple[int | None, str | None]:
    if value is None or str(value).strip() == "":
        return None, "is blank"
    if isinstance(value, bool):
        return None, f"{value!r} is not a whole number"
    try:
        number = float(str(value).strip())
    except ValueError:
        return None, f"{str(value)!r} is not a whole number"
    if number != int(number):
        return None, f"{value} is not a whole number"
    if not 1 <= number <= 5:
        return None, f"{int(number)} is outside 1-5"
    return int(number), None


def expected_winner(score_a: int, score_b: int) -> str:
    return "A" if score_a > score_b else "B" if score_b > score_a else "Tie"


MAX_SHEET_BYTES = 5_000_000  # a scoring sheet of a few hundred questions is well under 1 MB
MAX_UNPACKED_BYTES = 40_000_000  # what its XML may unpack to
MAX_SHEET_ROWS = 100_000  # by the sheet's recorded dimension, checked before the sheet is loaded
MAX_PROBLEMS = 50  # problems reported one by one; more are summed up in one
MACRO_SUFFIXES = (".xlsm", ".xltm", ".xlam")
OLE_SIGNATURE = bytes.fromhex("d0cf11e0a1b11ae1")  # encrypted OOXML and legacy .xls are OLE files


def package_problems(path: Path) -> list[Problem]:
    """What makes a file unfit to be opened as a scoring sheet, before it is opened: not an .xlsx
    (a macro-enabled workbook, an encrypted or legacy file, not a zip package), too large, macros
    inside, or links to other workbooks."""
    import zipfile

    name, suffix = path.name, path.suffix.lower()
    if suffix in MACRO_SUFFIXES:
        return [Problem("", f"{name} is a macro-enabled workbook ({suffix}); save the sheet as .xlsx")]
    if suffix != ".xlsx":
        return [Problem("", f"{name} is not an .xlsx workbook")]
    size = path.stat().st_size
    if size > MAX_SHEET_BYTES:
        return [Problem("", f"{name} is {size:,} bytes, more than a scoring sheet can be ({MAX_SHEET_BYTES:,})")]
    with path.open("rb") as handle:
        if handle.read(len(OLE_SIGNATURE)) == OLE_SIGNATURE:
            return [
                Problem(
                    "",
                    f"{name} is encrypted (password-protected) or a legacy .xls file; save it as an unprotected .xlsx",
                )
            ]
    if not zipfile.is_zipfile(path):
        return [Problem("", f"{name} is not a readable .xlsx workbook (not a zip package)")]
    with zipfile.ZipFile(path) as package:
        parts = package.infolist()
        unpacked = sum(part.file_size for part in parts)
        if unpacked > MAX_UNPACKED_BYTES:
            return [
                Problem(
                    "",
                    f"{name} unpacks to {unpacked:,} bytes, more than a scoring sheet can be ({MAX_UNPACKED_BYTES:,})",
                )
            ]
        names = [part.filename for part in parts]
    problems = [Problem("", f"{name} contains macros ({n})") for n in names if n.lower().endswith("vbaproject.bin")]
    problems += [
        Problem("", f"{name} links to another workbook ({n})")
        for n in names
        if n.startswith("xl/externalLinks/") and n.endswith(".xml")
    ]
    return problems


def _cell_problems(workbook: Workbook) -> list[Problem]:
    """Every formula and every link in any cell of any sheet."""
    problems = []
    for sheet in workbook.worksheets:
        prefix = "" if sheet.title == SHEET_NAME else f"{sheet.title}!"
        for row in sheet.iter_rows():
            for cell in row:
                if cell.data_type == "f":
                    text = getattr(cell.value, "text", cell.value)
                    problems.append(Problem(f"{prefix}{cell.coordinate}", f"holds a formula ({str(text)[:60]})"))
                if cell.hyperlink is not None:
                    target = cell.hyperlink.target or cell.hyperlink.location or ""
                    problems.append(Problem(f"{prefix}{cell.coordinate}", f"holds a link ({target[:80]})"))
    return problems


def _column_problems(header: Sequence[str]) -> list[Problem]:
    """The issued columns in their places, and no other."""
    from openpyxl.utils import get_column_letter

    problems = []
    for i, name in enumerate(header):
        expected = SHEET_COLUMNS[i] if i < len(SHEET_COLUMNS) else ""
        if name != expected and name in SHEET_COLUMNS:
            problems.append(
                Problem(
                    f"{get_column_letter(i + 1)}1",
                    f"column {name} was issued in column "
                    f"{get_column_letter(SHEET_COLUMNS.index(name) + 1)}: columns were moved",
                )
            )
        elif name != expected and name:
            problems.append(Problem(f"{get_column_letter(i + 1)}1", f"column {name!r} was not issued"))
    return problems


def _opened_sheet(path: Path) -> tuple[Workbook | None, list[Problem]]:
    """The filled workbook (formulas as formulas: none may be there), or the problems that stop its
    reading: not a plain .xlsx, no scoring sheet, too many rows, damaged."""
    from openpyxl import load_workbook

    problems = package_problems(path)
    if problems:
        return None, problems
    try:
        outline = load_workbook(path, read_only=True)
        rows = outline[SHEET_NAME].max_row if SHEET_NAME in outline.sheetnames else None
        outline.close()
        if rows is None:
            return None, [Problem("", f"{path.name} has no {SHEET_NAME!r} sheet")]
        if rows > MAX_SHEET_ROWS:
            return None, [Problem("", f"{path.name}: the {SHEET_NAME} sheet has more than {MAX_SHEET_ROWS:,} rows")]
        return load_workbook(path), []
    except Exception as error:  # a damaged package: openpyxl raises many types
        return None, [Problem("", f"{path.name} is not a readable .xlsx workbook ({type(error).__name__})")]


def _scored_row(
    qid: str, get: Mapping[str, object], where: Callable[[str], str], digests: Mapping[str, str]
) -> tuple[dict[str, str | int | None], list[Problem]]:
    """An issued question's row as read (its scores, winner and notes), and its problems: issued
    texts changed, scores and a winner missing, out of range or contradicting each other."""
    problems = []
    for name in ISSUED_COLUMNS[1:]:
        text = "" if get[name] is None else str(get[name])
        if text_digest(text) != digests[name]:
            problems.append(Problem(where(name), f"{name} of {qid} differs from the issued sheet"))
    scores = {}
    for name in ("Score_A", "Score_B"):
        scores[name], error = _score(get[name])
        if error:
            problems.append(Problem(where(name), f"{name} {error}"))
    winner = str(get["Winner"] or "").strip()
    normalized = {w.lower(): w for w in WINNERS}.get(winner.lower())
    if normalized is None:
        problems.append(Problem(where("Winner"), f"Winner {winner!r} must be A, B or Tie"))
    elif None not in scores.values():
        expected = expected_winner(scores["Score_A"], scores["Score_B"])
        if normalized != expected:
            problems.append(
                Problem(
                    where("Winner"),
                    f"Winner {normalized} contradicts Score_A "
                    f"{scores['Score_A']} and Score_B {scores['Score_B']} (expected {expected})",
                )
            )
    notes = "" if get["Notes"] is None else str(get["Notes"])
    row = {"Question_ID": qid, "Score_A": scores["Score_A"], "Score_B": scores["Score_B"], "Winner": normalized}
    return {**row, "Notes": notes}, problems


def read_filled_sheet(path: Path, key: AnswerKey) -> tuple[list[dict[str, str | int | None]], list[Problem]]:
    """Scores from a filled sheet checked against the issued one. Returns (rows, problems); a sheet
    with any problem must not be tallied. Every problem names its cell (or the file): a file that
    is not a plain .xlsx, any formula or link, columns or rows moved or added, issued texts changed,
    scores and winners that are missing, out of range or contradict each other."""
    from openpyxl.utils import get_column_letter

    workbook, problems = _opened_sheet(path)
    if workbook is None:
        return [], problems
    sheet = workbook[SHEET_NAME]
    problems = _cell_problems(workbook)
    header = [str(c.value).strip() if c.value is not None else "" for c in sheet[1]]
    missing = [c for c in SHEET_COLUMNS if c not in header]
    if missing:
        header_row = f"A1:{get_column_letter(max(1, len(header)))}1"
        return [], problems + [Problem(header_row, f"missing column {c}") for c in missing]
    problems += _column_problems(header)
    column = {name: header.index(name) for name in SHEET_COLUMNS}
    letter = {name: get_column_letter(i + 1) for name, i in column.items()}
    issued_row = {qid: r for r, qid in enumerate(key["order"], start=2)}
    rows, seen = [], {}
    for r, values in enumerate(sheet.iter_rows(min_row=2, values_only=True), start=2):
        if all(v is None or str(v).strip() == "" for v in values):
            continue
        get = {name: values[i] if i < len(values) else None for name, i in column.items()}
        qid = str(get["Question_ID"] or "").strip()
        where = lambda name, row=r: f"{letter[name]}{row}"  # noqa: E731
        if qid not in key["digests"]:
            problems.append(Problem(where("Question_ID"), f"question {qid!r} was not issued"))
            continue
        if qid in seen:
            problems.append(Problem(where("Question_ID"), f"question {qid} appears twice (also row {seen[qid]})"))
            continue
        seen[qid] = r
        if issued_row[qid] != r:
            problems.append(
                Problem(where("Question_ID"), f"question {qid} was issued in row {issued_row[qid]}: rows were moved")
            )
        row, found = _scored_row(qid, get, where, key["digests"][qid])
        rows.append({**row, "row": r})
        problems += found
    problems += [Problem("", f"question {qid} is missing from the sheet") for qid in key["order"] if qid not in seen]
    if len(problems) > MAX_PROBLEMS:
        rest = problems[MAX_PROBLEMS:]
        problems = problems[:MAX_PROBLEMS] + [Problem(f"{rest[0].cell}:{rest[-1].cell}", f"{len(rest)} more problems")]
    return (rows if not problems else []), problems


def header_columns(sheet: Worksheet) -> dict[str, str]:
    """Column letters of a sheet's header names (row 1)."""
    return {str(cell.value).strip(): cell.column_letter for cell in sheet[1] if cell.value is not None}


def sheet_id_for(rows: Sequence[Mapping[str, str]], seed: int) -> str:
    return hashlib.sha256(json.dumps([rows, seed], sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class IssuedSheet:
    """A scoring sheet as issued: its id and seed, the two systems, its rows (each question with the
    answers shown as A and B), which system is A and B per question, and the two files written."""

    sheet_id: str
    seed: int
    systems: list[str]
    rows: list[dict[str, str]]
    sides: dict[str, tuple[str, str]]
    sheet_path: Path
    key_path: Path

    def issue_row(self, at: datetime) -> pd.DataFrame:
        """The sheet's row of the issued sheets, issued `at`."""
        return pd.DataFrame(
            [
                {
                    "sheet_id": self.sheet_id,
                    "seed": self.seed,
                    "systems": self.systems,
                    "sheet_path": str(self.sheet_path),
                    "key_path": str(self.key_path),
                    "issued_at": at,
                }
            ]
        )

    def key_rows(self) -> pd.DataFrame:
        """The answer key's rows: which system is A and B per question."""
        return pd.DataFrame(
            [
                {"sheet_id": self.sheet_id, "Question_ID": q, "system_a": a, "system_b": b}
                for q, (a, b) in self.sides.items()
            ]
        )


def issue_sheet(
    questions: pd.DataFrame, answers: Mapping[str, Mapping[str, str]], folder: Path, seed: int
) -> IssuedSheet:
    """The blind scoring sheet of the questions and the two systems' answers, with `folder`'s rubric,
    and its separate answer key, written to `folder`/issued/; which system is A drawn per question
    from `seed`."""
    systems = sorted(answers)
    sides = assign_sides(questions["Question_ID"].tolist(), systems, seed)
    rows = issued_rows(questions, answers, sides)
    sheet_id = sheet_id_for(rows, seed)
    issued = folder / "issued"
    rubric = Rubric.from_file(folder / RUBRIC_FILE)
    sheet_path = write_scoring_sheet(issued / SHEET_FILE, rows, rubric)
    key_path = write_answer_key(issued / KEY_FILE, rows, sides, seed, sheet_id)
    return IssuedSheet(sheet_id, seed, systems, rows, sides, sheet_path, key_path)
