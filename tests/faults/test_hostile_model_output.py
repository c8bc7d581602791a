"""Hostile model output: judges that answer NaN, out-of-range or negative scores, a score that is
not the sum of its parts, truncated JSON, 5 MB of text, an empty body, endless HTTP 500s, HTTP 429
with Retry-After, or a response that never ends. Each verdict is recorded as an error with its
reason, the era finishes, and the fitness follows the fitness document's rules (failed judges are
left out of the average; with every judge failed, fitness is 0)."""

import duckdb
import pytest
from dagster import DagsterInstance

from eval_platform.definitions import defs
from eval_platform.evolution.fitness import fitness_score
from tests.openai_stub_server import StubServer

# judge -> what its error must say
HOSTILE = {
    "judge-nan": "faithfulness must be a whole number, got nan",
    "judge-out-of-range": "faithfulness 7 is outside 0-5",
    "judge-negative": "clarity -1 is outside 0-3",
    "judge-mismatch": "is not the sum of its parts",
    "judge-truncated": "no JSON object in reply",
    "judge-huge": "ResponseTooLong: a response of 5,000,000 characters",
    "judge-empty": "Empty or invalid response",
    "judge-500": "InternalServerError",
    "judge-endless": "Timeout: litellm.Timeout: no complete response within",
}
GOOD = {"fast": "openai/judge-fast", "patient": "openai/judge-429"}
PANEL = {**GOOD, **{name.removeprefix("judge-"): f"openai/{name}" for name in HOSTILE}}


@pytest.fixture(scope="module")
def server():
    with StubServer() as stub, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-hostile-not-a-real-key")
        yield stub


def run_era(path, server, era, panel):
    """An era against the stub's judges, by the code location's jobs configured as the launchpad does."""
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("eras", [era])
    resources = {"warehouse": {"config": {"database": str(path)}}, "gateway": server.gateway_config()}
    assert (
        defs()
        .resolve_job_def("evolution_inputs")
        .execute_in_process(instance=instance, run_config={"resources": resources})
        .success
    )
    config = {
        "population_size": 4,
        "generations": 1,
        "compression_model": "openai/compressor",
        "seed": 3,
        "judge_panel": panel,
    }
    return (
        defs()
        .resolve_job_def("prompt_evolution_era")
        .execute_in_process(
            partition_key=era,
            instance=instance,
            run_config={"resources": resources, "ops": {"evolution_era": {"config": config}}},
        )
    )


def query(path, sql, params=()):
    with duckdb.connect(str(path), read_only=True) as conn:
        cursor = conn.execute(sql, list(params))
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=False)) for row in cursor.fetchall()]


def test_hostile_judges_are_recorded_as_errors_and_the_era_finishes(tmp_path, server):
    path = tmp_path / "warehouse.duckdb"
    assert run_era(path, server, "hostile", PANEL).success
    assert query(path, "SELECT status FROM eras") == [{"status": "complete"}]
    verdicts = query(path, "SELECT * FROM judge_scores WHERE era = 'hostile'")
    for name, reason in HOSTILE.items():
        mine = [v for v in verdicts if v["judge_model"] == f"openai/{name}"]
        assert mine and all(v["score"] is None and reason in v["error"] for v in mine), (name, mine[:1])
    good = [v for v in verdicts if v["judge_model"] in GOOD.values()]
    assert good and all(v["error"] is None and v["score"] is not None for v in good)
    mismatched = [v for v in verdicts if v["judge_model"] == "openai/judge-mismatch"]
    assert all(
        v["score_mismatch"] and v["reported_score"] == v["faithfulness"] + v["clarity"] + v["readability"] + 3
        for v in mismatched
    )  # the parts of a mismatching reply are kept for analysis
    # fitness: the average of the judges that answered, and the fitness document's formula
    for row in query(
        path,
        "SELECT prompt_id, quality_score_avg, compression_ratio, survival_factor, raw_fitness, "
        "fitness FROM generations WHERE era = 'hostile' AND NOT carried_over",
    ):
        scores = [v["score"] for v in good if v["prompt_id"] == row["prompt_id"]]
        assert len(scores) == 2 and row["quality_score_avg"] == pytest.approx(sum(scores) / 2)
        raw, fitness = fitness_score(row["quality_score_avg"], row["compression_ratio"], row["survival_factor"])
        assert (row["raw_fitness"], row["fitness"]) == pytest.approx((raw, fitness))
    # the 429s' Retry-After was honoured: each text's second request came a second or more after its first
    waits = [times[1] - times[0] for (model, _), times in server.attempt_times.items() if model == "judge-429"]
    assert waits and min(waits) >= 1.0
    calls = query(path, "SELECT attempts, error FROM gateway_calls WHERE model = 'openai/judge-429' AND NOT cached")
    assert calls and all(c["attempts"] == 2 and c["error"] is None for c in calls)


def test_when_every_judge_fails_the_fitness_is_zero_and_the_era_finishes(tmp_path, server):
    path = tmp_path / "warehouse.duckdb"
    panel = {name: model for name, model in PANEL.items() if model not in GOOD.values()}
    assert run_era(path, server, "all-fail", panel).success
    rows = query(path, "SELECT quality_score_avg, fitness FROM generations WHERE era = 'all-fail'")
    assert rows and all(r["fitness"] == 0 for r in rows)
    stats = query(path, "SELECT generation, judge_failures FROM generation_stats WHERE era = 'all-fail' ORDER BY 1")
    assert [s["generation"] for s in stats] == [0, 1] and all(s["judge_failures"] > 0 for s in stats)
