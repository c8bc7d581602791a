"""Settings are read when they are used, not when a module is imported: the code location imported
with no EVAL_* variable set, then the variables set, and the resources use what is set."""

import json
import os
import subprocess
import sys

from tests.conftest import PROJECT_ROOT

IMPORTED_THEN_SET = """
import json, os, sys
import definitions  # the whole code location, imported with no EVAL_* variable set
from resources import RESOURCES

os.environ.update(json.loads(sys.argv[1]))
warehouse, model = RESOURCES["warehouse"], RESOURCES["evaluation_model"].settings()
with warehouse.get_connection() as conn:
    conn.execute("SELECT 1")
print(json.dumps({
    "warehouse": warehouse.location,
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
    }
    clean = {name: value for name, value in os.environ.items() if not name.startswith("EVAL_")}
    done = subprocess.run(
        [sys.executable, "-c", IMPORTED_THEN_SET, json.dumps(settings)],
        capture_output=True, text=True, timeout=300, cwd=PROJECT_ROOT, env=clean, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    used = json.loads(done.stdout.strip().splitlines()[-1])
    assert used == {
        "warehouse": settings["EVAL_WAREHOUSE"],
        "api_base": settings["EVAL_API_BASE"],
        "model_cache_dir": settings["EVAL_MODEL_CACHE"],
        "torch_threads": 3,
    }
    assert (tmp_path / "set-later.duckdb").is_file()  # the warehouse opened is the one set
