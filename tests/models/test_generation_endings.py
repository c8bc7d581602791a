"""Why each generation ended (eval_engine/endings.py): the engine's endings as
transformers' own `generate` ends the same prompts, an API's `finish_reason` through litellm, a
budget cut inside a reasoning block, and each result's share of answers cut at the budget."""

import asyncio

import pytest

from eval_engine import (
    BUDGET,
    END_TOKEN,
    REASONING_OPEN,
    STOP_SEQUENCE,
    STOPPED,
    Generation,
    ended_of,
    with_reasoning_ending,
)
from eval_platform.benchmarks.records import Answer, Result, Sample
from eval_platform.benchmarks.scoring import with_budget_shares
from eval_platform.common.models import Chat, GenerationRequest
from tests.openai_stub_server import StubServer

# (prompt, budget, stop sequences): one that ends with the end token, one cut at its budget, one at a stop
REQUESTS = [
    (Chat("", "Reply with the single word yes."), 40, ()),
    (Chat("", "Count from 1 to 20, separated by commas."), 6, ()),
    (Chat("", "Count from 1 to 20, separated by commas."), 60, ("7",)),
]


def transformers_ending(model, request: GenerationRequest) -> str:
    """How transformers' greedy `generate` ends the prompt alone: at a stop sequence in its text,
    at the end token, or with its budget spent."""
    import torch

    tokens = model.generation_prompt(request)
    with torch.inference_mode():
        output = model.network.generate(
            input_ids=torch.tensor([tokens]),
            max_new_tokens=request.max_new_tokens,
            do_sample=False,
            pad_token_id=model.tokenizer.pad_token_id,
        )
    new = output[0, len(tokens) :].tolist()
    text = model.tokenizer.decode(new, skip_special_tokens=True)
    if any(stop in text for stop in request.stop):
        return STOP_SEQUENCE
    eos = model.network.generation_config.eos_token_id
    return END_TOKEN if new[-1] in (eos if isinstance(eos, list) else [eos]) else BUDGET


def test_each_generation_says_why_it_ended_as_transformers_generate_ends_it(local_model):
    requests = [GenerationRequest(prompt, budget, stop) for prompt, budget, stop in REQUESTS]
    generated = local_model.generate(requests, 3)
    expected = [transformers_ending(local_model, request) for request in requests]
    assert expected == [END_TOKEN, BUDGET, STOP_SEQUENCE]  # the three ways, each seen
    assert [text.ended for text in generated] == expected
    assert "7" not in generated[2]  # cut before its stop sequence, as before


def test_a_chat_answer_says_why_it_ended(local_model):
    completion = asyncio.run(local_model.acomplete(*REQUESTS[1][:2]))
    assert completion.ended == BUDGET


def test_an_apis_finish_reason_reaches_each_generation():
    """The stub cuts a reply at `max_tokens` words with `length`; litellm's `finish_reason` becomes
    the budget, and `stop` the model stopping (an API does not tell its end token from a stop sequence)."""
    from eval_platform.common.gateway import ModelGateway
    from eval_platform.common.models.api_chat import ApiChatModel

    with StubServer() as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        model = ApiChatModel("openai/echo", ModelGateway(api_base=server.api_base, max_retries=0))
        prompt = Chat("", "one two three four five six")
        cut, whole = model.generate([GenerationRequest(prompt, 3), GenerationRequest(prompt, 50)])
    assert (cut, cut.ended) == ("one two three", BUDGET)
    assert (whole, whole.ended) == ("one two three four five six", STOPPED)


@pytest.mark.parametrize(
    ("text", "ended", "expected"),
    [
        ("Let me think about the first step", BUDGET, REASONING_OPEN),  # cut before </think>
        ("Thought it through.</think> The answer is", BUDGET, BUDGET),  # cut after it: the answer was
        ("Let me think", END_TOKEN, END_TOKEN),  # not cut at the budget
    ],
)
def test_a_budget_cut_before_the_reasoning_end_leaves_the_block_open(text, ended, expected):
    assert ended_of(with_reasoning_ending(Generation(text, ended), "</think>")) == expected
    assert ended_of(with_reasoning_ending(Generation(text, ended), None)) == ended  # no reasoning declared


def test_each_result_carries_the_share_of_its_answers_cut_at_the_budget():
    """By hand: task a's two documents asked 3 answers, 1 cut at the budget and 1 with its
    reasoning open (2 of 3); task b's one answer ends with its end token, one of unknown ending not
    counted (0 of 1); the group over both, 2 of 4; a task of log-likelihoods has none (None). An
    answer shared by two filters' samples counts once."""

    def sample(task: str, doc_id: int, keys: list[str], filter: str = "none") -> Sample:
        return Sample(task, doc_id, filter, "", [], keys, None, None, None, {}, {})

    answers = {
        "k1": Answer("generate_until", [], "", True, BUDGET),
        "k2": Answer("generate_until", [], "", True, STOP_SEQUENCE),
        "k3": Answer("generate_until", [], "", True, REASONING_OPEN),
        "k4": Answer("generate_until", [], "", False, END_TOKEN),
        "k5": Answer("generate_until", [], "", False, None),
        "k6": Answer("loglikelihood", [], [-1.0, True], True),
    }
    samples = [
        sample("a", 0, ["k1", "k2"]),
        sample("a", 0, ["k1", "k2"], "strict"),
        sample("a", 1, ["k3"]),
        sample("b", 0, ["k4", "k5"]),
        sample("c", 0, ["k6"]),
    ]
    results = [Result(task, "exact_match", "none", 0.5, is_group=task == "ab") for task in ("a", "b", "ab", "c")]
    shares = with_budget_shares(results, samples, answers, {"ab": ["a", "b"]})
    assert [r.cut_at_budget for r in shares] == [2 / 3, 0.0, 2 / 4, None]


def test_the_leaderboard_flags_a_headline_with_more_than_5_percent_cut_at_the_budget():
    from eval_platform.benchmarks.declarations import Benchmark
    from eval_platform.benchmarks.leaderboard import leaderboard_table

    def headline(model: str, cut: float | None) -> dict:
        measured = {"solver": "harness", "settings_key": "default shots", "task": "gsm8k", "metric": "exact_match"}
        value = {"value": 0.25, "ci_low": 0.2, "ci_high": 0.3, "cut_at_budget": cut}
        return {"model": model, "model_fingerprint": model, "benchmark": "gsm8k", **measured, "filter": "none",
                "num_fewshot": 5, "n": 100, **value}  # fmt: skip

    rows = [headline("cut", 0.12), headline("at the line", 0.05), headline("greedy", None)]
    table = leaderboard_table(rows, [], {"gsm8k": Benchmark(name="gsm8k", task="gsm8k")})
    cells = dict(zip(table["model"], table["gsm8k (5-shot exact_match)"], strict=True))
    assert cells == {
        "cut": "0.250 [0.200, 0.300], 12.0% cut at the budget",
        "at the line": "0.250 [0.200, 0.300]",
        "greedy": "0.250 [0.200, 0.300]",
    }
