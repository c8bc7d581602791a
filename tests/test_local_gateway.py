"""The local model as a litellm provider and as a probability-weighted judge; a small offline era."""

import asyncio

import pytest
from dagster import DagsterInstance, materialize

from eval_platform.assets.evolution import (
    era_summary, evolution_era, gene_pools, judge_analysis, pareto_front, source_paragraphs,
)
from eval_platform.core.gateway import ModelGateway, chat
from eval_platform.core.judging import RUBRIC, ProbabilityRubricJudge, make_judge
from eval_platform.core.models import Chat, GenerationRequest
from eval_platform.core.models.local import DEFAULT_LOCAL_MODEL
from eval_platform.resources import ModelGatewayResource

ORIGINAL = "The river floods every spring, when snow melts in the mountains and the water level rises quickly."


def test_local_model_through_litellm_custom_provider(local_model):
    reply = ModelGateway().complete(DEFAULT_LOCAL_MODEL, chat("Be brief.", "Name a colour."), max_tokens=8)
    assert reply.text.strip() and reply.attempts == 1
    (direct,) = local_model.generate([GenerationRequest(Chat("Be brief.", "Name a colour."), max_new_tokens=8)])
    assert reply.text == direct  # one code path, same greedy output


def test_local_judge_scores_each_dimension_in_range():
    judge = make_judge(DEFAULT_LOCAL_MODEL, ModelGateway())
    assert isinstance(judge, ProbabilityRubricJudge)
    verdict, call = asyncio.run(judge.scores(ORIGINAL, "River floods each spring as mountain snow melts."))
    assert call is None  # a local judge makes no API call
    for name, maximum, _ in RUBRIC:
        assert 0 <= verdict[name] <= maximum
    assert verdict["score"] == pytest.approx(sum(verdict[name] for name, _, _ in RUBRIC))


def test_small_offline_era_on_the_local_model(warehouse):
    config = {"population_size": 3, "generations": 1, "compression_max_tokens": 16}
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("eras", ["offline-test"])
    resources = {"warehouse": warehouse, "gateway": ModelGatewayResource()}
    assert materialize([source_paragraphs, gene_pools], resources=resources, instance=instance).success
    result = materialize([evolution_era, era_summary, judge_analysis, pareto_front], partition_key="offline-test",
                         resources=resources, instance=instance, run_config={"ops": {"evolution_era": {"config": config}}})
    assert result.success
    with warehouse.get_connection() as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT generation) FROM generations").fetchone() == (6, 2)
        assert conn.execute("SELECT count(*) FROM judge_scores WHERE error IS NULL").fetchone()[0] == 5
        assert conn.execute("SELECT min(quality_scores.smollm2) > 0 FROM generations").fetchone()[0]
