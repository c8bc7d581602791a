"""One kind of judge: the guide's judge (docs/guides/add-a-judge.md), its module as it stands there,
named once, asks an era's panel the rubric and gives pairwise verdicts, each judgement as the
question's own reader makes it; judges are named in judging's `mode` and an era's `judge_modes` as
in a model's `rubric_judging`."""

import asyncio
import re
import sys

import pytest

from eval_platform.common.judges import JudgeError, judge_for, judge_named
from eval_platform.common.keeping import Keeping
from eval_platform.common.models import Completion
from eval_platform.evolution.genetic import TAGS, EraSettings, run_era
from eval_platform.evolution.judging import RUBRIC
from eval_platform.judging.datasets import shipped_human_sets, shipped_judge_prompts
from eval_platform.judging.pairwise import PROBABILITY_QUESTION, item_task, judge_kept, verdict_request_key
from eval_platform.judging.settings import PanelSettings
from tests.conftest import PROJECT_ROOT

GUIDE = PROJECT_ROOT / "docs" / "guides" / "add-a-judge.md"
DIGIT, LETTER = "2", "B"  # what the model below writes after a rubric dimension's question, after a pair's


@pytest.fixture(scope="module")
def label_judge(tmp_path_factory):
    """The guide's `my_judges.py`, importable, its judge named by `module:Class`."""
    code = re.search(r"```python\n(# my_judges\.py.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    assert code, "the guide's my_judges.py"
    folder = tmp_path_factory.mktemp("judges")
    (folder / "my_judges.py").write_text(code.group(1), encoding="utf-8")
    sys.path.insert(0, str(folder))
    try:
        yield judge_named("my_judges:LabelJudge")
    finally:
        sys.path.remove(str(folder))


class LabelWriter:
    """Compresses by keeping the first word; as a judge, writes DIGIT after a rubric dimension's
    question and LETTER after a pair's."""

    rubric_judging = "written"

    def __init__(self, name):
        self.name = self.fingerprint = name
        self.asked = []

    async def acomplete(self, chat, max_tokens, stop=(), top_logprobs=None):
        self.asked.append(chat.user)
        if chat.user.endswith(PROBABILITY_QUESTION):
            text = LETTER
        elif "Answer with a single digit" in chat.user:
            text = DIGIT
        else:
            text = chat.user.split("Original Text:\n")[-1].split()[0]
        return Completion(text, 1, 1)


def test_a_judge_registered_once_scores_an_eras_rubric_and_gives_pairwise_verdicts(label_judge):
    assert judge_named("label") is label_judge  # registered by its name
    # the era: its panel's judge asked by the new judge, named in `judge_modes`
    config = EraSettings(
        population_size=2,
        generations=0,
        compression_model="fake/compressor",
        judge_panel={"mine": "fake/judge"},
        judge_modes={"mine": "label"},
    )
    models = {}

    def open_model(name):
        return models.setdefault(name, LabelWriter(name))

    records = []
    paragraph = {"paragraph_id": "p1", "text": "Rivers flood every spring when the snow melts."}
    gene_pool = {tag: [f"{tag} gene"] for tag in TAGS}
    status = asyncio.run(run_era("e", config, open_model, [paragraph], gene_pool, len, records.append))
    assert status == "complete"
    expected = {name: min(int(DIGIT), maximum) for name, maximum, _ in RUBRIC}
    for individual in records[0].population:
        details = individual.evaluation["judge_details"]["mine"]
        assert {name: details[name] for name in expected} == expected
        assert details["score"] == individual.evaluation["quality_scores"]["mine"] == sum(expected.values())
        assert details["error"] is None and details["model"] == "fake/judge"
    asked = models["fake/judge"].asked
    assert len(asked) == 2 * len(RUBRIC)  # each prompt's compression: one question per dimension
    assert [text.rsplit("\n", 1)[-1] for text in asked[: len(RUBRIC)]] == [
        f"Answer with a single digit from 0 to {maximum}." for _, maximum, _ in RUBRIC
    ]

    # pairwise judging: the same judge named in judging's `mode`, its verdicts kept by request key
    assert PanelSettings(mode="label").mode == "label"
    prompts = shipped_judge_prompts()
    item = shipped_human_sets()["llmbar_natural"].items[0]
    task, judge = item_task(item, prompts), LabelWriter("fake/judge")
    kept = []
    verdicts = judge_kept("fake/judge", judge, [task], Keeping({}, keep=kept.extend), mode="label")
    # "B" shown second: answer b where a is shown first, answer a where b is
    assert [(v.order, v.verdict) for v in verdicts] == [("as_is", "b"), ("swapped", "a")]
    assert all(v.raw == "P(A)=0.0000 P(B)=1.0000 P(C)=0.0000" and v.error is None for v in verdicts)
    assert judge.asked == [task.as_is.user + PROBABILITY_QUESTION, task.swapped.user + PROBABILITY_QUESTION]
    key = verdict_request_key("fake/judge", "fake/judge", task, "as_is", judge_named("label"), 2048)
    assert (
        kept[0][0]
        == key
        != verdict_request_key("fake/judge", "fake/judge", task, "as_is", judge_named("probabilities"), 2048)
    )


def test_a_judge_is_named_once_for_every_use(label_judge):
    written, probabilities = judge_named("written"), judge_named("probabilities")
    # the older names: judging's `mode: generate`, a model's `rubric_judging: json`
    assert judge_named("generate") is judge_named("json") is written
    assert judge_for(LabelWriter("m")) is written and judge_for(LabelWriter("m"), "probabilities") is probabilities
    with pytest.raises(JudgeError, match="unknown judge 'guess'.*'label'.*'probabilities'.*'written'"):
        judge_named("guess")
    with pytest.raises(ValueError, match="unknown judge 'guess'"):
        PanelSettings(mode="guess")
    with pytest.raises(ValueError, match="judge_modes names judges not in the panel: other"):
        EraSettings(judge_modes={"other": "written"})
