"""Settings are read when they are used, not when a module is imported: the code location imported
with no EVAL_* variable set, then the variables set, and the resources, the blind evaluation's
folder and the sensors' folders are what is set."""

import json
import os
import subprocess
import sys

from tests.conftest import PROJECT_ROOT

IMPORTED_THEN_SET = """
import json, os, sys
import eval_platform.definitions  # noqa: F401  (the whole code location, imported with no EVAL_* variable set)
from eval_platform.resources import RESOURCES

from eval_platform import resources

opened = []
connect = resources.connect
resources.connect = lambda *arguments, **keywords: opened.append(arguments) or connect(*arguments, **keywords)
os.environ.update(json.loads(sys.argv[1]))
warehouse, model = RESOURCES["warehouse"], RESOURCES["evaluation_model"].settings()
with warehouse.get_connection() as conn:
    conn.execute("SELECT 1")
(database, data_path, _, lock_timeout_s, *_), = opened
from dagster import DagsterInstance, build_sensor_context
from eval_platform.evaluation_assets.blind.assets import BlindFilesConfig
from eval_platform.schedules.sensors import blind_eval_filled_sheet_sensor, era_config_sensor
tick = build_sensor_context(instance=DagsterInstance.ephemeral(), resources={"roster": RESOURCES["roster"]})
(era,) = era_config_sensor(tick).run_requests
tally = blind_eval_filled_sheet_sensor(tick)
print(json.dumps({
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


def test_the_resources_read_the_environment_set_after_the_code_location_was_imported(tmp_path):
    settings = {
        "EVAL_WAREHOUSE": str(tmp_path / "set-later.duckdb"),
        "EVAL_API_BASE": "http://127.0.0.1:9/v1",
        "EVAL_MODEL_CACHE": str(tmp_path / "models"),
        "EVAL_TORCH_THREADS": "3",
        "EVAL_WAREHOUSE_LOCK_TIMEOUT_S": "7.5",
        "EVAL_LAKE_DATA_PATH": str(tmp_path / "lake-files"),  # given to connect (a file warehouse ignores it)
        "EVAL_BLIND_DIR": str(tmp_path / "blind"),
        "EVAL_ERAS_DIR": str(tmp_path / "eras"),
    }
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
