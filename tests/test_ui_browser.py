"""The Dagster UI in a real headless Chromium: `dagster dev` on 127.0.0.1, the asset groups, jobs,
schedule and sensor shown, one materialisation launched from the UI and seen to succeed.

Chromium and its driver are Debian packages that `make test` installs (`make browser`)."""

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest

from tests.conftest import PROJECT_ROOT

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SCREENSHOTS = PROJECT_ROOT / ".test-artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory):
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    assert not missing, f"{missing} not installed: run `make browser` (part of `make test`)"
    home = tmp_path_factory.mktemp("dagster_home")
    warehouse = home / "warehouse.duckdb"
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "EVAL_WAREHOUSE": str(warehouse)}
    dagster = Path(sys.executable).with_name("dagster")
    server = subprocess.Popen([str(dagster), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
                              cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{base}/server_info", timeout=2)
                break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("dagster dev did not answer within 120 s")
        yield base, warehouse
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1600,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def page_text(browser, url: str, expected: list[str], timeout: float = 60) -> str:
    from selenium.webdriver.common.by import By

    browser.get(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = browser.find_element(By.TAG_NAME, "body").text
        if all(item in text for item in expected):
            return text
        time.sleep(1)
    raise AssertionError(f"{url} never showed {[i for i in expected if i not in text]}")


def test_asset_groups_jobs_schedule_and_sensor_are_shown(dagster_ui, browser):
    base, _ = dagster_ui
    page_text(browser, f"{base}/asset-groups", [
        "benchmark_ingestion", "benchmark_preprocessing", "benchmark_prediction", "benchmark_scoring",
        "prompt_evolution", "blind_evaluation"])
    SCREENSHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "asset_groups.png"))
    page_text(browser, f"{base}/jobs", ["benchmark_refresh", "prompt_evolution_era", "blind_evaluation_sheet",
                                        "blind_evaluation_tally"])
    page_text(browser, f"{base}/automation", ["nightly_benchmark_refresh", "blind_eval_filled_sheet_sensor"])


def test_materialise_from_the_ui(dagster_ui, browser):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    base, warehouse = dagster_ui
    SCREENSHOTS.mkdir(exist_ok=True)
    launched = False
    for _ in range(3):  # the UI may still be loading, or a dialog may cover the button
        page_text(browser, f"{base}/assets/source_paragraphs", ["source_paragraphs", "Materialize"])
        time.sleep(2)
        for skip in browser.find_elements(By.XPATH, "//button[normalize-space()='Skip']"):
            skip.click()  # the community newsletter dialog
        button = WebDriverWait(browser, 60).until(expected_conditions.element_to_be_clickable(
            (By.XPATH, "//button[normalize-space()='Materialize']")))
        button.click()
        try:  # stay on the page until the UI confirms the launch (leaving earlier can cancel it)
            WebDriverWait(browser, 60).until(
                lambda driver: "Launched run" in driver.find_element(By.TAG_NAME, "body").text)
            launched = True
            break
        except TimeoutException:
            browser.save_screenshot(str(SCREENSHOTS / "launch_retry.png"))
    assert launched, "the UI never confirmed a launch after clicking Materialize three times"
    text = page_text(browser, f"{base}/runs", ["source_paragraphs"])
    deadline = time.monotonic() + 240
    while "Success" not in text and time.monotonic() < deadline:
        assert "Failure" not in text, text
        time.sleep(3)
        text = page_text(browser, f"{base}/runs", ["source_paragraphs"])
    browser.save_screenshot(str(SCREENSHOTS / "run_succeeded.png"))
    assert "Success" in text
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM source_paragraphs").fetchone()[0] == 3
