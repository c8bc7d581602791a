"""Blind evaluation round trip, refused sheets with cell references, formula safety, the sensor."""

import shutil
import zipfile
from pathlib import Path

import pytest
from dagster import DagsterInstance, RunRequest, SkipReason, build_schedule_context, build_sensor_context
from openpyxl import load_workbook
from sklearn.metrics import cohen_kappa_score

from eval_platform.blind import sheets
from eval_platform.blind.sheets import KEY_FILE
from eval_platform.definitions import defs
from eval_platform.evaluation_assets.blind.assets import (
    SHEET_FILE,
    blind_eval_answers,
    blind_eval_questions,
    blind_eval_scores,
    blind_eval_sheet,
    blind_eval_tally,
)
from eval_platform.resources import RosterResource
from eval_platform.schedules.sensors import filled_sheet_sensor
from tests.conftest import PROJECT_ROOT
from tests.evaluation import materialize_configured

# What the rater thinks of each system, per question (the rater sees only A and B).
RAG = {"Q1": 5, "Q2": 5, "Q3": 4, "Q4": 4, "Q5": 4}
GENERIC = {"Q1": 3, "Q2": 2, "Q3": 2, "Q4": 4, "Q5": 1}


@pytest.fixture
def issued(tmp_path, warehouse):
    folder = tmp_path / "blind_eval"
    shutil.copytree(PROJECT_ROOT / "data" / "blind_eval", folder, ignore=shutil.ignore_patterns("issued", "*.xlsx"))
    folder_config = {"config": {"folder": str(folder)}}
    result = materialize_configured(
        [blind_eval_questions, blind_eval_answers, blind_eval_sheet],
        {"warehouse": warehouse},
        {"blind_eval_questions": folder_config, "blind_eval_answers": folder_config, "blind_eval_sheet": folder_config},
    )
    assert result.success
    return folder, sheets.read_answer_key(folder / "issued" / KEY_FILE)


def fill(folder, key, rater, scores=(RAG, GENERIC), edit=None):
    """Fill the issued sheet as a rater would, with openpyxl; `edit(sheet)` then spoils it."""
    workbook = load_workbook(folder / "issued" / SHEET_FILE)
    sheet = workbook["Scoring"]
    by_system = {"demo-rag": scores[0], "demo-generic": scores[1]}
    for row in range(2, sheet.max_row + 1):
        qid = sheet[f"A{row}"].value
        system_a, system_b = key["sides"][qid]
        score_a, score_b = by_system[system_a][qid], by_system[system_b][qid]
        sheet[f"F{row}"], sheet[f"G{row}"] = score_a, score_b
        sheet[f"H{row}"] = sheets.expected_winner(score_a, score_b)
        sheet[f"I{row}"] = "checked citations"
    if edit:
        edit(sheet)
    path = folder / "filled" / f"{rater}.xlsx"
    path.parent.mkdir(exist_ok=True)
    workbook.save(path)
    return path


def tally(folder, warehouse):
    folder_config = {"config": {"folder": str(folder)}}
    return materialize_configured(
        [blind_eval_scores, blind_eval_tally],
        {"warehouse": warehouse},
        {"blind_eval_scores": folder_config},
        raise_on_error=False,
    )


def test_sheet_is_blind_and_made_for_a_person(issued):
    folder, key = issued
    workbook = load_workbook(folder / "issued" / SHEET_FILE)
    sheet = workbook["Scoring"]
    assert [c.value for c in sheet[1]] == sheets.SHEET_COLUMNS
    assert sheet.freeze_panes == "B2" and workbook.sheetnames == ["Scoring", "Rubric"]
    assert sheet["D2"].alignment.wrap_text and sheet.column_dimensions["D"].width >= 40
    validations = {str(v.sqref): (v.type, v.formula1) for v in sheet.data_validations.dataValidation}
    assert validations == {"F2:G6": ("whole", "1"), "H2:H6": ("list", '"A,B,Tie"')}
    text = " ".join(str(c.value) for row in sheet.iter_rows() for c in row)
    assert "demo-rag" not in text and "demo-generic" not in text
    assert {a for a, _ in key["sides"].values()} == {"demo-rag", "demo-generic"}  # both sides drawn
    assert (folder / "issued" / KEY_FILE).exists()


def test_formula_like_answer_is_written_as_text(issued):
    folder, key = issued
    sheet = load_workbook(folder / "issued" / SHEET_FILE)["Scoring"]
    cells = [c for row in sheet.iter_rows() for c in row if str(c.value).startswith("=HYPERLINK")]
    assert len(cells) == 1 and cells[0].data_type == "s"
    with zipfile.ZipFile(folder / "issued" / SHEET_FILE) as archive:
        xml = archive.read("xl/worksheets/sheet1.xml").decode()
    assert "<f>" not in xml and "<f " not in xml


def test_round_trip_tally_equals_hand_computation(issued, warehouse):
    folder, key = issued
    fill(folder, key, "alice")
    result = tally(folder, warehouse)
    assert result.success
    with warehouse.get_connection() as conn:
        rows = conn.execute("""SELECT system, wins, losses, ties, average_score FROM blind_tallies
                               WHERE scope = 'pooled' ORDER BY system""").fetchall()
        (sentence,) = conn.execute("SELECT sentence FROM blind_results WHERE scope = 'pooled'").fetchone()
    # By hand: demo-rag 5,5,4,4,4 (avg 4.4) vs demo-generic 3,2,2,4,1 (avg 2.4): Q4 tied, rag won the rest.
    assert rows == [("demo-generic", 0, 4, 1, 2.4), ("demo-rag", 4, 0, 1, 4.4)]
    assert sentence == (
        "Blind manual evaluation on 5 expert-curated Kenyan legal questions using a 5-point rubric "
        "revealed that demo-rag achieved an average score of 4.40 compared to 2.40, winning 4/5 questions."
    )


def test_several_raters_per_rater_pooled_and_agreement(issued, warehouse):
    folder, key = issued
    fill(folder, key, "alice")
    fill(folder, key, "bob", scores=({**RAG, "Q5": 5}, {**GENERIC, "Q4": 3}))
    assert tally(folder, warehouse).success
    with warehouse.get_connection() as conn:
        scopes = dict(conn.execute("SELECT scope, rater_kappa FROM blind_results").fetchall())
        bob = conn.execute(
            "SELECT wins, ties FROM blind_tallies WHERE scope = 'bob' AND system = 'demo-rag'"
        ).fetchone()
        stats = conn.execute(
            "SELECT sign_test_p, wilcoxon_p, ci_low, ci_high, mean_difference FROM blind_results WHERE scope = 'pooled'"
        ).fetchone()
    assert set(scopes) == {"alice", "bob", "pooled"} and scopes["alice"] == scopes["bob"] == scopes["pooled"]
    assert 0.5 < scopes["pooled"] <= 1.0
    assert bob == (5, 0)
    sign_p, wilcoxon_p, low, high, difference = stats
    assert sign_p == pytest.approx(0.0625)  # averaged over raters, all 5 questions favour demo-rag: 2 / 2**5
    assert 0 < wilcoxon_p < 0.1 and low <= difference <= high


def spoil(cell, value):
    def edit(sheet):
        sheet[cell] = value

    return edit


@pytest.mark.slow
@pytest.mark.parametrize(
    "edit, expected",
    [
        (spoil("F3", 6), "F3: Score_A 6 is outside 1-5"),
        (spoil("G4", None), "G4: Score_B is blank"),
        (spoil("F2", "good"), "F2: Score_A 'good' is not a whole number"),
        (spoil("F2", 4.5), "F2: Score_A 4.5 is not a whole number"),
        (lambda sheet: sheet.delete_rows(5), "question Q4 is missing from the sheet"),
        (
            lambda sheet: [sheet.cell(row=7, column=c, value=sheet.cell(row=3, column=c).value) for c in range(1, 10)],
            "A7: question Q2 appears twice (also row 3)",
        ),
        (spoil("E2", "A completely different answer."), "E2: Answer_B of Q1 differs from the issued sheet"),
        (spoil("G1", "Points_B"), "A1:I1: missing column Score_B"),
    ],
)
def test_bad_sheets_are_refused_with_cell_references(issued, warehouse, edit, expected):
    folder, key = issued
    path = fill(folder, key, "carol", edit=edit)
    rows, problems = sheets.read_filled_sheet(path, key)
    assert rows == [] and expected in [str(p) for p in problems]


def test_contradicting_winner_and_all_problems_at_once(issued, warehouse):
    folder, key = issued

    def edit(sheet):
        score_a, score_b = sheet["F2"].value, sheet["G2"].value
        sheet["H2"] = "B" if score_a > score_b else "A"
        sheet["F3"], sheet["G5"] = 0, "five"

    path = fill(folder, key, "dave", edit=edit)
    _, problems = sheets.read_filled_sheet(path, key)
    cells = [p.cell for p in problems]
    assert cells == ["H2", "F3", "G5"]
    assert "contradicts" in problems[0].message
    assert not tally(folder, warehouse).success  # the only sheet was refused: nothing to tally
    with warehouse.get_connection() as conn:
        stored = conn.execute("SELECT file, cell FROM blind_sheet_problems ORDER BY cell").fetchall()
    assert stored == [("dave.xlsx", "F3"), ("dave.xlsx", "G5"), ("dave.xlsx", "H2")]
    assert path.exists()  # nothing of the refused sheet is lost


def test_a_file_that_is_not_xlsx(issued):
    folder, key = issued
    bogus = folder / "filled" / "erin.xlsx"
    bogus.parent.mkdir(exist_ok=True)
    bogus.write_text("Question_ID,Score_A\nQ1,5\n")
    rows, problems = sheets.read_filled_sheet(bogus, key)
    assert rows == [] and "erin.xlsx is not a readable .xlsx workbook" in str(problems[0])


def test_sensor_requests_a_tally_for_a_dropped_sheet(issued, warehouse):
    folder, key = issued
    sensor = filled_sheet_sensor(folder, name="test_sensor")
    instance, resources = DagsterInstance.ephemeral(), {"roster": RosterResource()}

    def tick(cursor: str | None):
        with build_sensor_context(cursor=cursor, instance=instance, resources=resources) as context:
            return sensor(context), context.cursor

    first, _ = tick(None)
    assert isinstance(first, SkipReason)
    fill(folder, key, "alice")
    request, cursor = tick(None)
    assert isinstance(request, RunRequest) and request.tags["filled_sheets"] == "alice.xlsx"
    assert request.run_config["ops"]["blind_eval_scores"]["config"]["folder"] == str(folder)
    assert isinstance(tick(cursor)[0], SkipReason)
    fill(folder, key, "bob")
    again, _ = tick(cursor)
    assert isinstance(again, RunRequest) and again.tags["filled_sheets"] == "bob.xlsx"
    result = materialize_configured(
        [blind_eval_scores, blind_eval_tally], {"warehouse": warehouse}, again.run_config["ops"]
    )
    assert result.success


def test_nightly_schedule_requests_every_benchmark_partition(tmp_path):
    declared = sorted(path.stem for path in Path("data/benchmarks").glob("*.yaml"))
    instance = DagsterInstance.local_temp(str(tmp_path))
    with build_schedule_context(
        instance,
        scheduled_execution_time=__import__("datetime").datetime(2026, 11, 23, 2, 0),
        resources={"roster": RosterResource()},
    ) as context:
        requests = defs().resolve_schedule_def("nightly_benchmark_refresh")(context)
    assert sorted(r.partition_key for r in requests) == declared and len(declared) == 13
    assert all(r.run_key.endswith("2026-11-23:" + r.partition_key) for r in requests)
    assert sorted(instance.get_dynamic_partitions("benchmarks")) == declared  # keys of the dimension


@pytest.mark.parametrize("prefix", ["openai/", "served/"])
def test_two_systems_answer_through_the_gateway(tmp_path, warehouse, monkeypatch, prefix):
    """Answered by an API model, and by a served model (its server's chat endpoint)."""
    from eval_platform.resources import ModelGatewayResource
    from tests.openai_stub_server import StubServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    folder = tmp_path / "blind_eval"
    shutil.copytree(
        PROJECT_ROOT / "data" / "blind_eval", folder, ignore=shutil.ignore_patterns("answers", "issued", "*.xlsx")
    )
    references = tmp_path / "statutes.txt"
    references.write_text("Article 2(1): This Constitution is the supreme law of the Republic.")
    systems = [
        {
            "name": "with-references",
            "model": f"{prefix}answerer",
            "system_prompt": "You are a Kenyan lawyer.",
            "reference_files": [str(references)],
        },
        {"name": "plain", "model": f"{prefix}answerer"},
    ]
    with StubServer() as server:
        result = materialize_configured(
            [blind_eval_questions, blind_eval_answers, blind_eval_sheet],
            {"warehouse": warehouse, "gateway": ModelGatewayResource(api_base=server.api_base)},
            {
                "blind_eval_questions": {"config": {"folder": str(folder)}},
                "blind_eval_answers": {"config": {"folder": str(folder), "systems": systems}},
                "blind_eval_sheet": {"config": {"folder": str(folder)}},
            },
        )
    assert result.success
    with warehouse.get_connection() as conn:
        answers = dict(conn.execute("SELECT system || '/' || Question_ID, answer FROM blind_answers").fetchall())
    assert len(answers) == 10
    assert "supreme law of the Republic" in answers["with-references/Q2"]
    assert answers["plain/Q2"] == "Answer to: What is the supreme law of Kenya?"
    assert (folder / "issued" / SHEET_FILE).exists()


@pytest.mark.slow
@pytest.mark.parametrize("prefix", ["openai/", "served/"])
def test_llm_rater_is_one_more_rater_with_agreement(issued, warehouse, monkeypatch, prefix):
    from eval_platform.evaluation_assets.blind.assets import blind_eval_llm_rating
    from eval_platform.resources import ModelGatewayResource
    from tests.openai_stub_server import StubServer

    folder, key = issued
    rater = f"llm-{prefix.rstrip('/')}_rater"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    fill(folder, key, "alice")
    with StubServer() as server:
        result = materialize_configured(
            [blind_eval_llm_rating],
            {"gateway": ModelGatewayResource(api_base=server.api_base)},
            {"blind_eval_llm_rating": {"config": {"folder": str(folder), "model": f"{prefix}rater"}}},
        )
    assert result.success
    assert tally(folder, warehouse).success
    with warehouse.get_connection() as conn:
        kappas = dict(conn.execute("SELECT scope, rater_kappa FROM blind_results").fetchall())
        raters = {r for (r,) in conn.execute("SELECT DISTINCT rater FROM blind_scores").fetchall()}
        answers = conn.execute("SELECT Question_ID, system, answer FROM blind_answers").fetchall()
        llm = {
            (q, s): score
            for q, s, score in conn.execute(
                "SELECT Question_ID, system, score FROM blind_scores WHERE rater = ?", [rater]
            ).fetchall()
        }
    assert raters == {"alice", rater}
    assert llm == {(q, s): 5 if "Article" in answer else 2 for q, s, answer in answers}  # the stub rater's rule
    alice = {
        (q, system): score
        for system, scores in (("demo-rag", RAG), ("demo-generic", GENERIC))
        for q, score in scores.items()
    }
    answered = sorted(llm)
    expected = cohen_kappa_score(
        [alice[k] for k in answered], [llm[k] for k in answered], weights="quadratic", labels=[1, 2, 3, 4, 5]
    )
    assert kappas[rater] == pytest.approx(expected)  # the pairs are the same answers' scores
