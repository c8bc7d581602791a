"""Item-by-item parity of the Open LLM Leaderboard v2 tasks with lm-evaluation-harness 0.4.13 run
alone, in a process that never imports this platform (speed/harness_alone.py: its own registry and
YAML with only the dataset pointed at the same local files, `simple_evaluate` with its HF model on
the same GGUF): every task's named metrics on both sides, every per-item metric equal, every
request's whole arguments equal, generated texts identical or parting only at a near-tie. A few
documents keep this quick; `speed/harness_parity.py` runs the same comparison on more."""

import pytest

from eval_engine import LOGLIKELIHOOD_TOLERANCE
from eval_platform.benchmarks.harness import HarnessRun
from speed.harness_alone import run_alone
from speed.harness_parity import compare, declared_run, expected_metrics, harness_run, load_ours
from speed.lm_eval_parity import harness_model_spec

pytestmark = pytest.mark.slow  # every test here takes seconds: the fast tier leaves them out

IFEVAL_SHORT = {
    "leaderboard_ifeval": {
        "generation_kwargs": {"until": [], "do_sample": False, "temperature": 0.0, "max_gen_toks": 24}
    }
}
BBH_SUBTASKS = (
    "leaderboard_bbh_boolean_expressions",
    "leaderboard_bbh_date_understanding",
    "leaderboard_bbh_geometric_shapes",
)


def run_id(run: HarnessRun) -> str:
    return run.tasks[0] + ("-chat" if run.settings.apply_chat_template else "")


def runs() -> list[HarnessRun]:
    bbh = declared_run("leaderboard_bbh")
    return [
        declared_run("leaderboard_mmlu_pro", limit=2),
        # as the leaderboard ran instruct models: the chat template, few-shot examples as turns
        declared_run("leaderboard_mmlu_pro", limit=2, apply_chat_template=True, fewshot_as_multiturn=True),
        # all 20 shipped prompts: row 19's checker draws its letter from Python's global generator
        declared_run("leaderboard_ifeval", limit=20, overrides=IFEVAL_SHORT),
        *[
            HarnessRun(
                (task,),
                bbh.settings.model_copy(update={"data_files": {task: bbh.settings.data_files[task]}, "limit": 2}),
            )  # fmt: skip
            for task in BBH_SUBTASKS
        ],
    ]


@pytest.fixture(scope="module")
def harness_sides(tmp_path_factory):
    """Every run by the harness alone, in one process of its own (one model load)."""
    spec = harness_model_spec()
    return run_alone([harness_run(run, run_id(run), 8, spec) for run in runs()], tmp_path_factory.mktemp("alone"))


@pytest.fixture(scope="module")
def model():
    return load_ours()


@pytest.mark.parametrize("run", runs(), ids=run_id)
def test_v2_tasks_agree_item_by_item_with_the_harness_run_alone(run, harness_sides, model):
    side = harness_sides[run_id(run)]
    assert not side.platform_imported and side.apply_template_module == "lm_eval.utils"
    report = compare(run, side, model, batch_size=8)
    named = expected_metrics(run.tasks[0])
    assert report["documents"] == run.settings.limit and report["prompts_differ"] == 0
    assert report["metric_labels"] == {"harness": named, "ours": named}
    assert {metric: values["agreement"] for metric, values in report["metrics"].items()} == dict.fromkeys(named, 1.0)
    for difference in report["text_differences"]:  # a text may part only where two tokens nearly tie
        assert difference["gap"] is not None and difference["gap"] < LOGLIKELIHOOD_TOLERANCE, difference
    assert report["harness_tokens"] > 0 and report["ours_tokens"] > 0
    if run.settings.apply_chat_template:  # the prompts compared are the chat template's, exemplars as turns
        assert (
            report["prompt_sample"].startswith("<|im_start|>")
            and report["prompt_sample"].count("<|im_start|>user") == 6
        )
