"""The sample viewer, with real parts: Dagster materialisations of every domain (the real SmolLM2 and
API models behind the local OpenAI stub, an era judged by three judges, a blind sheet filled and
tallied) into a DuckDB file, `dagster-webserver` and the viewer as processes, and a real Chromium.

Untrusted text is planted where users' data and models' outputs land: a dataset's question (so a
prompt, a model's echoed answer and a judging item hold it), a paragraph an era compresses, a blind
question, an answer and a rater's note, and a judge's reply. Every page of the viewer (its routes,
read from the app) shows it as text and runs none of it, and Dagster's asset pages whose metadata
holds it run none of it either; a search or a name holding SQL finds nothing and drops nothing; the
viewer listens on 127.0.0.1 alone. From the link in an asset's metadata, the browser reaches the
flipped items of two models, an era's candidate and a blind question (whose key appears only once a
tally exists). Screenshots: docs/images/viewer_*.png, written
there with EVAL_UPDATE_SCREENSHOTS=1 (a temporary folder otherwise, so a run leaves the tree clean)."""

import html.parser
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

from tests.browser import chromium, page_text
from tests.conftest import PROJECT_ROOT
from tests.openai_stub_server import StubServer, pairwise_judgment
from tests.processes import WAIT_S, free_port, running

# every test here shares a module fixture that takes seconds to a minute: the fast tier leaves them out
pytestmark = pytest.mark.slow

IMAGES = (
    PROJECT_ROOT / "docs" / "images"
    if os.environ.get("EVAL_UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.mkdtemp(prefix="viewer-screenshots-"))
)
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'"><b>bold?</b>'
ESCAPED = "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;&lt;img src=x onerror="
# Markup that runs wherever it is rendered rather than shown: a script, event handlers and a Markdown link to
# `javascript:`, each setting window.__pwned (and the first two raising an alert).
SCRIPTED = (
    '<script>window.__pwned=1;alert("pwned")</script><img src=x onerror="window.__pwned=1;alert(\'pwned\')">'
    ' <svg onload="window.__pwned=1"></svg> [planted link](javascript:window.__pwned=1)'
)
PLANTED = f"{HOSTILE} {SCRIPTED}"
HOSTILE_JUDGE = "openai/judge-hostile"  # a pairwise judge whose every reply starts with PLANTED
SQL = "'; DROP TABLE samples; --"
ROSTER = {  # name: entry fields (the local model by default)
    "smollm2": {"solvers": ["letter"]},
    "letter-api": {"model": "openai/letter-logprobs", "solvers": ["letter"], "baseline": "smollm2"},
    "answerer": {"model": "openai/answerer", "solvers": ["generate"]},
    "echo": {"model": "openai/echo", "solvers": ["generate"], "baseline": "answerer"},
}
# in this order: the latest materialisation of model_comparison, which its asset page shows, is ARC-Easy's
EVALUATIONS = {"gsm8k": ["answerer", "echo"], "gsm8k_cot": ["answerer", "echo"], "arc_easy": ["smollm2", "letter-api"]}
# launched with sampling: the harness's task, three answers a document
SAMPLED = {
    "gsm8k_cot": {
        "solvers": ["harness"],
        "apply_chat_template": True,
        "repeats": 3,
        "temperature": 0.7,
        "limit": 2,
        "max_gen_toks": 24,
    }
}
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


def hostile_rows(source: Path, target: Path, field: str, rows: int, start: str = "", end: str = HOSTILE) -> Path:
    """A data file's first rows, the first with `start` and `end` around its `field`."""
    lines = source.read_text(encoding="utf-8").splitlines()[:rows]
    first = json.loads(lines[0])
    first[field] = " ".join(part for part in (start, first[field], end) if part)
    target.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    return target


def blind_folder(target: Path) -> Path:
    """The shipped blind evaluation, with PLANTED in Q1's question and in one system's answer to it."""
    shutil.copytree(PROJECT_ROOT / "data" / "blind_eval", target)
    questions = pd.read_csv(target / "questions.csv", dtype=str)
    questions.loc[questions["Question_ID"] == "Q1", "Question"] += f" {PLANTED}"
    questions.to_csv(target / "questions.csv", index=False)
    answers = pd.read_csv(target / "answers" / "demo-rag.csv", dtype=str)
    answers.loc[answers["Question_ID"] == "Q1", "Answer"] = f"{PLANTED} " + answers["Answer"]
    answers.to_csv(target / "answers" / "demo-rag.csv", index=False)
    return target


class HostileJudgeStub(StubServer):
    """The suite's OpenAI stub, with one more model: `judge-hostile`, a pairwise judge that prefers the
    longer answer (as `judge-pairwise`) and starts every reply with PLANTED."""

    def reply(self, model: str, prompt: str) -> tuple[int, str]:
        status, text = super().reply(model, prompt)
        if self.aliases.get(model, model) == HOSTILE_JUDGE.removeprefix("openai/"):
            return 200, f"{PLANTED}\n\n{pairwise_judgment(prompt)}"
        return status, text


def code_location(platform: Platform):
    from dagster import Definitions

    from eval_platform.definitions import defs
    from eval_platform.resources import LanguageModelResource, ModelGatewayResource, RosterResource, WarehouseResource

    return Definitions(
        assets=list(defs().assets or []),
        jobs=list(defs().jobs or []),
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
    command = [sys.executable, "-m", "eval_platform.cli", "viewer", "--port", str(site.viewer_port)]
    with running(command, site.viewer + "/", timeout_s=WAIT_S, cwd=PROJECT_ROOT, env=site.environment(),
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as process:  # fmt: skip
        yield process


@pytest.fixture(scope="module")
def platform(site, viewer, tmp_path_factory):
    """Every domain materialised as the jobs run it, with the viewer's links in the metadata; the
    blind sheet filled but not tallied yet; then judged by a judge whose replies hold PLANTED: pairs
    of LLMBar, of two models' GSM8K answers and of the blind sheet (sets of the platform's own, their
    items holding the planted text), and MT-Bench's."""
    from dagster import DagsterInstance

    from eval_platform.blind.raters import demo_rater_fill
    from eval_platform.blind.sheets import SHEET_FILE
    from eval_platform.evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions

    platform, home, folder = site, site.home, tmp_path_factory.mktemp("viewer_inputs")
    data = PROJECT_ROOT / "data"
    benchmarks = data / "benchmarks"
    sources = {
        "arc_easy": hostile_rows(benchmarks / "arc_easy.jsonl", folder / "arc_easy.jsonl", "question", 8),
        # a list of items shows a prompt's end: HOSTILE there, SCRIPTED at the start
        "gsm8k": hostile_rows(benchmarks / "gsm8k.jsonl", folder / "gsm8k.jsonl", "question", 4, SCRIPTED),
    }
    sources["gsm8k_cot"] = sources["gsm8k"]
    # at its start: the stub's compressor keeps a paragraph's first words
    paragraphs = hostile_rows(
        data / "evolution" / "paragraphs.jsonl", folder / "paragraphs.jsonl", "text", 3, PLANTED, ""
    )
    with HostileJudgeStub() as stub, pytest.MonkeyPatch.context() as patch:
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
            sampled = {"benchmark_evaluation": {"config": SAMPLED[benchmark]}} if benchmark in SAMPLED else {}
            for model in models:
                run_job(platform, "model_evaluation", evaluation_key(benchmark, model),
                        {"resources": gateway, "ops": sampled})  # fmt: skip
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
    with HostileJudgeStub() as stub, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-viewer-not-a-real-key")
        sets = {"judging_sets": {"config": {"generations": ["gsm8k|answerer|echo"]}}}  # and every rated blind sheet
        run_job(platform, "judging_inputs", None, {"ops": sets}, assets=["judging_sets", "mt_bench_inputs"])
        judges, rounds = [HOSTILE_JUDGE], {"config": {"rounds": 20}}
        panel = {
            # LLMBar's first: its verdicts come first in the asset's examples, set names without a `|`
            "pairwise_verdicts": {
                "config": {"judges": judges, "sets": ["llmbar_natural", "gsm8k|*", "blind|*"], "items": 5}
            },
            "mt_bench_verdicts": {"config": {"judges": judges, "questions": [81]}},
            "judge_agreement": rounds,
            "mt_bench_leaderboard": rounds,
        }
        run_job(platform, "judging", None, {"ops": panel, "resources": {"gateway": stub.gateway_config()}})
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
                 timeout_s=WAIT_S, cwd=PROJECT_ROOT, env=platform.environment(), stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL):  # fmt: skip
        yield base


@pytest.fixture(scope="module")
def browser():
    with chromium() as driver:
        yield driver


def get(url: str) -> tuple[int, str, dict]:
    try:
        with urllib.request.urlopen(url, timeout=WAIT_S) as response:
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


def follow_metadata_link(browser, dagster_ui: str, asset: str, viewer: str, contains: str = "") -> None:
    """Open the asset's page in the Dagster UI and follow the link its latest materialisation's
    metadata carries to the viewer."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{dagster_ui}/assets/{asset}")
    selector = f'a[href^="{viewer}"]' + (f'[href*="{contains}"]' if contains else "")
    link = WebDriverWait(browser, WAIT_S).until(lambda driver: driver.find_elements(By.CSS_SELECTOR, selector))[0]
    IMAGES.mkdir(parents=True, exist_ok=True)
    href = link.get_attribute("href")
    link.click()  # Dagster opens it in a new tab
    WebDriverWait(browser, WAIT_S).until(lambda driver: len(driver.window_handles) > 1)
    browser.switch_to.window(browser.window_handles[-1])
    assert browser.current_url == href
    for handle in browser.window_handles[:-1]:
        browser.switch_to.window(handle)
        browser.close()
    browser.switch_to.window(browser.window_handles[-1])


# On an open page, the elements planted markup would make: an element with an event handler, the planted
# image, a link to `javascript:` that does something (a Markdown link rendered: a sanitiser leaves `void(0)`), a
# script holding the planted words.
PLANTED_ELEMENTS = """
const shown = e => e.outerHTML.slice(0, 120);
const runs = href => /^\\s*javascript:/i.test(href) && !/^\\s*javascript:\\s*void\\(0\\);?\\s*$/i.test(href);
return [
  ...[...document.querySelectorAll('[onerror], [onload], img[src="x"]')].map(shown),
  ...[...document.querySelectorAll('a[href]')].filter(a => runs(a.getAttribute('href'))).map(shown),
  ...[...document.querySelectorAll('script')].filter(s => s.textContent.includes('pwned')).map(shown),
];
"""


def open_page(browser, url: str) -> list[str]:
    """Open `url`: what shows that markup planted in it ran (`planted_script_ran`), an alert raised
    while it loaded included."""
    from selenium.common.exceptions import UnexpectedAlertPresentException

    try:
        browser.get(url)
    except UnexpectedAlertPresentException as error:
        return [f"an alert while loading: {error.alert_text!r}", *planted_script_ran(browser)]
    return planted_script_ran(browser)


def planted_script_ran(browser) -> list[str]:
    """What shows, on the open page, that planted markup ran or was made into elements: alerts (each
    dismissed), window.__pwned set, the title the planted script writes, an element `PLANTED_ELEMENTS`
    finds."""
    from selenium.common.exceptions import NoAlertPresentException, UnexpectedAlertPresentException

    signs = []
    for _ in range(20):
        try:
            alert = browser.switch_to.alert
            signs.append(f"an alert: {alert.text!r}")
            alert.dismiss()
            continue
        except NoAlertPresentException:
            pass
        try:
            pwned, title, elements = browser.execute_script(
                f"return [window.__pwned, document.title, (() => {{ {PLANTED_ELEMENTS} }})()]"
            )
            break
        except UnexpectedAlertPresentException as error:  # raised, and dismissed, meanwhile
            signs.append(f"an alert: {error.alert_text!r}")
    else:
        return [*signs, "alert after alert"]
    if pwned is not None:
        signs.append(f"window.__pwned is {pwned!r}")
    if title == "pwned":
        signs.append("the title is the one the planted script writes")
    return signs + [f"an element of the planted markup: {element}" for element in elements]


def no_script_ran(browser) -> None:
    """The page's title is its own, and no element the planted markup would make exists."""
    signs = planted_script_ran(browser)
    assert not signs, f"{browser.current_url}: {signs}"
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


def test_two_models_k_samples_read_side_by_side(platform, viewer, browser):
    """A sampled document of two models: a line per sample index, a cell per model, each sample's
    text as the warehouse keeps it, why it ended and its score under the side's filter."""
    from selenium.webdriver.common.by import By

    kept = warehouse_rows(
        platform,
        "SELECT model, sample, value FROM sample_scores WHERE benchmark = 'gsm8k_cot' AND doc_id = 0 "
        "AND filter = 'strict-match' AND metric = 'exact_match' ORDER BY model, sample",
    )
    assert [(model, sample) for model, sample, _ in kept] == [(m, k) for m in ("answerer", "echo") for k in range(3)]
    browser.get(
        f"{platform.viewer}/benchmarks/gsm8k_cot/item?task=gsm8k_cot&doc_id=0&model=echo&against=answerer"
        "&score=exact_match,strict-match"
    )
    page_text(browser, ["The samples side by side", "A: echo (3 samples", "B: answerer (3 samples"])
    lines = browser.find_elements(By.CSS_SELECTOR, "table.samples tbody tr")
    assert [line.find_element(By.TAG_NAME, "th").text for line in lines] == ["0", "1", "2"]
    for line, (_, _, echo), (_, _, answerer) in zip(lines, kept[3:], kept[:3], strict=True):
        cells = line.find_elements(By.TAG_NAME, "td")
        assert len(cells) == 2 and all("ended: " in cell.text for cell in cells)
        assert f"exact_match {echo:g}" in cells[0].text and f"exact_match {answerer:g}" in cells[1].text
        assert cells[1].find_element(By.CSS_SELECTOR, "pre.sample").text.startswith("Answer to:")
    assert "3 samples, side by side above" in browser.find_element(By.ID, "side-1").text
    no_script_ran(browser)
    browser.save_screenshot(str(IMAGES / "viewer_samples_side_by_side.png"))


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


# --- every page, in the browser: planted markup shown as text, never run ----------------------------

PLANTED_START = '<script>document.title="pwned"</script>'  # HOSTILE's start: every planted text holds it
# The viewer's pages that show no stored text, only names and figures: its home page and each section's first.
NO_STORED_TEXT = {"/", "/benchmarks", "/evolution", "/blind", "/judging"}
PAGES_PER_ROUTE = 4  # of a route, the pages opened from links (the planted pages besides)


class PageParts(html.parser.HTMLParser):
    """A page's links within the viewer, and the elements planted markup would make in it."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.links: list[str] = []
        self.planted: list[str] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        handlers = [name for name in values if name.startswith("on")]
        href = values.get("href", "")
        if (
            tag in ("script", "img", "svg", "iframe", "object", "embed")
            or handlers
            or href.strip().lower().startswith("javascript:")
        ):
            self.planted.append(self.get_starttag_text() or tag)
        if tag == "a" and href.startswith("/") and not href.startswith("//"):
            self.links.append(href)


def viewer_routes(platform: Platform) -> dict:
    """The viewer's pages as its app declares them: {path template: route} (its static files aside)."""
    from starlette.routing import Route

    from eval_platform.viewer.app import build_app
    from eval_platform.viewer.warehouse import WarehouseSource

    app = build_app(WarehouseSource(str(platform.warehouse)))
    return {route.path: route for route in app.routes if isinstance(route, Route)}


def route_of(routes: dict, path: str) -> str | None:
    """The template of the route that serves `path` (None: no page of the viewer)."""
    from starlette.routing import Match

    scope = {"type": "http", "method": "GET", "root_path": "", "path": urllib.parse.unquote(path.split("?")[0])}
    return next((template for template, route in routes.items() if route.matches(scope)[0] == Match.FULL), None)


def planted_pages(platform: Platform) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Pages whose stored text holds the planted markup, their parameters filled from the planted rows,
    and pages that show a request's own text back (in a form, or an error): {path: (status, the
    texts the page shows)}."""
    query = urllib.parse.urlencode
    (prompt_id, generation, compressed) = warehouse_rows(
        platform,
        "SELECT prompt_id, generation, compressed_text FROM generations WHERE era = 'viewer-era' "
        "AND compressed_text LIKE '%window.__pwned%' ORDER BY generation, prompt_id LIMIT 1",
    )[0]
    (sheet_id,) = warehouse_rows(platform, "SELECT sheet_id FROM blind_issues")[0]
    judged = [
        name
        for (name,) in warehouse_rows(
            platform, "SELECT DISTINCT set_name FROM all_verdicts WHERE judge = ? ORDER BY 1", [HOSTILE_JUDGE]
        )
    ]
    assert len(judged) == 4, judged  # LLMBar's, two models' GSM8K answers, the blind sheet, MT-Bench's pairs
    pair = {"model": "echo", "against": "answerer"}
    return {
        "/benchmarks/gsm8k?" + query(pair): (200, (PLANTED_START,)),  # a prompt's end
        "/benchmarks/gsm8k/item?" + query({**pair, "task": "gsm8k", "doc_id": 0}): (200, (SCRIPTED, HOSTILE)),
        "/evolution/viewer-era?" + query({"generation": generation}): (200, (PLANTED_START,)),  # the start of each
        "/evolution/viewer-era/candidate?" + query({"prompt_id": prompt_id}): (200, (compressed, PLANTED)),
        f"/blind/{sheet_id}": (200, (PLANTED,)),
        f"/blind/{sheet_id}/question?id=Q1": (200, (PLANTED,)),
        **{"/judging/verdicts?" + query({"judge": HOSTILE_JUDGE, "set": name}): (200, (PLANTED,)) for name in judged},
        # a request's own text, in its form or its error (as Python writes it: PLANTED_START, its quotes kept)
        "/benchmarks/gsm8k?" + query({**pair, "q": PLANTED}): (200, (PLANTED,)),
        "/benchmarks/gsm8k?" + query({"model": PLANTED}): (404, (PLANTED,)),
        "/evolution/viewer-era?" + query({"generation": PLANTED}): (404, (PLANTED_START,)),
        "/evolution/viewer-era/candidate?" + query({"prompt_id": PLANTED}): (404, (PLANTED_START,)),
        f"/blind/{sheet_id}/question?" + query({"id": PLANTED}): (404, (PLANTED_START,)),
        "/judging/verdicts?" + query({"judge": PLANTED, "set": PLANTED}): (200, (PLANTED,)),
    }


def shown_text(browser) -> str:
    """The open page's text as a reader gets it: <main>'s, and what its form fields hold."""
    return browser.execute_script(
        "return document.querySelector('main').textContent + '\\n'"
        " + [...document.querySelectorAll('input, textarea')].map(e => e.value).join('\\n')"
    )


def test_planted_markup_is_text_on_every_viewer_page(platform, viewer, browser):
    """Every route of the viewer's app, opened in Chromium: the pages holding the planted rows (a
    GSM8K prompt and two models' answers to it, an era's compression, a blind question, answer and
    note, each judging set's items and the judge's replies), those a request's own text comes back
    on, and the pages their links reach. No page runs the planted script or makes its elements, and
    each page that shows stored text was seen showing the planted markup as text."""
    routes, planted = viewer_routes(platform), planted_pages(platform)
    assert len(routes) >= 12 and set(NO_STORED_TEXT) <= set(routes), sorted(routes)
    queue = [*planted, "/"]  # and what their links reach
    opened: dict[str, str] = {}  # path: its route
    from_links: dict[str, int] = {}
    shown_as_text: set[str] = set()
    while queue:
        path = queue.pop(0)
        route = route_of(routes, path)
        assert route is not None, f"{path}: a link to no page of the viewer"
        if path in opened or (path not in planted and from_links.get(route, 0) >= PAGES_PER_ROUTE):
            continue
        if path not in planted:
            from_links[route] = from_links.get(route, 0) + 1
        opened[path] = route
        status, texts = planted.get(path, (200, ()))
        code, page, headers = get(platform.viewer + path)
        assert code == status, f"{path}: HTTP {code}"
        assert "default-src 'none'" in headers["content-security-policy"], path  # no script runs there anyway
        assert "script-src" not in headers["content-security-policy"], path
        parts = PageParts(page)
        assert not parts.planted and "<b>bold?" not in page, f"{path}: markup in the page: {parts.planted}"
        queue += parts.links
        signs = open_page(browser, platform.viewer + path)
        assert not signs, f"{path}: the planted markup ran: {signs}"
        text = shown_text(browser)
        missing = [t[:60] for t in texts if t not in text]
        assert not missing, f"{path}: not shown as text: {missing}"
        if PLANTED_START in text:
            shown_as_text.add(route)
        if route == "/judging/verdicts" and f"judge={urllib.parse.quote(HOSTILE_JUDGE, safe='')}" in path:
            words = browser.execute_script(
                "return [...document.querySelectorAll('div.text')]"
                ".filter(d => d.querySelector('.label')?.textContent === \"the judge's words\")"
                ".map(d => d.querySelector('pre').textContent)"
            )
            assert words and all(w.startswith(f"{PLANTED}\n\n") and "Final verdict: [[" in w for w in words), path
    assert set(opened.values()) == set(routes), f"pages never opened: {sorted(set(routes) - set(opened.values()))}"
    stored = set(routes) - NO_STORED_TEXT
    assert stored <= shown_as_text, f"never seen showing the planted markup as text: {sorted(stored - shown_as_text)}"


def planted_metadata(platform: Platform) -> dict[str, list[str]]:
    """Dagster's asset pages that show planted text in a materialisation's metadata: {the page's path:
    the metadata keys holding it}. An asset's page shows its latest materialisation; a partitioned
    asset's partition page, that partition's latest."""
    from dagster import DagsterInstance

    pages: dict[str, list[str]] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", str(platform.home))
        with DagsterInstance.get() as instance:
            for key in instance.get_asset_keys():
                latest = {}  # partition: its latest materialisation, the newest first
                for record in instance.fetch_materializations(key, limit=1000).records:
                    materialisation = record.asset_materialization
                    assert materialisation is not None
                    latest.setdefault(materialisation.partition, materialisation)
                asset = "/".join(key.path)
                for index, (partition, materialisation) in enumerate(latest.items()):
                    names = [name for name, value in materialisation.metadata.items() if "pwned" in str(value.value)]
                    if names and index == 0:
                        pages[f"/assets/{asset}"] = names
                    if names and partition is not None:
                        query = urllib.parse.urlencode({"view": "partitions", "partition": partition})
                        pages[f"/assets/{asset}?{query}"] = names
    return pages


def show_every_markdown_entry(browser, path: str) -> str:
    """Open each of the page's "[Show Markdown]" metadata entries in turn, each checked for planted
    markup that ran (and its planted Markdown links clicked): the text they show, together."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    buttons = "//*[contains(text(), 'Show Markdown')]"
    shown = []
    for index in range(len(browser.find_elements(By.XPATH, buttons))):
        button = browser.find_elements(By.XPATH, buttons)[index]
        WebDriverWait(browser, WAIT_S).until(expected_conditions.element_to_be_clickable(button)).click()
        dialog = WebDriverWait(browser, WAIT_S).until(lambda d: d.find_elements(By.CSS_SELECTOR, "[role=dialog]"))[0]
        shown.append(
            WebDriverWait(browser, WAIT_S).until(lambda d: d.find_element(By.CSS_SELECTOR, "[role=dialog]").text)
        )
        signs = planted_script_ran(browser)
        for link in dialog.find_elements(By.LINK_TEXT, "planted link"):  # a Markdown link to javascript:
            link.click()
            signs += planted_script_ran(browser)
        assert not signs, f"{path}: the planted markup ran in a metadata entry: {signs}"
        dialog.find_element(By.XPATH, ".//button[normalize-space()='Close']").click()
        WebDriverWait(browser, WAIT_S).until(lambda d: not d.find_elements(By.CSS_SELECTOR, "[role=dialog]"))
    return "\n".join(shown)


def test_planted_markup_runs_no_script_on_dagsters_asset_pages(platform, dagster_ui, browser):
    """Dagster's own pages of the assets whose metadata holds the planted prompts, answers and judges'
    replies (found in the instance: each page showing a materialisation whose metadata holds them),
    opened in Chromium with each Markdown entry shown: no planted script runs, no planted element or
    link is made, and the entries show the planted text (as text, or what a sanitiser leaves of it)."""
    from selenium.webdriver.common.by import By

    pages = planted_metadata(platform)
    assets = {path.split("?")[0].removeprefix("/assets/") for path in pages}
    # the prompts and answers of every evaluation, the judges' replies, the blind questions and answers
    assert {"benchmark_evaluation", "pairwise_verdicts", "mt_bench_verdicts", "blind_eval_questions"} <= assets
    assert any("partition=gsm8k%7Cecho" in path for path in pages), sorted(pages)  # the echoed prompt
    for path, names in pages.items():
        signs = open_page(browser, dagster_ui + path)
        assert not signs, f"{path}: the planted markup ran: {signs}"
        page_text(browser, ["Metadata", *names])
        shown = show_every_markdown_entry(browser, path) + browser.find_element(By.TAG_NAME, "body").text
        signs = planted_script_ran(browser)
        assert not signs, f"{path}: the planted markup ran: {signs}"
        assert "pwned" in shown, f"{path}: the planted text of {names} is not shown"
