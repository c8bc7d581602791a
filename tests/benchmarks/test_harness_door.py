"""lm-evaluation-harness behind one door: every private name of the harness the platform uses is
listed in `eval_platform.benchmarks.harness` and present in the installed harness, and no other
module reaches past the door. An upgrade that moves one of them fails here, by name."""

import ast
import importlib
from pathlib import Path

import lm_eval  # noqa: F401  (a dependency: a missing harness fails the suite, never skips it)
import pytest

from eval_platform.benchmarks.harness import PRIVATE_API, PRIVATE_METHODS, task_manager
from tests.conftest import PROJECT_ROOT

DOOR = PROJECT_ROOT / "eval_platform" / "benchmarks" / "harness.py"
CODE = ("eval_platform", "evaluation_assets", "resources", "jobs", "schedules")


def missing_private_names(api=PRIVATE_API, methods=PRIVATE_METHODS) -> list[str]:
    """Each listed private name the installed harness lacks, as `module.name` (a method: on the
    task registry's `attribute`)."""
    missing = []
    for module_name, name in api:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            missing.append(f"{module_name} (module)")
            continue
        if not hasattr(module, name):
            missing.append(f"{module_name}.{name}")
    manager = task_manager(include_defaults=False)
    for attribute, method in methods:
        owner = getattr(manager, attribute, None)
        if owner is None or not callable(getattr(owner, method, None)):
            missing.append(f"TaskManager.{attribute}.{method}")
    return missing


def private_uses(path: Path) -> set[str]:
    """The harness's private names a file uses: imports from a `_module` of lm_eval or of a `_name`,
    and attribute accesses `._name` on anything (a harness object's)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "lm_eval":
            private = [part for part in node.module.split(".") if part.startswith("_")]
            found.update(f"{node.module}.{alias.name}" for alias in node.names if private or alias.name.startswith("_"))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("lm_eval") and "._" in a.name)
    return found


def test_every_private_name_the_door_lists_is_in_the_installed_harness():
    assert missing_private_names() == []


def test_the_door_lists_every_private_name_it_imports():
    listed = {f"{module}.{name}" for module, name in PRIVATE_API}
    assert private_uses(DOOR) <= listed
    source = DOOR.read_text(encoding="utf-8")
    assert all(f"._{attribute.lstrip('_')}" in source and method in source for attribute, method in PRIVATE_METHODS)


def test_no_other_module_uses_the_harness_private_api():
    for folder in CODE:
        for path in (PROJECT_ROOT / folder).rglob("*.py"):
            if path != DOOR:
                assert private_uses(path) == set(), path


def test_a_moved_name_fails_loudly_by_name(monkeypatch):
    from lm_eval.tasks import _index

    monkeypatch.delattr(_index, "Kind")
    assert missing_private_names() == ["lm_eval.tasks._index.Kind"]
    assert missing_private_names(api=(("lm_eval.tasks._gone", "X"),), methods=()) == ["lm_eval.tasks._gone (module)"]
    assert missing_private_names(api=(), methods=(("_factory", "_renamed"),)) == ["TaskManager._factory._renamed"]


@pytest.mark.parametrize("source", ["from lm_eval.tasks._index import TaskIndex\n", "import lm_eval.tasks._factory\n"])
def test_the_scan_sees_a_private_import(tmp_path, source):
    path = tmp_path / "module.py"
    path.write_text(source)
    assert private_uses(path)


def test_a_built_task_has_every_private_attribute_the_door_reads():
    from eval_platform.benchmarks.declarations import EvaluationSettings
    from eval_platform.benchmarks.harness import PRIVATE_TASK_ATTRIBUTES, HarnessRun, build_tasks
    from tests.conftest import DATA_BENCHMARKS

    files = {"gsm8k_cot_self_consistency": {"test": str(DATA_BENCHMARKS / "gsm8k.jsonl")}}
    (task,) = build_tasks(HarnessRun(("gsm8k_cot_self_consistency",), EvaluationSettings(data_files=files)))
    assert all(hasattr(task, attribute) for attribute in PRIVATE_TASK_ATTRIBUTES)
    assert [pipeline.name for pipeline in task._filters] == ["score-first", "maj@64", "maj@8"]
