"""Pairwise judging as MT-Bench does it: FastChat's prompts filled in, its verdict and rating parsing,
every pair judged in both orders with each verdict's raw text, order, tokens and cost; API judges
through litellm over HTTP (a local server), and the real local model by its next-letter
probabilities."""

import asyncio
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from eval_platform.common.judges import judge_named
from eval_platform.common.keeping import Keeping
from eval_platform.common.models import Completion
from eval_platform.judging.datasets import (
    shipped_human_sets,
    shipped_judge_prompts,
    shipped_mt_bench,
)
from eval_platform.judging.grading import grade_answers, mt_bench_grade_tasks
from eval_platform.judging.pairwise import (
    MT_BENCH_SET,
    item_task,
    judge_kept,
    judge_pairs,
    mt_bench_item_id,
    mt_bench_pairs,
    mt_bench_tasks,
    pairwise_user_prompt,
    parse_pairwise,
    parse_rating,
    prompt_name,
    reusable,
    scores_to_verdict,
    single_user_prompt,
    verdict_request_key,
)
from eval_platform.judging.ratings import battles_from_verdicts, leaderboard
from tests.conftest import PROJECT_ROOT
from tests.openai_stub_server import StubServer


@pytest.fixture(scope="module")
def prompts():
    return shipped_judge_prompts()


@pytest.fixture(scope="module")
def mt_bench():
    return shipped_mt_bench()


# --- prompts ------------------------------------------------------------------------------------


def test_prompt_names_follow_fastchat():
    assert prompt_name("pairwise", "writing", 1) == "pair-v2"
    assert prompt_name("pairwise", "math", 1) == "pair-math-v1"
    assert prompt_name("pairwise", "coding", 2) == "pair-math-v1-multi-turn"
    assert prompt_name("single", "reasoning", 1) == "single-math-v1"
    assert prompt_name("single", "roleplay", 2) == "single-v1-multi-turn"


def test_prompts_are_filled_in_as_fastchat_does(prompts):
    """Each of the eight templates with the keyword arguments FastChat's run_judge_pair and
    run_judge_single pass it."""
    question, a, b, ref = ("Q1", "Q2"), ("A1", "A2"), ("B1", "B2"), ("R1", "R2")
    pair = prompts["pair-v2"].prompt_template
    assert pairwise_user_prompt(prompts["pair-v2"], question, a, b) == pair.format(
        question="Q1", answer_a="A1", answer_b="B1"
    )
    math = prompts["pair-math-v1"].prompt_template
    assert pairwise_user_prompt(prompts["pair-math-v1"], question, a, b, ref) == math.format(
        question="Q1", answer_a="A1", answer_b="B1", ref_answer_1="R1", ref_answer_2="R2"
    )
    turn2 = prompts["pair-math-v1-multi-turn"]
    expected = turn2.prompt_template.format(
        question_1="Q1",
        question_2="Q2",
        answer_a_1="A1",
        answer_b_1="B1",
        answer_a_2="A2",
        answer_b_2="B2",
        ref_answer_1="R1",
        ref_answer_2="R2",
    )
    assert pairwise_user_prompt(turn2, question, a, b, ref) == expected
    assert "### Assistant A:\nA2" in expected and "### Reference answer:\nR2" in expected
    single = prompts["single-v1-multi-turn"]
    assert single_user_prompt(single, question, a) == single.prompt_template.format(
        question_1="Q1", question_2="Q2", answer_1="A1", answer_2="A2"
    )
    assert single_user_prompt(prompts["single-math-v1"], question, a, ref).endswith(
        "[The Start of Assistant's Answer]\nA1\n[The End of Assistant's Answer]"
    )
    with pytest.raises(ValueError, match="needs a reference answer"):
        pairwise_user_prompt(prompts["pair-math-v1"], question, a, b)
    with pytest.raises(ValueError, match="not a pairwise prompt"):
        pairwise_user_prompt(prompts["single-v1"], question, a, b)


def test_mt_bench_tasks_show_both_orders_with_the_right_prompt(prompts, mt_bench):
    questions, answers = mt_bench
    pairs = mt_bench_pairs(sorted(answers), "pairwise-all")
    assert len(pairs) == 28 and mt_bench_pairs(["x", "y", "z"], "pairwise-baseline", "y") == [("x", "y"), ("z", "y")]
    math_question = next(q for q in questions if q.category == "math")
    tasks = mt_bench_tasks([math_question], answers, [("gpt-4", "llama-13b")], prompts, turns=(1, 2))
    first, second = tasks
    assert first.item_id == mt_bench_item_id(math_question.question_id, "gpt-4", "llama-13b")
    assert (first.turn, second.turn, first.set_name) == (1, 2, MT_BENCH_SET)
    gpt4 = answers["gpt-4"][math_question.question_id].turns[0]
    llama = answers["llama-13b"][math_question.question_id].turns[0]
    # As is: gpt-4's answer is assistant A; swapped: llama's is.
    assert first.as_is.user.index(gpt4) < first.as_is.user.index(llama)
    assert first.swapped.user.index(llama) < first.swapped.user.index(gpt4)
    assert math_question.reference[0] in first.as_is.user  # the reference answer, for math
    assert first.as_is.system == prompts["pair-math-v1"].system_prompt
    assert second.as_is.system == prompts["pair-math-v1-multi-turn"].system_prompt
    assert len(mt_bench_tasks(questions, answers, pairs, prompts)) == 80 * 28


# --- parsing ------------------------------------------------------------------------------------


def test_verdicts_parse_as_fastchat_parses_them():
    assert parse_pairwise("Assistant A is more detailed.\n\nFinal Verdict: [[A]]") == "A"
    assert parse_pairwise("[[B]]") == "B"
    assert parse_pairwise("Both are equally good. [[C]]") == "tie"
    assert parse_pairwise("I prefer assistant B.") == "error"
    # FastChat looks for [[A]] first: a judgment quoting "[[A]]" before its verdict [[B]] reads as A.
    assert parse_pairwise('The format is "[[A]]" if A is better... my verdict: [[B]]') == "A"
    assert parse_pairwise("Scores: [[7, 7.05]]", "[[rating_a,rating_b]]") == "tie"  # within 0.1
    assert parse_pairwise("Scores: [8,6]", "[[rating_a,rating_b]]") == "A"
    with pytest.raises(ValueError, match="invalid output format"):
        parse_pairwise("[[A]]", "[[score]]")


def test_ratings_parse_as_fastchat_parses_them():
    assert parse_rating("... Rating: [[5]]") == 5.0
    assert parse_rating("Rating: [[8.5]] (out of [[10]])") == 8.5  # the first
    assert parse_rating("Rating: [7]") == 7.0  # the backup pattern
    assert parse_rating("Rating: 7/10") is None  # FastChat's -1
    assert (
        scores_to_verdict(7.0, 7.05) == "tie"
        and scores_to_verdict(8, 6) == "A"
        and scores_to_verdict(None, 6) == "error"
    )


# FastChat's own recorded GPT-4 judgments (tests/data/fastchat/SOURCES.md); EVAL_FASTCHAT_JUDGMENTS
# adds a file of one's own, e.g. the whole `model_judgment/gpt-4_pair.jsonl` of FastChat's release.
RECORDED = Path(__file__).parents[1] / "data" / "fastchat"
FASTCHAT_JUDGMENTS = [
    RECORDED / "gpt-4_pair.jsonl",
    *([Path(os.environ["EVAL_FASTCHAT_JUDGMENTS"])] if os.environ.get("EVAL_FASTCHAT_JUDGMENTS") else []),
]


@pytest.mark.parametrize("judgments", FASTCHAT_JUDGMENTS, ids=lambda path: path.name)
def test_recorded_fastchat_judgments_parse_to_their_recorded_winners(judgments):
    """Every real GPT-4 judgment FastChat recorded parses to the winner it recorded for it: A, B, a
    tie and an unparsed one (`error`) among them."""
    rows = [json.loads(line) for line in judgments.read_text().splitlines() if line]
    maps = {"g1": {"A": "model_1", "B": "model_2"}, "g2": {"A": "model_2", "B": "model_1"}}
    winners = set()
    for row in rows:
        for game, mapping in maps.items():
            parsed = parse_pairwise(row[f"{game}_judgment"])
            assert mapping.get(parsed, parsed) == row[f"{game}_winner"], row[f"{game}_judgment"][-200:]
            winners.add(row[f"{game}_winner"])
    assert winners == {"model_1", "model_2", "tie", "error"}


def test_recorded_fastchat_grades_parse_to_their_recorded_scores():
    rows = [json.loads(line) for line in (RECORDED / "gpt-4_single.jsonl").read_text().splitlines() if line]
    assert len(rows) == 160
    for row in rows:
        assert (parse_rating(row["judgment"]) or -1) == row["score"], row["judgment"][-200:]


# --- judging ------------------------------------------------------------------------------------


class ScriptedJudge:
    """Answers from a script keyed by the answer shown first ("raise": the call fails)."""

    rubric_judging = "json"

    def __init__(self, replies):
        self.replies = replies
        self.chats = []

    async def acomplete(self, chat, max_tokens, stop=(), top_logprobs=None):
        self.chats.append(chat)
        await asyncio.sleep(0)
        for key, reply in self.replies.items():
            if f"[The Start of Assistant A's Answer]\n{key}\n[The End of Assistant A's Answer]" in chat.user:
                if reply == "raise":
                    raise RuntimeError("provider down")
                return Completion(reply, 5, 1, prompt_tokens=100, completion_tokens=10, cost_usd=0.001)
        return Completion("no verdict here", 5, 1, prompt_tokens=100, completion_tokens=3, cost_usd=0.0005)


def test_every_pair_is_judged_in_both_orders_and_stored_with_its_cost(prompts):
    human_set = shipped_human_sets()["llmbar_natural"]
    items = human_set.items[:2]
    tasks = [item_task(item, prompts) for item in items]
    first_answer = items[0].answer_a
    judge = ScriptedJudge({first_answer: "A is better. [[A]]", items[0].answer_b: "[[A]]", items[1].answer_a: "raise"})
    verdicts = asyncio.run(judge_pairs("scripted", judge, tasks, concurrency=2))
    assert len(judge.chats) == 4 and len(verdicts) == 4
    assert [(v.item_id, v.order) for v in verdicts] == [
        ("0", "as_is"),
        ("0", "swapped"),
        ("1", "as_is"),
        ("1", "swapped"),
    ]
    as_is, swapped, failed, unparsed = verdicts
    # Item 0: "[[A]]" both times: answer a shown first wins, then answer b shown first wins.
    assert (as_is.verdict, swapped.verdict) == ("a", "b")
    assert as_is.first_won and swapped.first_won
    assert as_is.raw == "A is better. [[A]]" and as_is.prompt == tasks[0].as_is.user
    assert (as_is.prompt_tokens, as_is.completion_tokens, as_is.cost_usd) == (100, 10, 0.001)
    # Item 1: the call failed (an unparsed verdict with its error), then a reply without a verdict.
    assert failed.verdict == "unparsed" and "provider down" in failed.error and failed.cost_usd is None
    assert unparsed.verdict == "unparsed" and unparsed.error is None and unparsed.cost_usd == 0.0005
    assert all(v.judge == "scripted" and v.set_name == "llmbar_natural" and v.source == "model" for v in verdicts)


def test_verdicts_are_kept_in_chunks_and_a_rerun_asks_only_what_it_lacks(prompts):
    """A panel's verdicts kept in chunks as they come (common/keeping.py); the next run reuses each
    stored verdict of the same request key, asks again a failed call's, and one whose judge, mode,
    budget or prompt changed never reuses it."""
    human_set = shipped_human_sets()["llmbar_natural"]
    items = human_set.items[:3]
    tasks = [item_task(item, prompts) for item in items]
    replies = {items[0].answer_a: "[[A]]", items[0].answer_b: "[[B]]", items[1].answer_a: "raise"}

    def run(stored, judge, tasks=tasks, **settings):
        kept = []
        keeping = Keeping(reusable(stored), keep=kept.append, chunk_size=4, smallest=2)
        return judge_kept("scripted", judge, tasks, keeping, **settings), kept

    first_judge = ScriptedJudge(replies)
    verdicts, chunks = run({}, first_judge)
    assert len(first_judge.chats) == 6 and [len(chunk) for chunk in chunks] == [4, 2]
    assert verdicts == asyncio.run(judge_pairs("scripted", ScriptedJudge(replies), tasks))  # as judge_pairs gives them
    stored = {key: verdict for chunk in chunks for key, verdict in chunk}
    assert list(stored.values()) == verdicts  # each kept once, under a key of its own
    # the rerun: every kept verdict reused but the failed call's, which is asked again
    again = ScriptedJudge(replies)
    assert run(stored, again)[0] == verdicts and len(again.chats) == 1
    assert "provider down" in stored[next(k for k, v in stored.items() if v.error)].error
    # a changed prompt (its system prompt or template), budget, mode or judge model reuses nothing
    pair_v2 = prompts["pair-v2"]

    def with_prompt(**changes):
        return [item_task(item, {"pair-v2": replace(pair_v2, **changes)}) for item in items]

    for changed, settings in [
        (with_prompt(system_prompt=pair_v2.system_prompt + " "), {}),
        (with_prompt(prompt_template=pair_v2.prompt_template + " "), {}),
        (tasks, {"max_tokens": 7}),
    ]:
        judge = ScriptedJudge(replies)
        run(stored, judge, changed, **settings)
        assert len(judge.chats) == 2 * len(changed)
    task, order = tasks[0], "as_is"
    written, probabilities = judge_named("written"), judge_named("probabilities")
    key = verdict_request_key("scripted", "scripted", task, order, written, 2048)
    assert key in stored and judge_named("generate") is written  # judging's `mode: generate` still names it
    assert key != verdict_request_key("scripted", "scripted", task, order, probabilities, 2048)
    assert key != verdict_request_key("scripted", "local/other@weights", task, order, written, 2048)
    assert key != verdict_request_key("scripted", "scripted", task, "swapped", written, 2048)


class LetterModel:
    """A local-style judge: next-letter probabilities favour the first answer shown."""

    rubric_judging = "probabilities"

    def __init__(self):
        self.calls = []

    def label_probabilities(self, chats, labels, batch_size):
        self.calls.append((len(chats), batch_size))
        return [{"A": 0.6, "B": 0.3, "C": 0.1} for _ in chats]


def test_a_small_local_model_judges_by_letter_probabilities(prompts):
    items = shipped_human_sets()["llmbar_natural"].items[:3]
    model = LetterModel()
    verdicts = asyncio.run(judge_pairs("local/letters", model, [item_task(i, prompts) for i in items], batch_size=4))
    assert model.calls == [(6, 4)]
    assert [v.verdict for v in verdicts] == ["a", "b"] * 3  # always the first shown: a position-biased judge
    assert verdicts[0].raw == "P(A)=0.6000 P(B)=0.3000 P(C)=0.1000"


def test_single_answer_grading(prompts, mt_bench):
    questions, answers = mt_bench
    tasks = mt_bench_grade_tasks(questions[:2], answers, ["gpt-4"], prompts)
    assert [(t.question_id, t.turn) for t in tasks] == [(81, 1), (81, 2), (82, 1), (82, 2)]

    class Grader:
        async def acomplete(self, chat, max_tokens):
            return Completion("Good. Rating: [[8]]", 1, 1, prompt_tokens=50, completion_tokens=5, cost_usd=0.002)

    grades = asyncio.run(grade_answers("grader", Grader(), tasks))
    assert [g.score for g in grades] == [8.0] * 4 and grades[0].cost_usd == 0.002


def test_an_api_judge_through_litellm_over_http(prompts, mt_bench, monkeypatch):
    """An API model as a judge, reached as every model is (open_model, the gateway, litellm, HTTP):
    the stub judge prefers the longer answer; both orders of every pair come back, and a
    leaderboard is built from the stored verdicts."""
    from eval_platform.common.gateway import ModelGateway
    from eval_platform.common.models import open_model

    questions, answers = mt_bench
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with StubServer() as server:
        model = open_model("openai/judge-pairwise", gateway=ModelGateway(api_base=server.api_base, max_retries=0))
        pairs = mt_bench_pairs(["gpt-4", "llama-13b", "alpaca-13b"], "pairwise-all")
        tasks = mt_bench_tasks(questions[:4], answers, pairs, prompts)
        verdicts = asyncio.run(judge_pairs("openai/judge-pairwise", model, tasks, concurrency=4))
        assert server.calls["judge-pairwise"] == 2 * len(tasks) == 24
    assert all(v.verdict in ("a", "b", "tie") and "Final verdict" in v.raw for v in verdicts)
    for v in verdicts:  # the longer answer won, whichever order it was shown in
        question_id = int(v.item_id.split(":")[0])
        a, b = (len(answers[m][question_id].turns[0]) for m in (v.model_a, v.model_b))
        assert v.verdict == ("a" if a > b else "b" if b > a else "tie")
    board = leaderboard(battles_from_verdicts(verdicts), rounds=50)
    assert {row.model for row in board} == {"gpt-4", "llama-13b", "alpaca-13b"}
    assert sum(row.battles for row in board) == 2 * len(tasks)  # 12 battles, each counted for its two models


@pytest.mark.slow
def test_the_real_local_model_judges_both_orders(local_model, prompts):
    """The platform's local model (SmolLM2-135M) as a pairwise judge, as `make run` will use it."""
    item = shipped_human_sets()["llmbar_natural"].items[0]
    verdicts = asyncio.run(judge_pairs(local_model.name, local_model, [item_task(item, prompts)]))
    assert [v.order for v in verdicts] == ["as_is", "swapped"]
    assert all(v.verdict in ("a", "b", "tie") and v.raw.startswith("P(A)=") for v in verdicts)


def test_judging_is_logic_only():
    """The judging package imports neither Dagster nor DuckDB, nor another domain."""
    from tests.code_location.test_structure import imports

    for path in (PROJECT_ROOT / "eval_platform" / "judging").glob("*.py"):
        for target in imports(path):
            assert target.split(".")[0] not in ("dagster", "dagster_duckdb", "duckdb"), (path, target)
            parts = target.split(".")
            if parts[0] == "eval_platform" and len(parts) > 1:
                assert parts[1] in ("common", "judging"), (path, target)
