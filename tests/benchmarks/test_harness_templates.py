"""The platform renders the harness's Jinja templates (`doc_to_text`, `doc_to_target`,
`doc_to_choice`, ...) with its own `apply_template`, each template compiled once
(eval_platform/benchmarks/harness.py). On every template every shipped task uses, over the
documents and few-shot examples its requests are built from, it gives exactly the text the
harness's original gives: `lm_eval.utils` loaded afresh from the harness's file, in a module the
platform never patched."""

import importlib.util
import json
from pathlib import Path

import lm_eval.utils
import pytest

from eval_platform.benchmarks import harness
from eval_platform.benchmarks.declarations import FEWSHOT_SEED, declared_benchmarks
from eval_platform.benchmarks.documents import build_documents
from eval_platform.benchmarks.solvers import EvaluationJob
from eval_platform.benchmarks.solvers.harness import built_instances
from eval_platform.environment import environment
from speed.lm_eval_parity import jsonl

ROWS = 3  # of each benchmark (of each BBH subtask): its few-shot examples come with them
# the tasks whose prompts, choices and targets are Python functions or row fields, no Jinja template
NO_TEMPLATE = {"leaderboard_ifeval", "leaderboard_mmlu_pro", "winogrande"}


def untouched_apply_template():
    """The harness's own `apply_template`, from `lm_eval/utils.py` executed as a module of its own."""
    spec = importlib.util.spec_from_file_location("lm_eval_utils_untouched", lm_eval.utils.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.apply_template


def leaves(built):
    for item in built:
        yield from (item.get_all_tasks() if hasattr(item, "get_all_tasks") else [item])


def build_requests(name: str, model) -> None:
    """The benchmark's requests built as the platform builds them, nothing asked of the model."""
    benchmark = declared_benchmarks(environment().benchmarks_dir)[name]
    settings = benchmark.evaluation_settings()
    if benchmark.is_dataset:  # the platform's documents handed to the harness's task as local files
        assert benchmark.dataset is not None and benchmark.dataset.file is not None
        rows = jsonl(Path(benchmark.dataset.file), ROWS)
        pool = jsonl(Path(benchmark.fewshot.file)) if benchmark.fewshot and benchmark.fewshot.file else []
        built = build_documents(
            benchmark, [(str(i), r) for i, r in enumerate(rows)], [(f"f{i}", r) for i, r in enumerate(pool)]
        )
        shots = {"num_fewshot": 5} if pool else {}  # render few-shot examples too
        job = EvaluationJob(
            benchmark, settings.model_copy(update=shots), model, documents=built.documents, pool=built.pool
        )
        assert list(built_instances(job))
        return
    run = harness.HarnessRun((settings.task,), settings.model_copy(update={"limit": ROWS}))
    for task in leaves(harness.build_tasks(run)):
        task.set_fewshot_seed(seed=FEWSHOT_SEED)
        task.build_all_requests(limit=ROWS)
        assert task.instances


def test_the_platform_replaces_the_harness_template_renderer():
    harness.task_manager()
    assert lm_eval.utils.apply_template is harness._apply_template


@pytest.mark.parametrize("name", sorted(declared_benchmarks(environment().benchmarks_dir)))
def test_every_template_a_shipped_task_uses_renders_as_the_harness_renders_it(name, local_model, monkeypatch):
    platform = harness._apply_template
    rendered: dict[tuple[str, str], tuple[str, dict]] = {}

    def recording(template: str, doc: dict) -> str:
        rendered.setdefault((template, json.dumps(doc, sort_keys=True, default=str)), (template, doc))
        return platform(template, doc)

    # the platform's renderer, recording: each registry the platform builds puts it in the harness
    monkeypatch.setattr(harness, "_apply_template", recording)
    monkeypatch.setattr(lm_eval.utils, "apply_template", recording)
    build_requests(name, local_model)

    original = untouched_apply_template()
    assert original is not platform and original.__module__ == "lm_eval_utils_untouched"
    differing = [
        (template, original(template, doc), platform(template, doc))
        for template, doc in rendered.values()
        if original(template, doc) != platform(template, doc)
    ]
    assert not differing, differing[:3]
    assert bool(rendered) == (name not in NO_TEMPLATE), f"{name}: {len(rendered)} templates rendered"
