"""The sample viewer, with real parts: Dagster materialisations of every domain (the real SmolLM2 and
API models behind the local OpenAI stub, an era judged by three judges, a blind sheet filled and
tallied) into a DuckDB file, `dagster-webserver` and the viewer as processes, and a real Chromium.

Untrusted text is planted where users' data and models' outputs land: a dataset's question (so a
prompt and a model's echoed answer hold it), a paragraph an era compresses, a blind question, an
answer and a rater's note. Every page shows it as text; a search or a name holding SQL finds
nothing and drops nothing; the viewer listens on 127.0.0.1 alone. From the link in an asset's
metadata, the browser reaches the flipped items of two models, an era's candidate and a blind
question (whose key appears only once a tally exists). Screenshots: docs/images/viewer_*.png, written
there with EVAL_UPDATE_SCREENSHOTS=1 (a temporary folder otherwise, so a run leaves the tree clean)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from tests.conftest import PROJECT_ROOT
from tests.processes import free_port, running

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
IMAGES = (
    PROJECT_ROOT / "docs" / "images"
    if os.environ.get("EVAL_UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.mkdtemp(prefix="viewer-screenshots-"))
)
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'"><b>bold?</b>'
ESCAPED = "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;&lt;img src=x onerror="
SQL = "'; DROP TABLE samples; --"
ROSTER = {  # name: entry fields (the local model by default)
    "smollm2": {"solvers": ["letter"]},
    "letter-api": {"model": "openai/letter-logprobs", "solvers": ["letter"], "baseline": "smollm2"},
    "answerer": {"model": "openai/answerer", "solvers": ["generate"]},
    "echo": {"model": "openai/echo", "solvers": ["generate"], "baseline": "answerer"},
}
# in this order: the latest materialisation of model_comparison, which its asset page shows, is ARC-Easy's
EVALUATIONS = {"gsm8k": ["answerer", "echo"], "arc_easy": ["smollm2", "letter-api"]}
ERA = {
    "population_size": 6,
    "generations": 2,
    "compression_model": "openai/compressor",
    "judge_panel": {"openai": "openai/judge-harsh", "claude": "openai/judge-fast", "gemini": "openai/judge-lenient"},
}


@dataclass
class Platform:
    home: Path
    warehouse: Path
    blind: Path
    viewer_port: int
    roster: Path

    @property
    def viewer(self) -> str:
        return f"http://127.0.0.1:{self.viewer_port}"

    def environment(self) -> dict[str, str]:
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith("EVAL_VIEWER")},
            "DAGSTER_HOME": str(self.home),
            "EVAL_WAREHOUSE": str(self.warehouse),
            "EVAL_ROSTER_DIR": str(self.roster),
            "EVAL_VIEWER_URL": self.viewer,
        }


def hostile_rows(source: Path, target: Path, field: str, rows: int, first_words: bool = False) -> Path:
    """A data file's first rows, the first with HOSTILE in `field` (at its end, or its start)."""
    lines = source.read_text(encoding="utf-8").splitlines()[:rows]
    first = json.loads(lines[0])
    first[field] = f"{HOSTILE} {first[field]}" if first_words else f"{first[field]} {HOSTILE}"
    target.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    return target


def blind_folder(target: Path) -> Path:
    """The shipped blind evaluation, with HOSTILE in Q1's question and in one system's answer to it."""
    shutil.copytree(PROJECT_ROOT / "data" / "blind_eval", target)
    questions = pd.read_csv(target / "questions.csv", dtype=str)
    questions.loc[questions["Question_ID"] == "Q1", "Question"] += f" {HOSTILE}"
    questions.to_csv(target / "questions.csv", index=False)
    answers = pd.read_csv(target / "answers" / "demo-rag.csv", dtype=str)
    answers.loc[answers["Question_ID"] == "Q1", "Answer"] = f"{HOSTILE} " + answers["Answer"]
    answers.to_csv(target / "answers" / "demo-rag.csv", index=False)
    return target


def code_location(platform: Platform):
    from dagster import Definitions

    from evaluation_assets.definitions import defs
    from resources import LanguageModelResource, ModelGatewayResource, RosterResource, WarehouseResource

    return Definitions(
        assets=list(defs.assets or []),
        jobs=list(defs.jobs or []),
        resources={
            "warehouse": WarehouseResource(database=str(platform.warehouse)),
            "gateway": ModelGatewayResource(),
            "evaluation_model": LanguageModelResource(),
            "roster": RosterResource(directory=str(platform.roster)),
        },
    )


def run_job(platform: Platform, job: str, partition=None, run_config=None, assets=None) -> None:
    """A job of the code location, run in this process on the platform's Dagster instance."""
    from dagster import AssetKey, DagsterInstance

    with pytest.MonkeyPatch.context() as patch:
        for name, value in platform.environment().items():
            patch.setenv(name, value)
        with DagsterInstance.get() as instance:
            result = (
                code_location(platform)
                .resolve_job_def(job)
                .execute_in_process(
                    partition_key=partition,
                    instance=instance,
                    run_config=run_config or {},
                    asset_selection=[AssetKey(a) for a in assets] if assets else None,
                    raise_on_error=False,
                )
            )
    assert result.success, f"{job} [{partition}] failed"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Platform:
    """Where everything goes: the Dagster instance, the warehouse, the blind folder, the roster,
    and the viewer's port."""
    from eval_platform.benchmarks.roster import RosterEntry, write_entry

    folder = tmp_path_factory.mktemp("viewer_platform")
    home = folder / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("nux:\n  enabled: false\n")  # no welcome dialog over the pages
    platform = Platform(home, home / "warehouse.duckdb", blind_folder(folder / "blind"), free_port(), folder / "roster")
    for name, fields in ROSTER.items():
        write_entry(platform.roster, RosterEntry(name=name, **fields))
    return platform


@pytest.fixture(scope="module")
def viewer(site):
    """The viewer as users start it (`eval-platform viewer`), on its default host; started first,
    so that its port (which the links in the metadata name) is its own while they are written."""
    command = [sys.executable, "-m", "jobs.main", "viewer", "--port", str(site.viewer_port)]
    with running(command, site.viewer + "/", timeout_s=180, cwd=PROJECT_ROOT, env=site.environment(),
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as process:  # fmt: skip
        yield process


@pytest.fixture(scope="module")
def platform(site, viewer, tmp_path_factory):
    """Every domain materialised as the jobs run it, with the viewer's links in the metadata; the
    blind sheet filled but not tallied yet."""
    from dagster import DagsterInstance

    from eval_platform.blind.raters import demo_rater_fill
    from eval_platform.blind.sheets import SHEET_FILE
    from evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions
    from tests.openai_stub_server import StubServer

    platform, home, folder = site, site.home, tmp_path_factory.mktemp("viewer_inputs")
    data = PROJECT_ROOT / "data"
    sources = {
        "arc_easy": hostile_rows(data / "benchmarks" / "arc_easy.jsonl", folder / "arc_easy.jsonl", "question", 8),
        "gsm8k": hostile_rows(data / "benchmarks" / "gsm8k.jsonl", folder / "gsm8k.jsonl", "question", 4),
    }
    # at its start: the stub's compressor keeps a paragraph's first words
    paragraphs = hostile_rows(data / "evolution" / "paragraphs.jsonl", folder / "paragraphs.jsonl", "text", 3, True)
    with StubServer() as stub, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-viewer-not-a-real-key")
        gateway = {"gateway": stub.gateway_config()}
        patch.setenv("DAGSTER_HOME", str(home))
        with DagsterInstance.get() as instance:
            instance.add_dynamic_partitions(str(benchmark_partitions.name), list(EVALUATIONS))
            instance.add_dynamic_partitions(str(roster_partitions.name), list(ROSTER))
            instance.add_dynamic_partitions("eras", ["viewer-era"])
        for benchmark, models in EVALUATIONS.items():
            run_job(platform, "benchmark_inputs", benchmark,
                    {"ops": {"benchmark_raw_rows": {"config": {"file": str(sources[benchmark])}}}})  # fmt: skip
            for model in models:
                run_job(platform, "model_evaluation", evaluation_key(benchmark, model), {"resources": gateway})
        run_job(
            platform, "evolution_inputs", None, {"ops": {"source_paragraphs": {"config": {"source": str(paragraphs)}}}}
        )
        run_job(platform, "prompt_evolution_era", "viewer-era",
                {"ops": {"evolution_era": {"config": ERA}}, "resources": gateway})  # fmt: skip
        folder_config = {"config": {"folder": str(platform.blind)}}
        sheet_assets = ("blind_eval_questions", "blind_eval_answers", "blind_eval_sheet")
        run_job(platform, "blind_evaluation_sheet", None, {"ops": {name: folder_config for name in sheet_assets}})
    filled = demo_rater_fill(platform.blind / "issued" / SHEET_FILE, platform.blind / "filled" / "demo-rater.xlsx")
    add_note(filled, f"Q1 cites no statute. {HOSTILE}")
    run_job(platform, "blind_evaluation_tally", None, {"ops": {"blind_eval_scores": folder_config}},
            assets=["blind_eval_scores"])  # fmt: skip
    return platform


def add_note(filled: Path, note: str) -> None:
    """A rater's note on the first question (the Notes cell of row 2)."""
    from openpyxl import load_workbook

    from eval_platform.blind.sheets import SHEET_NAME

    workbook = load_workbook(filled)
    sheet = workbook[SHEET_NAME]
    notes = next(cell.column_letter for cell in sheet[1] if cell.value == "Notes")
    sheet[f"{notes}2"] = note
    workbook.save(filled)


@pytest.fixture(scope="module")
def dagster_ui(platform):
    port = free_port()
    webserver = Path(sys.executable).with_name("dagster-webserver")
    base = f"http://127.0.0.1:{port}"
    with running([str(webserver), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)], f"{base}/server_info",
                 timeout_s=240, cwd=PROJECT_ROOT, env=platform.environment(), stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL):  # fmt: skip
        yield base


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    assert not missing, f"{missing} not installed: run `make browser` (part of `make test`)"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1500,1000"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def get(url: str) -> tuple[int, str, dict]:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


def warehouse_rows(platform: Platform, sql: str, params=()) -> list[tuple]:
    """Rows of the warehouse read here (between the viewer's short connections)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with duckdb.connect(str(platform.warehouse), read_only=True) as conn:
                return conn.execute(sql, list(params)).fetchall()
        except duckdb.IOException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def comparison_url(platform: Platform, benchmark: str, a: str, b: str, **more) -> str:
    query = urllib.parse.urlencode({"model": a, "against": b, **more})
    return f"{platform.viewer}/benchmarks/{benchmark}?{query}"


# --- served HTML and the listening socket ----------------------------------------------------------


def test_the_viewer_listens_on_127_0_0_1_alone_by_default(platform, viewer):
    import psutil

    listening = {
        (c.laddr.ip, c.laddr.port)
        for c in psutil.Process(viewer.pid).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    }
    assert listening == {("127.0.0.1", platform.viewer_port)}


def test_untrusted_text_is_served_as_text(platform, viewer):
    """A prompt, a model's answer and their diff, a compressed paragraph, a blind question, answer
    and rater's note, all holding markup and script: every page sends them escaped, never as markup,
    with a policy that would run no script anyway."""
    (prompt_id,) = warehouse_rows(
        platform, "SELECT prompt_id FROM generations WHERE compressed_text LIKE '%<script>%' LIMIT 1"
    )[0]
    (sheet_id,) = warehouse_rows(platform, "SELECT sheet_id FROM blind_issues")[0]
    pages = {
        "letter prompts": "/benchmarks/arc_easy/item?" + urllib.parse.urlencode(
            {"task": "arc_easy", "doc_id": 0, "model": "letter-api", "against": "smollm2"}),
        "generated answers and their diff": "/benchmarks/gsm8k/item?" + urllib.parse.urlencode(
            {"task": "gsm8k", "doc_id": 0, "model": "echo", "against": "answerer"}),
        "the list of items": "/benchmarks/gsm8k?" + urllib.parse.urlencode({"model": "echo", "against": "answerer"}),
        "an era's candidate": f"/evolution/viewer-era/candidate?prompt_id={urllib.parse.quote(prompt_id)}",
        "a blind question": f"/blind/{sheet_id}/question?id=Q1",
    }  # fmt: skip
    for name, path in pages.items():
        status, html, headers = get(platform.viewer + path)
        assert status == 200, name
        main = html.split("<main>", 1)[1]
        assert ESCAPED in main, f"{name}: the planted text is not shown escaped"
        assert "<script" not in html and "<img" not in html and "<b>bold?" not in html, name
        assert "script-src" not in headers["content-security-policy"]  # default-src 'none': no script
        assert "default-src 'none'" in headers["content-security-policy"]
    _, diff_page, _ = get(platform.viewer + pages["generated answers and their diff"])
    assert '<pre class="diff">' in diff_page and "<ins>" in diff_page  # the diff is markup of ours, its text escaped
    _, blind_page, _ = get(platform.viewer + pages["a blind question"])
    assert blind_page.count(ESCAPED) >= 3  # the question, answer A or B, and the rater's note


def test_a_search_or_a_name_holding_sql_finds_nothing_and_drops_nothing(platform, viewer):
    before = warehouse_rows(platform, "SELECT count(*) FROM samples")[0][0]
    status, html, _ = get(comparison_url(platform, "arc_easy", "letter-api", "smollm2", q=SQL))
    assert status == 200 and "0 match" in html and "No item matches these filters." in html
    status, html, _ = get(comparison_url(platform, "arc_easy", SQL, "smollm2"))
    assert status == 404 and "has no evaluation of arc_easy" in html
    status, _, _ = get(f"{platform.viewer}/benchmarks/{urllib.parse.quote(SQL, safe='')}")
    assert status == 404
    assert warehouse_rows(platform, "SELECT count(*) FROM samples")[0][0] == before > 0


# --- in the browser, from Dagster's links ----------------------------------------------------------


def page_text(browser, expected: list[str], timeout: float = 90) -> str:
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + timeout
    while True:
        text = browser.find_element(By.TAG_NAME, "body").text
        if all(item in text for item in expected):
            return text
        if time.monotonic() > deadline:
            (PROJECT_ROOT / ".test-artifacts").mkdir(exist_ok=True)
            browser.save_screenshot(str(PROJECT_ROOT / ".test-artifacts" / "viewer_failed.png"))
            raise AssertionError(f"{browser.current_url} never showed {[i for i in expected if i not in text]}")
        time.sleep(0.5)


def follow_metadata_link(browser, dagster_ui: str, asset: str, viewer: str, contains: str = "") -> None:
    """Open the asset's page in the Dagster UI and follow the link its latest materialisation's
    metadata carries to the viewer."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{dagster_ui}/assets/{asset}")
    selector = f'a[href^="{viewer}"]' + (f'[href*="{contains}"]' if contains else "")
    link = WebDriverWait(browser, 180).until(lambda driver: driver.find_elements(By.CSS_SELECTOR, selector))[0]
    IMAGES.mkdir(parents=True, exist_ok=True)
    href = link.get_attribute("href")
    link.click()  # Dagster opens it in a new tab
    WebDriverWait(browser, 30).until(lambda driver: len(driver.window_handles) > 1)
    browser.switch_to.window(browser.window_handles[-1])
    assert browser.current_url == href
    for handle in browser.window_handles[:-1]:
        browser.switch_to.window(handle)
        browser.close()
    browser.switch_to.window(browser.window_handles[-1])


def no_script_ran(browser) -> None:
    """The page's title is its own, and no element the planted markup would make exists."""
    assert "pwned" not in browser.title
    assert (
        browser.execute_script(
            "return document.querySelectorAll('script, img').length"
            " + [...document.querySelectorAll('b')].filter(b => b.textContent === 'bold?').length"
        )
        == 0
    )


def test_from_dagster_to_the_flipped_items_of_two_models_side_by_side(platform, viewer, dagster_ui, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    follow_metadata_link(browser, dagster_ui, "model_comparison", platform.viewer, "arc_easy")
    page_text(browser, ["A against B", "letter-api", "smollm2"])
    values = dict(
        ((task, doc_id), value)
        for task, doc_id, value in warehouse_rows(
            platform,
            "SELECT a.task, a.doc_id, (a.metrics->>'acc')::DOUBLE - (b.metrics->>'acc')::DOUBLE FROM samples a "
            "JOIN samples b USING (benchmark, task, doc_id, filter) WHERE a.benchmark = 'arc_easy' "
            "AND a.model = 'letter-api' AND b.model = 'smollm2'",
        )
    )
    flips = {"to_right": [k for k, v in values.items() if v > 0], "to_wrong": [k for k, v in values.items() if v < 0]}
    kind = max(flips, key=lambda k: len(flips[k]))  # the stub answers B: it flips some items either way
    assert flips[kind], f"letter-api and smollm2 score every item alike: {values}"
    Select(browser.find_element(By.NAME, "flipped")).select_by_value(kind)
    browser.find_element(By.CSS_SELECTOR, "form.choices button").click()
    text = page_text(browser, [f"{len(flips[kind])} match"])
    shown = [("arc_easy", int(a.text)) for a in browser.find_elements(By.CSS_SELECTOR, "table.items a.item")]
    assert sorted(shown) == sorted(flips[kind]) and "flipped" in browser.current_url
    no_script_ran(browser)
    browser.save_screenshot(str(IMAGES / "viewer_flipped_items.png"))
    task, doc_id = shown[0]
    browser.find_element(By.CSS_SELECTOR, "table.items a.item").click()
    (question,) = warehouse_rows(
        platform,
        "SELECT d.doc ->> 'question' FROM samples s JOIN documents d USING (benchmark, document_id) "
        "WHERE s.benchmark = 'arc_easy' AND s.task = ? AND s.doc_id = ? LIMIT 1",
        [task, doc_id],
    )[0]
    text = page_text(browser, ["A: letter-api", "B: smollm2", "probability of the first answer token"])
    sides = browser.find_elements(By.CSS_SELECTOR, "section.side")
    assert len(sides) == 2
    expected = {"letter-api": 1.0 if kind == "to_right" else 0.0, "smollm2": 0.0 if kind == "to_right" else 1.0}
    for side, model in zip(sides, ("letter-api", "smollm2"), strict=True):
        side_text = " ".join(side.text.split())
        assert " ".join(question.split()[:6]) in side_text  # its prompt's question
        assert "user" in side_text and "system" in side_text  # the chat's turns
        assert side.find_elements(By.CSS_SELECTOR, "table.choices tr.highest")  # its answer
        assert f"acc under none: {expected[model]:g}" in side_text  # its score
    assert "reference" in text
    no_script_ran(browser)
    browser.save_screenshot(str(IMAGES / "viewer_item_side_by_side.png"))


def test_two_generated_answers_read_as_a_diff(platform, viewer, browser):
    from selenium.webdriver.common.by import By

    browser.get(f"{platform.viewer}/benchmarks/gsm8k/item?task=gsm8k&doc_id=0&model=echo&against=answerer")
    page_text(browser, ["A's and B's generated texts", "only in A", "only in B"])
    diff = browser.find_element(By.CSS_SELECTOR, "pre.diff")
    assert "Answer to:" in " ".join(
        e.text for e in diff.find_elements(By.TAG_NAME, "del") + diff.find_elements(By.TAG_NAME, "ins")
    )
    assert '<script>document.title="pwned"</script>' in diff.text  # the echoed question, as text
    no_script_ran(browser)
    browser.save_screenshot(str(IMAGES / "viewer_generated_diff.png"))


def test_from_dagster_to_an_era_candidate_with_every_judge(platform, viewer, dagster_ui, browser):
    from selenium.webdriver.common.by import By

    follow_metadata_link(browser, dagster_ui, "evolution_era", platform.viewer)
    page_text(browser, ["era viewer-era", "Generations", "Candidates of generation 2"])
    browser.save_screenshot(str(IMAGES / "viewer_era.png"))
    first = browser.find_element(By.CSS_SELECTOR, "table.candidates a.candidate")
    prompt_id = first.text
    first.click()
    text = page_text(browser, [f"prompt {prompt_id}", "Judges", "Compression", "Ancestry", "fitness"])
    expected = warehouse_rows(
        platform,
        "SELECT judge_name, score, comments FROM judge_scores WHERE era = 'viewer-era' AND prompt_id = ? "
        "ORDER BY judge_name",
        [prompt_id],
    )
    rows = browser.find_elements(By.CSS_SELECTOR, "table.verdicts tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == [name for name, _, _ in expected]
    for row, (_, score, comments) in zip(rows, expected, strict=True):
        assert (comments or "") in row.text and (score is None or f"{score:g}" in row.text)
    (compressed, fitness) = warehouse_rows(
        platform,
        "SELECT compressed_text, fitness FROM generations WHERE era = 'viewer-era' AND prompt_id = ? "
        "ORDER BY carried_over, generation LIMIT 1",
        [prompt_id],
    )[0]
    assert " ".join(compressed.split()[:5]) in text and f"fitness {fitness:.4g}" in text
    no_script_ran(browser)
    browser.save_screenshot(str(IMAGES / "viewer_candidate.png"))


def test_from_dagster_to_a_blind_question_whose_key_waits_for_the_tally(platform, viewer, dagster_ui, browser):
    from selenium.webdriver.common.by import By

    follow_metadata_link(browser, dagster_ui, "blind_eval_sheet", platform.viewer)
    page_text(browser, ["Not tallied yet", "Questions"])
    browser.find_element(By.XPATH, "//a[normalize-space()='Q1']").click()
    text = page_text(browser, ["answer A", "answer B", "Ratings", "demo-rater", "The key stays hidden"])
    systems = [s for (s,) in warehouse_rows(platform, "SELECT DISTINCT system FROM blind_answers")]
    assert len(systems) == 2 and not any(system in text for system in systems)  # the key is hidden
    (score_a, score_b) = warehouse_rows(
        platform,
        "SELECT max(score) FILTER (WHERE side = 'A'), max(score) FILTER (WHERE side = 'B') FROM blind_scores "
        "WHERE Question_ID = 'Q1'",
    )[0]
    rating = browser.find_element(By.CSS_SELECTOR, "table.ratings tbody tr").text
    assert rating.startswith(f"demo-rater {score_a} {score_b}") and f"Q1 cites no statute. {HOSTILE}" in rating
    no_script_ran(browser)
    browser.save_screenshot(str(IMAGES / "viewer_blind_question_before_tally.png"))

    folder = {"config": {"folder": str(platform.blind)}}
    run_job(platform, "blind_evaluation_tally", None, {"ops": {"blind_eval_scores": folder}})
    browser.refresh()
    text = page_text(browser, ["The key (the sheet is tallied)"])
    (system_a, system_b) = warehouse_rows(
        platform, "SELECT system_a, system_b FROM blind_key WHERE Question_ID = 'Q1'"
    )[0]
    assert f"answer A is {system_a}'s, answer B is {system_b}'s" in text
    browser.save_screenshot(str(IMAGES / "viewer_blind_question_after_tally.png"))
