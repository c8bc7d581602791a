"""The README's screenshot, taken from the real Dagster UI in headless Chromium (Debian's `chromium`
and `chromium-driver`, `make browser`), after `make run` has materialised the graph:

    make run
    .venv/bin/python scripts/docs_screenshot.py            # -> docs/images/asset-graph.png

It starts `dagster dev` on the instance `make run` recorded ($DAGSTER_HOME, default .dagster_home),
waits until the asset graph shows every group, saves the page and stops the server.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT))

from tests.processes import free_port, running  # noqa: E402  (the suite's way of stopping what it starts)

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
GROUPS = (  # every domain's groups that `make run` materialises
    "benchmark_inputs",
    "benchmark_evaluation",
    "benchmark_protocols",
    "blind_evaluation",
    "judging_inputs",
    "judging",
    "evolution_inputs",
    "prompt_evolution",
)


def dismiss_welcome(driver, deadline: float) -> None:
    """Dagster's welcome dialog, which opens a moment after the page on a new instance: skipped
    once it shows (nothing to do where it does not show before `deadline`)."""
    from selenium.webdriver.common.by import By

    while time.monotonic() < deadline:
        buttons = driver.find_elements(By.XPATH, "//button[normalize-space()='Skip']")
        if buttons:
            buttons[0].click()
            return
        time.sleep(0.5)


def screenshot(home: Path, out: Path, width: int, height: int, timeout_s: float) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    dagster = Path(sys.executable).with_name("dagster")
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    with running(
        [str(dagster), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        f"{base}/server_info",
        timeout_s=300,  # loading the code location takes a while on a busy machine
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ):
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     f"--window-size={width},{height}", "--hide-scrollbars"):  # fmt: skip
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            driver.get(f"{base}/asset-groups")
            deadline = time.monotonic() + timeout_s
            text = ""
            while time.monotonic() < deadline:
                text = driver.find_element(By.TAG_NAME, "body").text
                if all(group in text for group in GROUPS) and "fetching statuses" not in text:
                    break
                time.sleep(1)
            else:
                raise SystemExit(f"the asset graph never showed {[g for g in GROUPS if g not in text]}")
            dismiss_welcome(driver, time.monotonic() + 20)
            while "fetching statuses" in driver.find_element(By.TAG_NAME, "body").text and time.monotonic() < deadline:
                time.sleep(1)
            time.sleep(3)  # the graph's layout settles after its nodes appear
            out.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(out))
        finally:
            driver.quit()
    print(f"{out}: {out.stat().st_size:,} bytes")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--home", type=Path, default=Path(os.environ.get("DAGSTER_HOME") or PROJECT_ROOT / ".dagster_home")
    )
    parser.add_argument("--out", type=Path, default=PROJECT_ROOT / "docs" / "images" / "asset-graph.png")
    parser.add_argument("--width", type=int, default=2200)
    parser.add_argument("--height", type=int, default=800)
    parser.add_argument("--timeout", type=float, default=120, help="Seconds to wait for the graph.")
    args = parser.parse_args()
    screenshot(args.home, args.out, args.width, args.height, args.timeout)


if __name__ == "__main__":
    main()
