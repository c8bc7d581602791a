"""Settings are read when they are used, not when a module is imported: every module of the platform
imported with no EVAL_* variable set, then the variables set, and the code location Dagster loads (its
protocol jobs, the nightly schedule), the resources, the blind evaluation's folder and the sensors'
folders are what is set."""

import json
import os
import subprocess
import sys

from tests.conftest import PROJECT_ROOT

IMPORTED_THEN_SET = """
import importlib, json, os, pkgutil, sys
import eval_platform
for module in pkgutil.walk_packages(eval_platform.__path__, "eval_platform."):  # every module, no EVAL_* set
    if not module.name.endswith(".__main__"):  # (the command itself, which would run)
        importlib.import_module(module.name)
from eval_platform.resources import RESOURCES

from eval_platform import resources

opened = []
connect = resources.connect
resources.connect = lambda *arguments, **keywords: opened.append(arguments) or connect(*arguments, **keywords)
os.environ.update(json.loads(sys.argv[1]))
from eval_platform.definitions import defs
from eval_platform.jobs import JOBS
code_location = defs()  # as Dagster loads it
nightly = code_location.resolve_schedule_def("nightly_benchmark_refresh")
warehouse, model = RESOURCES["warehouse"], RESOURCES["evaluation_model"].settings()
with warehouse.get_connection() as conn:
    conn.execute("SELECT 1")
(database, data_path, _, lock_timeout_s, *_), = opened
from dagster import DagsterInstance, build_sensor_context
from eval_platform.evaluation_assets.blind.assets import BlindFilesConfig
from eval_platform.schedules.sensors import blind_eval_filled_sheet_sensor, era_config_sensor
with build_sensor_context(instance=DagsterInstance.ephemeral(),
                          resources={name: RESOURCES[name] for name in ("roster", "declarations")}) as tick:
    (era,) = era_config_sensor(tick).run_requests
    tally = blind_eval_filled_sheet_sensor(tick)
print(json.dumps({
    "protocol_jobs": sorted({job.name for job in code_location.resolve_all_job_defs() if not job.name.startswith("__")}
                            - {job.name for job in JOBS}),
    "nightly": [nightly.cron_schedule, nightly.execution_timezone],
    "blind_folder": str(BlindFilesConfig().path),
    "era": era.partition_key,
    "tallied": tally.run_config["ops"]["blind_eval_scores"]["config"]["folder"],
    "warehouse": warehouse.location,
    "opened": [database, data_path, lock_timeout_s],
    "api_base": RESOURCES["gateway"].gateway().api_base,
    "model_cache_dir": model.model_cache_dir,
    "torch_threads": model.torch_threads,
}))
"""


def test_the_code_location_and_resources_read_the_environment_set_after_every_module_was_imported(tmp_path):
    settings = {
        "EVAL_WAREHOUSE": str(tmp_path / "set-later.duckdb"),
        "EVAL_API_BASE": "http://127.0.0.1:9/v1",
        "EVAL_MODEL_CACHE": str(tmp_path / "models"),
        "EVAL_TORCH_THREADS": "3",
        "EVAL_WAREHOUSE_LOCK_TIMEOUT_S": "7.5",
        "EVAL_LAKE_DATA_PATH": str(tmp_path / "lake-files"),  # given to connect (a file warehouse ignores it)
        "EVAL_BLIND_DIR": str(tmp_path / "blind"),
        "EVAL_ERAS_DIR": str(tmp_path / "eras"),
        "EVAL_PROTOCOLS_DIR": str(tmp_path / "protocols"),
        "EVAL_NIGHTLY_CRON": "30 4 * * 1",
        "EVAL_TIMEZONE": "Europe/Paris",
    }
    (tmp_path / "protocols").mkdir()
    v1 = (PROJECT_ROOT / "data" / "protocols" / "open_llm_leaderboard_v1.yaml").read_text()
    (tmp_path / "protocols" / "my_protocol.yaml").write_text(v1)
    (tmp_path / "eras").mkdir()
    (tmp_path / "eras" / "set-later.json").write_text('{"generations": 1}')
    (tmp_path / "blind" / "filled").mkdir(parents=True)
    (tmp_path / "blind" / "filled" / "rater.xlsx").write_bytes(b"a filled sheet")
    clean = {name: value for name, value in os.environ.items() if not name.startswith("EVAL_")}
    done = subprocess.run(
        [sys.executable, "-c", IMPORTED_THEN_SET, json.dumps(settings)],
        capture_output=True, text=True, timeout=300, cwd=PROJECT_ROOT, env=clean, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    used = json.loads(done.stdout.strip().splitlines()[-1])
    assert used == {
        "protocol_jobs": ["my_protocol"],  # the folder's one protocol, not the project's two
        "nightly": ["30 4 * * 1", "Europe/Paris"],
        "blind_folder": settings["EVAL_BLIND_DIR"],
        "era": "set-later",  # the era sensor's folder is the one set
        "tallied": settings["EVAL_BLIND_DIR"],  # and the filled-sheet sensor's
        "warehouse": settings["EVAL_WAREHOUSE"],
        "opened": [settings["EVAL_WAREHOUSE"], settings["EVAL_LAKE_DATA_PATH"], 7.5],
        "api_base": settings["EVAL_API_BASE"],
        "model_cache_dir": settings["EVAL_MODEL_CACHE"],
        "torch_threads": 3,
    }
    assert (tmp_path / "set-later.duckdb").is_file()  # the warehouse opened is the one set
