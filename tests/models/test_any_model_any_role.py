"""One route to every model: a local model (on the resource's device and dtype) and a served model
can each compress and judge an era; a local model answers a chat as it generates; a small offline era."""

import asyncio

import pytest
from dagster import DagsterInstance, materialize

from eval_engine import DEFAULT_LOCAL_MODEL
from eval_platform.common.judges import ProbabilitiesJudge, WrittenJudge
from eval_platform.common.models import Chat, GenerationRequest, ModelSettings, open_model
from eval_platform.evaluation_assets.evolution.assets import (
    era_summary,
    evolution_era,
    gene_pools,
    judge_analysis,
    pareto_front,
    source_paragraphs,
)
from eval_platform.evolution.judging import RUBRIC, judge_compression, panel_judge
from eval_platform.resources import LanguageModelResource, ModelGatewayResource, WarehouseResource
from tests.openai_stub_server import CLIENT_TIMEOUT_S, StubServer

ORIGINAL = "The river floods every spring, when snow melts in the mountains and the water level rises quickly."


def test_a_local_chat_answer_is_its_greedy_generation(local_model):
    reply = asyncio.run(local_model.acomplete(Chat("Be brief.", "Name a colour."), max_tokens=8))
    (direct,) = local_model.generate([GenerationRequest(Chat("Be brief.", "Name a colour."), max_new_tokens=8)])
    assert reply.text == direct and reply.text.strip()
    assert reply.prompt_tokens == len(local_model.encode(local_model.render(Chat("Be brief.", "Name a colour."))))
    assert reply.completion_tokens == len(local_model.encode(direct)) and reply.cost_usd is None


def test_local_judge_scores_each_dimension_in_range():
    judge = panel_judge(open_model(DEFAULT_LOCAL_MODEL))
    assert isinstance(judge.asking, ProbabilitiesJudge)
    verdict = asyncio.run(
        judge_compression("local", judge, ORIGINAL, "River floods each spring as mountain snow melts.")
    )
    assert verdict["error"] is None and verdict["calls"][0]["attempts"] is None  # a local judge makes no API call
    for name, maximum, _ in RUBRIC:
        assert 0 <= verdict[name] <= maximum
    assert verdict["score"] == pytest.approx(sum(verdict[name] for name, _, _ in RUBRIC))


def test_every_backend_opens_by_prefix():
    settings = ModelSettings()
    assert type(open_model("served/judge-fast", settings)).__name__ == "ServedCompletionsModel"
    assert type(open_model("openai/gpt-4o-mini", settings)).__name__ == "ApiChatModel"
    assert isinstance(panel_judge(open_model("served/judge-fast", settings)).asking, WrittenJudge)


def era(warehouse, name, config, evaluation_model, gateway=None):
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("eras", [name])
    resources = {
        "warehouse": warehouse,
        "evaluation_model": evaluation_model,
        "gateway": gateway or ModelGatewayResource(),
    }
    assert materialize([source_paragraphs, gene_pools], resources=resources, instance=instance).success
    return materialize(
        [evolution_era, era_summary, judge_analysis, pareto_front],
        partition_key=name,
        resources=resources,
        instance=instance,
        run_config={"ops": {"evolution_era": {"config": config}}},
    )


@pytest.mark.slow
def test_small_offline_era_on_the_local_model(warehouse):
    config = {"population_size": 3, "generations": 1, "compression_max_tokens": 16}
    assert era(warehouse, "offline-test", config, LanguageModelResource()).success
    with warehouse.get_connection() as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT generation) FROM generations").fetchone() == (6, 2)
        assert conn.execute("SELECT count(*) FROM judge_scores WHERE error IS NULL").fetchone()[0] == 5
        assert conn.execute("SELECT min(quality_scores.smollm2) > 0 FROM generations").fetchone()[0]


@pytest.mark.slow
def test_a_local_model_on_the_chosen_dtype_compresses_and_judges(tmp_path):
    """The era's local compressor and judge run in the evaluation_model resource's precision:
    bfloat16 judges the same prompts' compressions with other probabilities than float32."""
    config = {"population_size": 2, "generations": 0, "compression_max_tokens": 8, "use_response_cache": False}
    scores = {}
    for dtype in ("float32", "bfloat16"):
        warehouse = WarehouseResource(database=str(tmp_path / f"{dtype}.duckdb"))
        assert era(warehouse, "on-cpu", config, LanguageModelResource(device="cpu", dtype=dtype)).success
        with warehouse.get_connection() as conn:
            scores[dtype] = conn.execute("SELECT prompt_id, score FROM judge_scores ORDER BY prompt_id").fetchall()
    assert [p for p, _ in scores["float32"]] == [p for p, _ in scores["bfloat16"]]
    assert all(score is not None for _, score in scores["float32"] + scores["bfloat16"])
    assert scores["float32"] != scores["bfloat16"]


def test_a_served_model_compresses_judges_and_mutates_over_http(warehouse, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    config = {
        "population_size": 5,
        "generations": 1,
        "compression_model": "served/compressor",
        "judge_panel": {"served": "served/judge-fast"},
        "mutation_model": "served/mutator",
        "use_response_cache": False,
    }
    with StubServer() as server:
        gateway = ModelGatewayResource(api_base=server.api_base, timeout_s=CLIENT_TIMEOUT_S, max_retries=1)
        assert era(warehouse, "served", config, LanguageModelResource(), gateway).success
        calls = dict(server.calls)
    assert calls["compressor"] == 9 and calls["judge-fast"] == 9 and calls["mutator"] == 1
    with warehouse.get_connection() as conn:
        assert conn.execute("SELECT count(*), count(score) FROM judge_scores WHERE era = 'served'").fetchone() == (9, 9)
        assert conn.execute("SELECT DISTINCT model FROM gateway_calls WHERE purpose = 'compression'").fetchall() == [
            ("served/compressor",)
        ]
