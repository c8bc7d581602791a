"""A real browser for the tests: headless Chromium driven through chromedriver, stopped whatever it
does, and the text of the page it shows once that holds what a test expects."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import PROJECT_ROOT
from tests.processes import WAIT_S, free_port, running

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
ARTIFACTS = PROJECT_ROOT / ".test-artifacts"


@contextmanager
def chromium() -> Iterator:
    """A headless Chromium driven through chromedriver, both stopped on the way out whatever they do
    with SIGTERM: chromedriver runs in a session of its own with Chromium below it (`running`: the
    group gets SIGTERM, then SIGKILL), and Chromium's crash handlers, which start sessions of their
    own, are found by the folder they are given (their profile's, in a scratch folder of this
    browser's) and killed by their ids."""
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException

    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    assert not missing, f"{missing} not installed: run `make browser` (part of `make test`)"
    scratch = Path(tempfile.mkdtemp(prefix="viewer-chromium-"))
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1500,1000", f"--user-data-dir={scratch / 'profile'}"):  # fmt: skip
        options.add_argument(flag)
    port = free_port()
    env = {**os.environ, "XDG_CONFIG_HOME": str(scratch / "config"), "XDG_CACHE_HOME": str(scratch / "cache")}
    try:
        with running([CHROMEDRIVER, f"--port={port}"], f"http://127.0.0.1:{port}/status", timeout_s=WAIT_S, grace_s=5,
                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):  # fmt: skip
            driver = webdriver.Remote(f"http://127.0.0.1:{port}", options=options)
            try:
                yield driver
            finally:
                try:
                    driver.quit()
                except WebDriverException:  # a browser that no longer answers: its group is killed next
                    pass
    finally:
        kill_processes_naming(scratch)
        shutil.rmtree(scratch, ignore_errors=True)


def kill_processes_naming(folder: Path, wait_s: float = 10.0) -> None:
    """SIGKILL every process whose command line names `folder` (a folder of this test's own), and
    wait for them to end."""
    import psutil

    def naming() -> list[psutil.Process]:
        found = []
        for process in psutil.process_iter(["cmdline"]):
            try:
                if str(folder) in " ".join(process.info["cmdline"] or ()):
                    found.append(process)
            except psutil.Error:
                continue
        return found

    for process in naming():
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.Error:
            continue
    _, alive = psutil.wait_procs(naming(), timeout=wait_s)
    assert not alive, f"still running after SIGKILL: {[p.pid for p in alive]}"


def page_text(browser, expected: list[str], timeout: float = WAIT_S) -> str:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + timeout
    while True:
        try:
            text = browser.find_element(By.TAG_NAME, "body").text
        except (NoSuchElementException, StaleElementReferenceException):  # the page is being replaced
            text = ""
        if all(item in text for item in expected):
            return text
        if time.monotonic() > deadline:
            ARTIFACTS.mkdir(exist_ok=True)
            browser.save_screenshot(str(ARTIFACTS / "page_failed.png"))
            raise AssertionError(f"{browser.current_url} never showed {[i for i in expected if i not in text]}")
        time.sleep(0.5)
