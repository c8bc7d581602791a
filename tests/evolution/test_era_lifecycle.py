"""Eras that survive and account for themselves: killed with SIGKILL in the middle of a generation
and resumed into exactly the era an uninterrupted run gives (HTTP judges and the local model); a
changed configuration refused; tokens and cost per call, generation and era; a budget that stops
an era at the right generation and resumes; the response cache; the judges' analysis and the
Pareto front; the era sensor."""

import json
import os
import signal

import duckdb
import pytest
from dagster import DagsterInstance, SensorResult, build_sensor_context, materialize

from eval_engine import DEFAULT_LOCAL_MODEL
from eval_platform.evaluation_assets.evolution.assets import (
    era_summary,
    evolution_era,
    gene_pools,
    judge_analysis,
    pareto_front,
    source_paragraphs,
)
from eval_platform.evolution.eras import EraConfigurationChanged
from eval_platform.resources import LanguageModelResource, ModelGatewayResource, RosterResource, WarehouseResource
from eval_platform.schedules.sensors import era_sensor
from tests.conftest import PROJECT_ROOT
from tests.era_process import DIE_AFTER_EVALUATIONS
from tests.openai_stub_server import CLIENT_TIMEOUT_S, StubServer
from tests.tables import assert_same_rows, table_rows

# litellm knows these models' prices; the stub answers them as its compressor and a fast judge.
PRICED = {"gpt-4o": "compressor", "gpt-4o-mini": "judge-fast"}
HTTP_ERA = {
    "population_size": 8,
    "generations": 3,
    "compression_model": "openai/compressor",
    "seed": 5,
    "judge_panel": {"openai": "openai/judge-openai", "claude": "openai/judge-claude", "gemini": "openai/judge-fast"},
}
COMPARED = {  # every column but timings, retries, and which of two identical concurrent requests paid
    "generations": "*",
    "judge_scores": "* EXCLUDE (judge_duration_ms)",
    "generation_stats": "*",
    "gateway_calls": "* EXCLUDE (attempts, duration_ms, cached, cost_usd)",
    "era_checkpoints": "* EXCLUDE (completed_at)",
}


@pytest.fixture(scope="module")
def server():
    with StubServer(latency_s=0.15, aliases=PRICED) as stub, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-era-not-a-real-key")
        yield stub


def warehouse_at(path) -> WarehouseResource:
    return WarehouseResource(database=str(path))


def run_era(warehouse, server, era, config, instance=None, assets=(evolution_era,)):
    instance = instance or DagsterInstance.ephemeral()
    if era not in instance.get_dynamic_partitions("eras"):
        instance.add_dynamic_partitions("eras", [era])
    resources = {
        "warehouse": warehouse,
        "evaluation_model": LanguageModelResource(),
        "gateway": ModelGatewayResource(
            api_base=server.api_base if server else None,
            timeout_s=CLIENT_TIMEOUT_S,  # the stub's answers and the local model's alike: ample under load
            max_retries=2,
            backoff_s=0.05,
        ),
    }
    assert materialize([source_paragraphs, gene_pools], resources=resources, instance=instance).success
    return materialize(
        list(assets),
        partition_key=era,
        resources=resources,
        instance=instance,
        raise_on_error=False,
        run_config={"ops": {"evolution_era": {"config": config}}},
    )


def era_process(zygote, path, era, config, api_base=None, die_after_evaluations=None) -> int:
    """The era in a process of its own (forked from the zygote): its exit code."""
    environment = {**os.environ, DIE_AFTER_EVALUATIONS: str(die_after_evaluations or "")}
    return zygote.run(
        "tests.era_process",
        [str(path), era, json.dumps(config), *([api_base] if api_base else [])],
        timeout_s=600,
        env=environment,
    )


def killed_in_generation_1(zygote, path, era, config, api_base=None) -> None:
    """Run the era in a process that kills itself once generation 1's first evaluation is done."""
    assert (
        era_process(zygote, path, era, config, api_base, die_after_evaluations=config["population_size"] + 1)
        == -signal.SIGKILL
    )


def tables(path, era) -> dict[str, list]:
    return table_rows(
        path,
        {table: f"SELECT {columns} FROM {table} WHERE era = ? ORDER BY ALL" for table, columns in COMPARED.items()},
        [era],
    )


def checkpoints(path, era) -> int:
    """Checkpointed generations so far (0 while the warehouse is busy or has none)."""
    try:
        with duckdb.connect(str(path), read_only=True) as conn:
            return conn.execute("SELECT count(*) FROM era_checkpoints WHERE era = ?", [era]).fetchone()[0]
    except (duckdb.IOException, duckdb.CatalogException):
        return 0


@pytest.mark.slow
def test_killed_mid_generation_over_http_and_resumed_is_the_uninterrupted_era(server, tmp_path, zygote):
    reference, crashed = tmp_path / "reference.duckdb", tmp_path / "crashed.duckdb"
    assert era_process(zygote, reference, "phylo-k", HTTP_ERA, server.api_base) == 0
    killed_in_generation_1(zygote, crashed, "phylo-k", HTTP_ERA, server.api_base)
    assert checkpoints(crashed, "phylo-k") == 1  # generation 0 stored, generation 1 was under way
    assert era_process(zygote, crashed, "phylo-k", HTTP_ERA, server.api_base) == 0
    assert tables(crashed, "phylo-k") == tables(reference, "phylo-k")  # the stub answers exactly


@pytest.mark.slow
def test_killed_mid_generation_on_the_local_model_and_resumed_is_the_uninterrupted_era(tmp_path, zygote):
    config = {"population_size": 3, "generations": 2, "compression_max_tokens": 8, "seed": 3}
    reference, crashed = tmp_path / "reference.duckdb", tmp_path / "crashed.duckdb"
    assert era_process(zygote, reference, "local-k", config) == 0
    killed_in_generation_1(zygote, crashed, "local-k", config)
    assert checkpoints(crashed, "local-k") == 1
    assert era_process(zygote, crashed, "local-k", config) == 0
    assert_same_rows(tables(crashed, "local-k"), tables(reference, "local-k"))  # the judges' floats: another process


@pytest.mark.slow
def test_a_changed_configuration_is_refused_unless_restarted(server, tmp_path):
    warehouse = warehouse_at(tmp_path / "w.duckdb")
    instance = DagsterInstance.ephemeral()
    small = {**HTTP_ERA, "population_size": 5, "generations": 1}
    assert run_era(warehouse, server, "phylo-c", small, instance).success
    changed = run_era(warehouse, server, "phylo-c", {**small, "seed": 6}, instance)
    error = next(e for e in changed.all_events if e.is_step_failure).step_failure_data.error.cause
    assert error.cls_name == EraConfigurationChanged.__name__ and "changed: seed" in error.message
    assert "restart: true" in error.message
    assert run_era(warehouse, server, "phylo-c", {**small, "seed": 6, "restart": True}, instance).success
    extended = run_era(warehouse, server, "phylo-c", {**small, "seed": 6, "generations": 2}, instance)  # longer: fine
    metadata = extended.get_asset_materialization_events()[0].materialization.metadata
    assert metadata["resumed_after_generation"].value == 1 and metadata["generations_run"].value == 1


@pytest.mark.slow
def test_tokens_and_cost_per_call_generation_and_era_and_a_budget(server, tmp_path):
    priced = {
        **HTTP_ERA,
        "compression_model": "openai/gpt-4o",
        "generations": 3,
        "judge_panel": {"openai": "openai/gpt-4o-mini", "claude": "openai/judge-claude"},
    }
    full = warehouse_at(tmp_path / "full.duckdb")
    assert run_era(full, server, "phylo-c", priced, assets=(evolution_era, era_summary)).success
    with full.get_connection() as conn:
        calls = conn.execute(
            "SELECT purpose, model, prompt_tokens, completion_tokens, cost_usd, cached FROM gateway_calls"
        ).fetchall()
        per_generation = conn.execute(
            "SELECT generation, calls, prompt_tokens, cost_usd FROM generation_stats ORDER BY generation"
        ).fetchall()
        summary = conn.execute("SELECT calls, prompt_tokens, cost_usd, status FROM era_summaries").fetchone()
        sums = conn.execute(
            "SELECT generation, count(*), sum(prompt_tokens), sum(cost_usd) FROM gateway_calls GROUP BY 1 ORDER BY 1"
        ).fetchall()
    priced_calls = [c for c in calls if c[1] in ("openai/gpt-4o", "openai/gpt-4o-mini")]
    assert {c[0] for c in priced_calls} == {"compression", "judge"}
    assert all(c[2] > 0 and c[3] > 0 and (c[4] == 0 if c[5] else c[4] > 0) for c in priced_calls)  # cached: free
    assert all(c[4] is None for c in calls if c[1] == "openai/judge-claude" and not c[5])  # no known price: no cost
    assert [tuple(r) for r in per_generation] == [(g, n, t, pytest.approx(cost)) for g, n, t, cost in sums]
    assert summary[:2] == (sum(r[1] for r in per_generation), sum(r[2] for r in per_generation))
    assert summary[2] == pytest.approx(sum(r[3] for r in per_generation)) and summary[3] == "complete"
    # Crossed by generation 1, not by generation 0, whatever the order the costs are summed in.
    budget = per_generation[0][3] + per_generation[1][3] / 2
    limited = warehouse_at(tmp_path / "limited.duckdb")
    instance = DagsterInstance.ephemeral()
    first = run_era(limited, server, "phylo-c", {**priced, "max_cost_usd": budget}, instance)
    assert first.get_asset_materialization_events()[0].materialization.metadata["status"].value == "stopped_for_budget"
    with limited.get_connection() as conn:
        assert conn.execute("SELECT status, generations_done FROM eras").fetchone() == ("stopped_for_budget", 1)
    resumed = run_era(limited, server, "phylo-c", {**priced, "max_cost_usd": budget * 10}, instance)
    assert resumed.get_asset_materialization_events()[0].materialization.metadata["status"].value == "complete"
    assert tables(limited.database, "phylo-c")["generations"] == tables(full.database, "phylo-c")["generations"]


@pytest.mark.slow
def test_the_response_cache_answers_repeated_requests(server, tmp_path):
    warehouse = warehouse_at(tmp_path / "w.duckdb")
    instance = DagsterInstance.ephemeral()
    config = {**HTTP_ERA, "population_size": 5, "generations": 1}
    assert run_era(warehouse, server, "phylo-r", config, instance).success
    before = sum(server.calls.values())
    again = run_era(warehouse, server, "phylo-r", {**config, "restart": True}, instance)
    metadata = again.get_asset_materialization_events()[0].materialization.metadata
    assert sum(server.calls.values()) == before  # no provider call at all
    assert metadata["cache_hit_rate"].value == 1.0 and metadata["cache_hits"].value == metadata["calls"].value > 0
    off = run_era(warehouse, server, "phylo-r", {**config, "restart": True, "use_response_cache": False}, instance)
    assert off.success and sum(server.calls.values()) > before
    with warehouse.get_connection() as conn:  # a new era reuses what earlier eras asked
        assert conn.execute("SELECT count(*) FROM response_cache").fetchone()[0] > 0
    other = run_era(warehouse, server, "phylo-r2", {**config, "seed": 9})
    assert other.get_asset_materialization_events()[0].materialization.metadata["cache_hits"].value > 0


@pytest.mark.slow
def test_judge_analysis_and_pareto_front_answer_the_research_questions(server, tmp_path):
    warehouse = warehouse_at(tmp_path / "w.duckdb")
    panel = {"openai": "openai/judge-harsh", "claude": "openai/judge-fast", "gemini": "openai/judge-lenient"}
    result = run_era(
        warehouse,
        server,
        "phylo-j",
        {**HTTP_ERA, "judge_panel": panel},
        assets=(evolution_era, judge_analysis, pareto_front),
    )
    assert result.success
    with warehouse.get_connection() as conn:
        leniency = dict(conn.execute("SELECT leniency, judge_name FROM judge_summary WHERE leniency <> ''").fetchall())
        agreement = conn.execute(
            "SELECT judge_a, judge_b, n, pearson, spearman FROM judge_agreement ORDER BY 1, 2"
        ).fetchall()
        drift = conn.execute("SELECT judge_name, count(*) FROM judge_generation_stats GROUP BY 1").fetchall()
        front = conn.execute("SELECT prompt_id, quality_score_avg, compression_ratio FROM pareto_front").fetchall()
        points = conn.execute(
            "SELECT quality_score_avg, compression_ratio FROM generations WHERE NOT carried_over"
        ).fetchall()
    assert leniency == {"harshest": "openai", "most lenient": "gemini"}
    assert [(a, b) for a, b, *_ in agreement] == [("claude", "gemini"), ("claude", "openai"), ("gemini", "openai")]
    assert all(n > 10 and 0 < pearson <= 1 and 0 < spearman <= 1 for _, _, n, pearson, spearman in agreement)
    assert dict(drift) == {"claude": 4, "gemini": 4, "openai": 4}  # a mean and std per judge and generation
    assert front and all(not any(q >= fq and r >= fr and (q > fq or r > fr) for q, r in points) for _, fq, fr in front)
    metadata = {e.asset_key.path[-1]: e.materialization.metadata for e in result.get_asset_materialization_events()}
    assert metadata["judge_analysis"]["mean_score_per_generation"].value.startswith("![each judge")
    assert metadata["pareto_front"]["front_plot"].value.startswith("![Pareto front](data:image/png;base64,")


def test_the_era_sensor_adds_and_runs_eras_dropped_into_its_folder(tmp_path):
    (tmp_path / "phylo-9.json").write_text(json.dumps({"population_size": 5, "generations": 1}))
    sensor = era_sensor(tmp_path, name="test_era_sensor")
    instance = DagsterInstance.ephemeral()
    resources = {"roster": RosterResource()}
    with build_sensor_context(instance=instance, resources=resources) as context:
        result = sensor(context)
    assert isinstance(result, SensorResult)
    (request,) = result.run_requests
    assert request.partition_key == "phylo-9"
    assert request.run_config["ops"]["evolution_era"]["config"]["population_size"] == 5
    assert instance.get_dynamic_partitions("eras") == ["phylo-9"]  # added by the planner
    with build_sensor_context(instance=instance, cursor=result.cursor, resources=resources) as context:
        again = sensor(context)
    assert not isinstance(again, SensorResult)  # nothing new


def test_one_era_model_serves_the_era_file_the_launchpad_and_the_algorithm():
    """An era file's fields are EraSettings' (the algorithm's input), and the era asset's launchpad
    config has every one of them, with the same defaults, and `restart`."""
    from eval_platform.evaluation_assets.evolution.assets import EraConfig
    from eval_platform.evolution.genetic import EraSettings

    stored = json.loads((PROJECT_ROOT / "data" / "evolution" / "eras" / "phylo-2.json").read_text())
    assert EraSettings(**stored).judge_panel == {"smollm2": DEFAULT_LOCAL_MODEL}
    assert set(EraConfig.model_fields) == set(EraSettings.model_fields) | {"restart"}
    launchpad = EraConfig(**stored)
    assert EraSettings(**launchpad.model_dump(exclude={"restart"})) == EraSettings(**stored)
    assert {name: EraConfig.model_fields[name].default for name in EraSettings.model_fields} == {
        name: list(info.default) if isinstance(info.default, tuple) else info.default
        for name, info in EraSettings.model_fields.items()
    }


@pytest.mark.slow
def test_sampled_judges_report_self_consistency_fitness_gradient_and_rankings_from_their_verdicts(server, tmp_path):
    """A panel judging at temperature 0.8, 3 verdicts a compression: each judge's score is the mean of
    its samples; the judge whose answer varies with its sample has a spread, the one that does not
    has none; the era's fitness gradient is the slope of its mean fitness per generation at that
    temperature; and each judge alone and both together rank the prompts from the stored verdicts
    by the fitness document's formula (both together: the panel's own fitness, so its own ranking)."""
    from statistics import mean, pstdev

    warehouse = warehouse_at(tmp_path / "w.duckdb")
    panel = {"harsh": "openai/judge-harsh", "noisy": "openai/judge-noisy"}
    sampled = {"judge_temperature": 0.8, "judge_samples": 3, "judge_seed": 11}
    config = {**HTTP_ERA, "generations": 2, "judge_panel": panel, **sampled}
    result = run_era(warehouse, server, "phylo-s", config, assets=(evolution_era, era_summary, judge_analysis))
    assert result.success
    with warehouse.get_connection() as conn:
        verdicts = conn.execute(
            "SELECT judge_name, prompt_id, score, sampled_scores FROM judge_scores WHERE era = 'phylo-s'"
        ).fetchall()
        spreads = dict(conn.execute("SELECT judge_name, sample_spread FROM judge_summary").fetchall())
        temperature, gradient = conn.execute(
            "SELECT judge_temperature, fitness_gradient FROM era_summaries WHERE era = 'phylo-s'"
        ).fetchone()
        stats = conn.execute("SELECT generation, mean_fitness FROM generation_stats ORDER BY generation").fetchall()
        prompts = conn.execute(
            "SELECT prompt_id, compression_ratio, survival_factor, fitness FROM generations WHERE NOT carried_over"
        ).fetchall()
        rankings = {
            judges: (best, same, tau)
            for judges, best, same, tau in conn.execute(
                "SELECT judges, best_prompt, same_best, kendall_tau FROM judge_subset_rankings"
            ).fetchall()
        }
    assert all(len(samples) == 3 and score == pytest.approx(mean(samples)) for _, _, score, samples in verdicts)
    by_judge = {name: [samples for judge, _, _, samples in verdicts if judge == name] for name in panel}
    assert all(len(set(samples)) == 1 for samples in by_judge["harsh"])  # the stub ignores its sample
    assert spreads["harsh"] == 0 and spreads["noisy"] == pytest.approx(mean(pstdev(s) for s in by_judge["noisy"]))
    assert spreads["noisy"] > 0
    assert temperature == 0.8
    generations, means = zip(*stats, strict=True)
    slope = sum((g - mean(generations)) * (m - mean(means)) for g, m in stats) / sum(
        (g - mean(generations)) ** 2 for g in generations
    )
    assert gradient == pytest.approx(slope, abs=1e-12)

    # by hand, the fitness document's formula: 75% quality (the judges' mean, of 10), 25% compression
    # (its ratio, of 20, capped), times the survival factor
    harsh = {prompt: score for judge, prompt, score, _ in verdicts if judge == "harsh"}
    alone = {p: (0.75 * harsh[p] / 10 + 0.25 * min(r / 20, 1)) * s for p, r, s, _ in prompts}
    panel_fitness = {p: f for p, _, _, f in prompts}
    best = max(sorted(alone), key=lambda p: alone[p])
    assert rankings["harsh"][:2] == (best, best == max(sorted(panel_fitness), key=lambda p: panel_fitness[p]))
    assert rankings["harsh+noisy"][1] is True and rankings["harsh+noisy"][2] == pytest.approx(1.0)
    assert set(rankings) == {"harsh", "noisy", "harsh+noisy"}
