"""The Dagster UI in a real headless Chromium: `dagster dev` on 127.0.0.1, the asset groups, jobs,
schedule and sensor shown, materialised assets' tables rendered (the model comparison), one
materialisation launched from the UI and seen to succeed.

Chromium and its driver are Debian packages that `make test` installs (`make browser`)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from eval_platform.benchmarks.declarations import declared_benchmarks
from eval_platform.environment import environment
from tests.conftest import PROJECT_ROOT
from tests.processes import WAIT_S, free_port, running

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SCREENSHOTS = PROJECT_ROOT / ".test-artifacts"


ROSTER = ("smollm2-135m-instruct-float32", "smollm2-135m-instruct-bfloat16")  # the demo roster, data/roster/
# the benchmark dimension as the roster sensor makes it: every declared benchmark
BENCHMARK_NAMES = list(declared_benchmarks(environment().benchmarks_dir))
ERA = {
    "population_size": 6,
    "generations": 2,
    "compression_model": "openai/compressor",
    "judge_panel": {"openai": "openai/judge-harsh", "claude": "openai/judge-fast", "gemini": "openai/judge-lenient"},
}


def materialise_history(home: Path, warehouse: Path) -> None:
    """Runs the UI will show: the demo roster (SmolLM2 in float32 and in bfloat16) on ARC-Easy and
    MMLU, float32 also on Winogrande, the comparison and the leaderboard; an era judged by three
    judges (an HTTP stub), its judge analysis and Pareto front."""
    from dagster import DagsterInstance, Definitions

    from eval_platform.definitions import defs
    from eval_platform.evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions
    from eval_platform.resources import LanguageModelResource, ModelGatewayResource, RosterResource, WarehouseResource
    from tests.openai_stub_server import StubServer

    test_defs = Definitions(
        assets=list(defs().assets),
        jobs=list(defs().jobs),
        resources={
            "warehouse": WarehouseResource(database=str(warehouse)),
            "gateway": ModelGatewayResource(),
            "evaluation_model": LanguageModelResource(),
            "roster": RosterResource(),
        },
    )
    with pytest.MonkeyPatch.context() as patch, StubServer() as stub:
        patch.setenv("DAGSTER_HOME", str(home))
        patch.setenv("OPENAI_API_KEY", "sk-test-ui-not-a-real-key")
        with DagsterInstance.get() as instance:
            assert test_defs.resolve_job_def("evolution_inputs").execute_in_process(instance=instance).success
            instance.add_dynamic_partitions("eras", ["ui-era"])
            assert (
                test_defs.resolve_job_def("prompt_evolution_era")
                .execute_in_process(
                    partition_key="ui-era",
                    instance=instance,
                    run_config={
                        "ops": {"evolution_era": {"config": ERA}},
                        "resources": {"gateway": {"config": {"api_base": stub.api_base}}},
                    },
                )
                .success
            )
            instance.add_dynamic_partitions(roster_partitions.name, list(ROSTER))
            instance.add_dynamic_partitions(benchmark_partitions.name, BENCHMARK_NAMES)  # as roster_sensor does
            for benchmark in ("winogrande", "arc_easy", "mmlu"):  # the latest comparison: bfloat16 on MMLU
                assert (
                    test_defs.resolve_job_def("benchmark_inputs")
                    .execute_in_process(
                        partition_key=benchmark,
                        instance=instance,
                        run_config={"ops": {"benchmark_raw_rows": {"config": {"limit": 5}}}},
                    )
                    .success
                )
                for model in ROSTER[: 1 if benchmark == "winogrande" else 2]:
                    assert (
                        test_defs.resolve_job_def("model_evaluation")
                        .execute_in_process(
                            partition_key=evaluation_key(benchmark, model),
                            instance=instance,
                            run_config={"ops": {"benchmark_evaluation": {"config": {"solvers": ["harness"]}}}},
                        )
                        .success
                    )
            assert test_defs.resolve_job_def("score_protocols").execute_in_process(instance=instance).success


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory):
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not Path(p).exists()]
    assert not missing, f"{missing} not installed: run `make browser` (part of `make test`)"
    home = tmp_path_factory.mktemp("dagster_home")
    (home / "dagster.yaml").write_text("nux:\n  enabled: false\n")  # no welcome dialog over the pages
    warehouse = home / "warehouse.duckdb"
    materialise_history(home, warehouse)
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "EVAL_WAREHOUSE": str(warehouse)}
    dagster = Path(sys.executable).with_name("dagster")
    base = f"http://127.0.0.1:{port}"
    with running(
        [str(dagster), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        f"{base}/server_info",
        timeout_s=WAIT_S,
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ):
        yield base, warehouse


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1600,1000",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def page_text(browser, url: str, expected: list[str], timeout: float = WAIT_S) -> str:
    from selenium.webdriver.common.by import By

    browser.get(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = browser.find_element(By.TAG_NAME, "body").text
        if all(item in text for item in expected):
            return text
        time.sleep(1)
    SCREENSHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / f"failed-{url.rsplit('/', 1)[-1].split('?')[0]}.png"))
    raise AssertionError(f"{url} never showed {[i for i in expected if i not in text]}")


def launched_run_status(home: Path, asset: str, timeout_s: float = WAIT_S) -> str:
    """The final status of the run launched for `asset`, read from the instance the UI writes to."""
    from dagster import DagsterInstance

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", str(home))
        with DagsterInstance.get() as instance:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                runs = [r for r in instance.get_runs() if any(k.path[-1] == asset for k in r.asset_selection or ())]
                if runs and runs[0].is_finished:
                    return runs[0].status.value
                time.sleep(2)
    return "not finished"


def test_asset_groups_jobs_schedule_and_sensor_are_shown(dagster_ui, browser):
    base, _ = dagster_ui
    page_text(
        browser,
        f"{base}/asset-groups",
        [
            "benchmark_inputs",
            "benchmark_evaluation",
            "benchmark_protocols",
            "prompt_evolution",
            "blind_evaluation",
        ],
    )
    SCREENSHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "asset_groups.png"))
    page_text(
        browser,
        f"{base}/jobs",
        [
            "benchmark_inputs",
            "model_evaluation",
            "open_llm_leaderboard_v1",
            "score_protocols",
            "prompt_evolution_era",
            "blind_evaluation_sheet",
            "blind_evaluation_tally",
        ],
    )
    page_text(
        browser,
        f"{base}/automation",
        [
            "nightly_benchmark_refresh",
            "roster_evaluation_sensor",
            "roster_sensor",
            "checkpoint_sensor",
            "blind_eval_filled_sheet_sensor",
        ],
    )


def test_the_partition_view_shows_which_model_was_evaluated_on_which_benchmark(dagster_ui, browser):
    """The benchmark x model partitions of benchmark_evaluation: 5 of every benchmark's (either flavour's) 2
    materialised (both roster models on ARC-Easy and MMLU, float32 alone on Winogrande); a benchmark's
    models with their state, and one model's materialisation with its own metadata (screenshots:
    .test-artifacts/partition_matrix*.png)."""
    from selenium.webdriver.common.by import By

    base, _ = dagster_ui
    text = page_text(
        browser,
        f"{base}/assets/benchmark_evaluation?view=partitions",
        ["Materialized (5)", f"Missing ({2 * len(BENCHMARK_NAMES) - 5})", "arc_easy", "winogrande"],
    )
    assert f"{2 * len(BENCHMARK_NAMES)} Partitions" in text
    SCREENSHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / "partition_matrix.png"))
    browser.find_element(By.XPATH, "//*[normalize-space(text())='arc_easy']").click()
    # both models, each with its state (the second name is shortened in the middle on screen)
    page_text(
        browser,
        browser.current_url,
        [ROSTER[0], "truct-bfloat16"],
    )
    browser.find_element(By.XPATH, f"//*[normalize-space(text())='{ROSTER[0]}']").click()
    text = page_text(
        browser,
        browser.current_url,
        ["roster_model", "results", "Latest materialization"],
    )
    assert text.count(ROSTER[0]) >= 2  # the chosen model, and its materialisation's metadata
    browser.save_screenshot(str(SCREENSHOTS / "partition_matrix_arc_easy.png"))


def test_the_leaderboard_renders_with_both_models_named_apart(dagster_ui, browser):
    base, _ = dagster_ui
    text = markdown_metadata(browser, f"{base}/assets/leaderboard", "leaderboard", "leaderboard")
    assert all(model in text for model in ROSTER) and "not measured: none of its 6 tasks" in text  # zero-shot only


def markdown_metadata(browser, url: str, key: str, name: str) -> str:
    """The rendered text of an asset's markdown metadata entry `key`: shown in its row, or, when
    long, behind "[Show Markdown]"."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    page_text(
        browser,
        url,
        ["Metadata", key],
    )
    SCREENSHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    row = browser.find_element(By.XPATH, f"//tr[td[normalize-space()='{key}']]")
    if row.find_elements(By.TAG_NAME, "table"):
        return row.text
    WebDriverWait(browser, WAIT_S).until(
        expected_conditions.element_to_be_clickable(
            row.find_element(By.XPATH, ".//*[contains(text(), 'Show Markdown')]")
        )
    ).click()
    WebDriverWait(browser, WAIT_S).until(lambda driver: driver.find_elements(By.CSS_SELECTOR, "[role=dialog] table"))
    SCREENSHOTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))
    return browser.find_element(By.CSS_SELECTOR, "[role=dialog]").text


def test_the_model_comparison_table_renders(dagster_ui, browser):
    base, _ = dagster_ui
    text = markdown_metadata(browser, f"{base}/assets/model_comparison", "comparison", "model_comparison")
    assert all(column in text for column in ("mcnemar_p", "ci_low", "harness", "baseline", ROSTER[0]))


def test_every_item_of_a_model_and_two_models_side_by_side_render(dagster_ui, browser):
    """The per-item view in the UI: the latest scores (bfloat16 on MMLU) with each item's prompt and
    answer, and the comparison with float32, the items scored differently first (screenshots:
    .test-artifacts/samples.png, items_side_by_side.png)."""
    base, warehouse = dagster_ui
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        questions = [
            q
            for (q,) in conn.execute(
                "SELECT json_extract_string(row_json, '$.question') FROM raw_rows WHERE benchmark = 'mmlu'"
            ).fetchall()
        ]
    samples = markdown_metadata(browser, f"{base}/assets/benchmark_evaluation", "samples", "samples")
    assert f"MMLU: {ROSTER[1]}" in samples and "log-likelihood" in samples and "prompt:" in samples
    assert len(questions) == 5 and all(" ".join(q.split()[:6]) in " ".join(samples.split()) for q in questions)
    items = markdown_metadata(browser, f"{base}/assets/model_comparison", "items", "items_side_by_side")
    assert f"{ROSTER[1]} (a) against {ROSTER[0]} (b)" in items and "documents differ (listed first" in items


def test_the_judge_analysis_and_pareto_front_render(dagster_ui, browser):
    base, _ = dagster_ui
    judges = markdown_metadata(browser, f"{base}/assets/judge_analysis", "judges", "judge_analysis")
    assert "harshest" in judges and "most lenient" in judges and "mismatch_share" in judges
    agreement = markdown_metadata(browser, f"{base}/assets/judge_analysis", "agreement", "judge_agreement")
    assert "pearson" in agreement and "spearman" in agreement
    front = markdown_metadata(browser, f"{base}/assets/pareto_front", "front", "pareto_front")
    assert "quality_score_avg" in front and "compression_ratio" in front


def test_materialise_from_the_ui(dagster_ui, browser):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    base, warehouse = dagster_ui
    SCREENSHOTS.mkdir(exist_ok=True)
    launched = False
    for _ in range(3):  # the UI may still be loading
        page_text(browser, f"{base}/assets/source_paragraphs", ["source_paragraphs", "Materialize"])
        button = WebDriverWait(browser, WAIT_S).until(
            expected_conditions.element_to_be_clickable((By.XPATH, "//button[normalize-space()='Materialize']"))
        )
        button.click()
        try:  # stay on the page until the UI confirms the launch (leaving earlier can cancel it)
            WebDriverWait(browser, WAIT_S).until(
                lambda driver: "Launched run" in driver.find_element(By.TAG_NAME, "body").text
            )
            launched = True
            break
        except TimeoutException:
            browser.save_screenshot(str(SCREENSHOTS / "launch_retry.png"))
    assert launched, "the UI never confirmed a launch after clicking Materialize three times"
    status = launched_run_status(warehouse.parent, "source_paragraphs")
    page_text(browser, f"{base}/runs", ["source_paragraphs", "Success"])
    browser.save_screenshot(str(SCREENSHOTS / "run_succeeded.png"))
    assert status == "SUCCESS"
    with duckdb.connect(str(warehouse), read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM source_paragraphs").fetchone()[0] == 3
