"""Benchmark predictions from an API model through litellm's real HTTP path (a local stub server)."""

import json
import math
from pathlib import Path

import pytest

from eval_platform.common.models.api_chat import label_distribution
from eval_platform.resources import LanguageModelResource, ModelGatewayResource
from tests.evaluation import materialize_evaluation, materialize_inputs, roster_with
from tests.openai_stub_server import StubServer


@pytest.fixture(scope="module")
def server():
    with StubServer() as stub, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        yield stub


def run(warehouse, server, model, solvers=("letter",)):
    """An API model as a roster entry (its model string), reached through the gateway resource's server."""
    assert materialize_inputs(warehouse, "arc_easy", 4).success
    roster = roster_with(Path(warehouse.database).parent / "roster", "api-model", model=model)
    return materialize_evaluation(
        warehouse,
        "arc_easy",
        "api-model",
        roster,
        {"solvers": list(solvers)},
        evaluation_model=LanguageModelResource(),
        gateway=ModelGatewayResource(api_base=server.api_base, max_retries=0),
        raise_on_error=False,
    )


def test_letter_from_top_logprobs(warehouse, server):
    assert run(warehouse, server, "openai/letter-logprobs").success
    with warehouse.get_connection() as conn:
        rows = conn.execute("SELECT filtered_responses ->> '$[0]', responses -> '$[0]' FROM samples").fetchall()
    assert len(rows) == 4 and all(predicted == "B" for predicted, _ in rows)
    probabilities = json.loads(rows[0][1])
    expected_b = math.exp(-0.2) / (math.exp(-0.2) + math.exp(-2.0) + math.exp(-3.0))
    assert probabilities["B"] == pytest.approx(expected_b) and probabilities["D"] == 0
    assert sum(probabilities.values()) == pytest.approx(1)


def test_letter_parsed_from_text_without_logprobs(warehouse, server):
    assert run(warehouse, server, "openai/letter-text").success
    with warehouse.get_connection() as conn:
        assert {r[0] for r in conn.execute("SELECT filtered_responses ->> '$[0]' FROM samples").fetchall()} == {"C"}


def test_the_harness_log_likelihoods_are_refused_for_chat_apis(warehouse, server):
    result = run(warehouse, server, "openai/letter-text", solvers=("harness",))
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "without prompt log-probabilities" in str(failure.step_failure_data.error)


def test_label_distribution_rules():
    assert label_distribution({" A": -1.0, "a": -0.5, "B": -0.5}, "", ["A", "B"]) == {"A": 0.5, "B": 0.5}
    assert label_distribution(None, "Answer: 2", ["1", "2"]) == {"1": 0.0, "2": 1.0}
    assert label_distribution(None, "No idea.", ["A", "B"]) is None


def test_gateway_reused_across_event_loops(server):
    from eval_platform.common.gateway import ModelGateway, chat

    gateway = ModelGateway(api_base=server.api_base, max_concurrency=2)
    for i in range(25):  # each call runs its own event loop, as ApiChatModel's calls do
        assert gateway.complete("openai/echo", chat(None, f"hello {i}")).text == f"hello {i}"
    assert len(gateway._semaphores) == 1  # only the last loop's semaphore is left, not 25


def test_sampled_calls_send_their_settings_and_are_cached_apart_from_greedy_ones(server):
    """Through litellm to the stub: a greedy call goes at temperature 0; each sample of a sampled
    request with its temperature, top-p and a seed of its own; the response cache answers a request
    again only with its own settings and sample index (never a greedy answer for a sample)."""
    import asyncio

    from eval_engine import Sampling
    from eval_platform.common.gateway import KeptResponses, ModelGateway, ResponseCachedModel
    from eval_platform.common.models import Chat
    from eval_platform.common.models.api_chat import ApiChatModel

    model = ResponseCachedModel(ApiChatModel("openai/echo", ModelGateway(api_base=server.api_base)), KeptResponses())
    sampling = Sampling(temperature=0.6, top_p=0.95, seed=3)
    prompt = Chat("", "a question asked four ways")

    async def asked():
        return [
            await model.acomplete(prompt, 8),
            await model.acomplete(prompt, 8, sampling=sampling, sample=0),
            await model.acomplete(prompt, 8, sampling=sampling, sample=1),
            await model.acomplete(prompt, 8, sampling=sampling, sample=0),
            await model.acomplete(prompt, 8),
        ]

    before = len(server.sent.get("echo", []))
    answers = asyncio.run(asked())
    sent = server.sent["echo"][before:]
    assert [a.cached for a in answers] == [False, False, False, True, True]
    assert sent[0] == {"temperature": 0}
    assert [{k: v for k, v in s.items() if k != "seed"} for s in sent[1:]] == [{"temperature": 0.6, "top_p": 0.95}] * 2
    assert sent[1]["seed"] != sent[2]["seed"] and len(sent) == 3
