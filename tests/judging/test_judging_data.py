"""The shipped judging data: unchanged (checksums), parsed into typed records, bad input named by file
and row, and the recorded judges reproducing the figures the LLMBar and PandaLM authors publish."""

import hashlib
import json
import re

import pytest

from eval_platform.judging.agreement import agreement_table, classification_scores, pairwise_cohen_kappas
from eval_platform.judging.datasets import (
    DATA_JUDGING,
    GPT4_LLMBAR_JUDGE,
    GPT35_PANDALM_JUDGE,
    LLMBAR_SETS,
    MT_BENCH_HUMAN_SET,
    PANDALM7B_JUDGE,
    PANDALM_SET,
    BlindRating,
    blind_human_set,
    load_llmbar_set,
    load_llmbar_verdicts,
    load_model_answers,
    load_mt_bench_questions,
    load_pandalm_set,
    load_pandalm_verdicts,
    read_verdicts_jsonl,
    shipped_human_sets,
    shipped_judge_prompts,
    shipped_mt_bench,
    shipped_recorded_verdicts,
    write_verdicts_jsonl,
)
from eval_platform.judging.ratings import battles_from_labels
from eval_platform.judging.records import JudgeVerdict, JudgingInputError
from eval_platform.judging.report import LLMBAR_PUBLISHED, PANDALM_README, PANDALM_README_KAPPAS

# The eight models whose MT-Bench answers are shipped (data/judging/SOURCES.md).
MT_BENCH_MODELS = [
    "alpaca-13b",
    "claude-v1",
    "falcon-40b-instruct",
    "gpt-3.5-turbo",
    "gpt-4",
    "llama-13b",
    "vicuna-13b-v1.3",
    "wizardlm-13b",
]


@pytest.fixture(scope="module")
def shipped():
    sets = shipped_human_sets()
    return sets, shipped_recorded_verdicts(sets)


@pytest.fixture(scope="module")
def agreement(shipped):
    return {(r.judge, r.set_name): r for r in agreement_table(*shipped, rounds=200)}


def test_shipped_files_are_the_sources_byte_for_byte():
    listed = dict(
        reversed(line.split("  ", 1)) for line in (DATA_JUDGING / "SHA256SUMS").read_text().splitlines() if line
    )
    on_disk = {
        str(p.relative_to(DATA_JUDGING))
        for p in DATA_JUDGING.rglob("*")
        if p.is_file() and p.name not in ("SHA256SUMS", "SOURCES.md")
    }
    assert set(listed) == on_disk
    for name, digest in listed.items():
        assert hashlib.sha256((DATA_JUDGING / name).read_bytes()).hexdigest() == digest, name
    for licence in ("llmbar/LICENSE", "pandalm/LICENSE", "mt_bench/LICENSE"):
        assert licence in listed


def test_the_sets_and_verdicts_parse(shipped):
    sets, verdicts = shipped
    assert {name: len(s.items) for name, s in sets.items()} == {
        "llmbar_natural": 100,
        "llmbar_neighbor": 134,
        "llmbar_gptinst": 92,
        "llmbar_gptout": 47,
        "llmbar_manual": 46,
        PANDALM_SET: 999,
        MT_BENCH_HUMAN_SET: 200,
    }
    by_judge = {}
    for v in verdicts:
        by_judge[v.judge] = by_judge.get(v.judge, 0) + 1
    assert by_judge == {GPT4_LLMBAR_JUDGE: 2 * 419, GPT35_PANDALM_JUDGE: 999, PANDALM7B_JUDGE: 999}
    assert all(v.source == "recorded" for v in verdicts)
    pandalm = sets[PANDALM_SET]
    assert all(len(i.labels) == 3 and i.gold is not None for i in pandalm.items)
    assert pandalm.by_id["157"].answer_a == "True"  # a JSON true in the file: the model answered "True"
    assert pandalm.by_id["466"].instruction == "Truthfulness"  # an empty instruction, its input alone
    gpt35 = [v for v in verdicts if v.judge == GPT35_PANDALM_JUDGE]
    assert sum(v.verdict == "unparsed" for v in gpt35) == 25 and sum(v.verdict == "tie" for v in gpt35) == 38
    human = sets[MT_BENCH_HUMAN_SET]
    named = [i for i in human.items if i.model_a and i.model_b]
    assert len(named) == 130 and all(i.question_id for i in human.items)
    assert {i.gold for i in human.items} == {"a", "b"}


def test_mt_bench_data_parses():
    questions, answers = shipped_mt_bench()
    assert len(questions) == 80 and len({q.category for q in questions}) == 8
    assert sorted(answers) == MT_BENCH_MODELS
    assert all(len(by_question) == 80 for by_question in answers.values())
    assert sum(q.reference is not None for q in questions) == 30
    assert all(q.reference for q in questions if q.category in ("math", "reasoning", "coding"))
    assert sorted(shipped_judge_prompts()) == sorted(
        [
            "pair-v2",
            "pair-v2-multi-turn",
            "pair-math-v1",
            "pair-math-v1-multi-turn",
            "single-v1",
            "single-math-v1",
            "single-v1-multi-turn",
            "single-math-v1-multi-turn",
        ]
    )


# --- bad input names the file and the row --------------------------------------------------------


def write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows))
    return path


def test_bad_llmbar_rows_are_named(tmp_path):
    good = {"input": "Say hi.", "output_1": "hi", "output_2": "bye", "label": 1}
    write(tmp_path / "set" / "dataset.json", [good, {**good, "label": 3}])
    with pytest.raises(JudgingInputError, match=r"set/dataset.json: row 1: label must be 1 or 2, got 3"):
        load_llmbar_set(tmp_path / "set", "s")
    write(tmp_path / "set" / "dataset.json", [good, {k: v for k, v in good.items() if k != "output_2"}])
    with pytest.raises(JudgingInputError, match=r"row 1: missing field 'output_2'"):
        load_llmbar_set(tmp_path / "set", "s")
    (tmp_path / "set" / "dataset.json").write_text('[{"input": "x",')
    with pytest.raises(JudgingInputError, match=r"dataset.json: not JSON \(line 1"):
        load_llmbar_set(tmp_path / "set", "s")
    with pytest.raises(JudgingInputError, match="file not found"):
        load_llmbar_set(tmp_path / "missing", "s")


def test_llmbar_verdicts_must_be_the_datasets_rows(tmp_path):
    good = {"input": "Say hi.", "output_1": "hi", "output_2": "bye", "label": 1}
    human_set = load_llmbar_set(write(tmp_path / "set" / "dataset.json", [good]).parent, "s")
    call = {"completion": ["Output (a)", "stop"], "winner": "1"}
    row = {**good, "results": [{"swap = False": call, "swap = True": {**call, "winner": "2"}}]}
    verdicts = load_llmbar_verdicts(write(tmp_path / "v.json", [row]), human_set, "j")
    assert [(v.order, v.verdict, v.raw) for v in verdicts] == [
        ("as_is", "a", "Output (a)"),
        ("swapped", "b", "Output (a)"),
    ]
    with pytest.raises(JudgingInputError, match=r"v.json: row 0: not the row 0 of s's dataset"):
        load_llmbar_verdicts(write(tmp_path / "v.json", [{**row, "output_1": "hello"}]), human_set, "j")
    bad = {**row, "results": [{"swap = False": {**call, "winner": "3"}, "swap = True": call}]}
    with pytest.raises(JudgingInputError, match=r"row 0: swap = False: winner must be"):
        load_llmbar_verdicts(write(tmp_path / "v.json", [bad]), human_set, "j")


def test_bad_pandalm_rows_are_named(tmp_path):
    row = {
        "idx": 7,
        "cmp_key": "m1_m2",
        "instruction": "Add.",
        "input": "1+1",
        "response1": "2",
        "response2": "3",
        "annotator1": 1,
        "annotator2": 1,
        "annotator3": 0,
    }
    human_set = load_pandalm_set(write(tmp_path / "t.json", [row]))
    assert human_set.items[0].instruction == "Add.\n\n1+1" and human_set.items[0].gold == "a"
    with pytest.raises(JudgingInputError, match=r"t.json: row 1: idx 7 repeated"):
        load_pandalm_set(write(tmp_path / "t.json", [row, row]))
    with pytest.raises(JudgingInputError, match=r"row 0: annotator2 must be 0, 1 or 2, got 5"):
        load_pandalm_set(write(tmp_path / "t.json", [{**row, "annotator2": 5}]))
    with pytest.raises(JudgingInputError, match=r"row 0: field 'annotator1' must be int, got True"):
        load_pandalm_set(write(tmp_path / "t.json", [{**row, "annotator1": True}]))
    verdict = {"idx": 7, "gpt_result": "Tie", "gpt_reason": "same"}
    found = load_pandalm_verdicts(write(tmp_path / "g.json", [verdict]), human_set, "j", "gpt_result", "gpt_reason")
    assert (found[0].verdict, found[0].raw, found[0].model_a) == ("tie", "Tie\nsame", "m1")
    with pytest.raises(JudgingInputError, match=r"g.json: row 0: idx 8 is not an item"):
        load_pandalm_verdicts(write(tmp_path / "g.json", [{**verdict, "idx": 8}]), human_set, "j", "gpt_result", "r")
    with pytest.raises(JudgingInputError, match=r"row 0: gpt_result 'maybe' is not a verdict"):
        load_pandalm_verdicts(
            write(tmp_path / "g.json", [{**verdict, "gpt_result": "maybe"}]), human_set, "j", "gpt_result", "r"
        )
    with pytest.raises(JudgingInputError, match=r"g.json: no verdict for idx 7"):
        load_pandalm_verdicts(write(tmp_path / "g.json", []), human_set, "j", "gpt_result", "r")


def test_bad_jsonl_lines_are_named(tmp_path):
    path = tmp_path / "question.jsonl"
    path.write_text('{"question_id": 1, "category": "writing", "turns": ["a", "b"]}\n\nnot json\n')
    with pytest.raises(JudgingInputError, match=r"question.jsonl: line 3: not JSON"):
        load_mt_bench_questions(path)
    path.write_text('{"question_id": 1, "category": "math", "turns": ["a", "b"]}\n')
    with pytest.raises(JudgingInputError, match=r"line 1: question 1 \(math\) has no reference answer"):
        load_mt_bench_questions(path, references={})
    (tmp_path / "answers").mkdir()
    (tmp_path / "answers" / "m.jsonl").write_text('{"question_id": 1, "choices": [{"turns": "oops"}]}\n')
    with pytest.raises(JudgingInputError, match=r"m.jsonl: line 1: field 'turns' must be list"):
        load_model_answers(tmp_path / "answers")


def test_verdicts_round_trip_through_jsonl(tmp_path, shipped):
    _, verdicts = shipped
    path = write_verdicts_jsonl(verdicts[:5], tmp_path / "v.jsonl")
    assert read_verdicts_jsonl(path) == verdicts[:5]
    path.write_text(
        json.dumps({"judge": "j", "set_name": "s", "item_id": "1", "order": "sideways", "verdict": "a", "raw": ""})
    )
    with pytest.raises(JudgingInputError, match=r"v.jsonl: line 1: order must be as_is or swapped"):
        read_verdicts_jsonl(path)


def test_a_blind_sheet_is_a_human_labelled_set():
    def rating(question, rater, winner):
        return BlindRating("sheet-1", question, f"{question}?", rater, "sys-x", "sys-y", "ans x", "ans y", winner)

    ratings = [rating("Q1", "r1", "A"), rating("Q1", "r2", "A"), rating("Q1", "r3", "Tie"), rating("Q2", "r1", "B")]
    human_set = blind_human_set(ratings, "blind/sheet-1")
    assert human_set.tie_policy == "tie_is_label"
    q1, q2 = human_set.items
    assert (q1.labels, q1.gold, q1.model_a, q1.model_b) == (("a", "a", "tie"), "a", "sys-x", "sys-y")
    assert (q2.labels, q2.gold) == (("b",), "b")
    with pytest.raises(JudgingInputError, match="raters saw different answers"):
        blind_human_set(
            [rating("Q1", "r1", "A"), BlindRating("sheet-1", "Q1", "?", "r2", "sys-y", "sys-x", "y", "x", "B")], "b"
        )


# --- the recorded judges reproduce the published figures ----------------------------------------


@pytest.mark.parametrize("set_name", list(LLMBAR_SETS))
def test_gpt4_on_llmbar_reproduces_the_papers_accuracy_and_positional_agreement(agreement, set_name):
    """LLMBar's Table (GPT-4, Vanilla*: the repository's `Vanilla`, whose verdicts are shipped):
    average accuracy over the two orders and positional agreement rate, figure by figure."""
    row = agreement[(GPT4_LLMBAR_JUDGE, set_name)]
    accuracy, positional = LLMBAR_PUBLISHED["Vanilla*"][set_name]
    assert row.accuracy.value * 100 == pytest.approx(accuracy, abs=1e-9)
    assert row.position_consistency.value * 100 == pytest.approx(positional, abs=1e-9)
    # The paper's Vanilla row (no rules) is another prompt's verdicts: different figures.
    assert row.accuracy.value * 100 != pytest.approx(LLMBAR_PUBLISHED["Vanilla"][set_name][0], abs=0.01)
    assert row.unparsed == 0 and row.ties == 0


def test_llmbar_completions_parse_to_the_recorded_winners(shipped):
    """GPT-4's real completions, parsed as LLMBar's GPT-4/Vanilla config does ("Output (a)" at the
    start of a line is the first shown), give every recorded winner."""
    first, second = re.compile(r"(?:^|\n) ?Output \(a\)"), re.compile(r"(?:^|\n) ?Output \(b\)")
    _, verdicts = shipped
    checked = 0
    for v in verdicts:
        if v.judge != GPT4_LLMBAR_JUDGE:
            continue
        shown = "first" if first.search(v.raw) else "second" if second.search(v.raw) else None
        assert shown is not None, v.raw
        assert v.first_won == (shown == "first")
        checked += 1
    assert checked == 838


def test_pandalm_judges_reproduce_the_readme_table(shipped):
    """PandaLM's README (June 2023) scored both judges against the annotators' majority: accuracy
    and macro precision, recall and F1, GPT-3.5's unparsed answers counted as ties."""
    sets, verdicts = shipped
    pandalm = sets[PANDALM_SET]
    for judge, published in PANDALM_README.items():
        pairs = [
            ("tie" if v.verdict == "unparsed" else v.verdict, pandalm.by_id[v.item_id].gold)
            for v in verdicts
            if v.judge == judge
        ]
        scores = classification_scores(pairs)
        ours = [scores.accuracy * 100, scores.precision * 100, scores.recall * 100, scores.f1 * 100]
        assert ours == pytest.approx(list(published), abs=0.005)
    kappas = pairwise_cohen_kappas([item.labels for item in pandalm.items])
    assert {pair: round(k, 2) for pair, k in kappas.items()} == PANDALM_README_KAPPAS


def test_our_pandalm_figures_count_unparsed_as_wrong(agreement):
    gpt35 = agreement[(GPT35_PANDALM_JUDGE, PANDALM_SET)]
    assert gpt35.accuracy.value == pytest.approx(697 / 999)  # 71.07% in PandaLM's convention (unparsed = tie)
    assert gpt35.unparsed == 25 and gpt35.position_consistency.value is None  # one order only
    assert gpt35.human_kappa.value == pytest.approx(0.8642, abs=1e-4)


def test_the_human_mt_bench_verdicts_make_battles(shipped):
    sets, _ = shipped
    battles = battles_from_labels(sets[MT_BENCH_HUMAN_SET])
    assert len(battles) == 130 and {b.winner for b in battles} == {"model_a", "model_b"}


def test_recorded_verdicts_are_judges_of_their_own(shipped):
    _, verdicts = shipped
    v = next(v for v in verdicts if v.judge == PANDALM7B_JUDGE)
    assert isinstance(v, JudgeVerdict) and v.order == "as_is" and v.prompt is None and v.cost_usd is None
