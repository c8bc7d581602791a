"""Genetic-algorithm invariants, and eras run through litellm's real HTTP path against a local
OpenAI-compatible server serving three judges named openai, claude and gemini."""

import asyncio
import random

import pytest
from dagster import DagsterInstance

from eval_platform.common.models import open_model
from eval_platform.definitions import defs
from eval_platform.evolution.genetic import TAGS, EraSettings, Individual, next_generation, operator_counts, run_era
from eval_platform.resources import ModelGatewayResource, WarehouseResource
from tests.openai_stub_server import StubServer

SECRET = "sk-test-secret-never-stored-0123456789"
PANEL = {"openai": "openai/judge-openai", "claude": "openai/judge-claude", "gemini": "openai/judge-gemini"}
POOL = {tag: [f"{tag} gene {i}" for i in range(5)] for tag in TAGS}
DIAGNOSTIC_QUERIES = [
    """SELECT
  generation,
  AVG(quality_scores.openai) as openai_avg,
  AVG(quality_scores.claude) as claude_avg,
  AVG(quality_scores.gemini) as gemini_avg
FROM generations
WHERE era = 'phylo-2'
GROUP BY generation
ORDER BY generation;""",
    """SELECT
  prompt_id,
  generation,
  fitness,
  quality_score_avg,
  compression_ratio
FROM generations
WHERE era = 'phylo-2'
  AND quality_score_avg < 6.0
  AND compression_ratio > 3.0
ORDER BY fitness DESC;""",
    """SELECT
  generation,
  COUNT(*) as expansion_count
FROM generations
WHERE era = 'phylo-2'
  AND survival_factor = 0
GROUP BY generation
ORDER BY generation;""",
]


def evaluated_population(size, rng):
    population = []
    for i in range(size):
        genome = {tag: rng.choice(POOL[tag]) for tag in TAGS}
        population.append(Individual(f"p{i}", genome, "initial", evaluation={"fitness": rng.random()}))
    return population


@pytest.mark.parametrize("size, generation", [(10, 1), (10, 2), (50, 3), (6, 1), (7, 4)])
def test_next_generation_keeps_elite_and_size(size, generation):
    population = evaluated_population(size, random.Random(size))
    children = asyncio.run(next_generation(random.Random(1), population, generation, POOL))
    counts = operator_counts(size, generation)
    assert len(children) == size
    elite = sorted(population, key=lambda ind: -ind.fitness)[: counts["elite"]]
    assert children[: counts["elite"]] == elite  # same objects: unchanged, evaluation kept
    new = children[counts["elite"] :]
    assert all(child.evaluation is None for child in new)
    assert sorted(c.operator for c in new) == sorted(
        ["crossover"] * counts["crossover"]
        + ["mutation"] * counts["mutation"]
        + ["immigration"] * counts["immigration"]
    )
    assert counts["immigration"] == (0 if generation % 2 == 0 else max(1, round(0.08 * size)))
    ids = {ind.prompt_id for ind in population}
    for child in new:
        assert all(parent in ids for parent in child.parents)
        if child.operator == "mutation":
            (parent,) = [ind for ind in population if ind.prompt_id == child.parents[0]]
            assert sum(child.genome[t] != parent.genome[t] for t in TAGS) == 1


def test_roulette_prefers_fit_parents():
    population = evaluated_population(10, random.Random(0))
    for ind in population:
        ind.evaluation = {"fitness": 0.0}
    population[3].evaluation = {"fitness": 1.0}
    children = asyncio.run(next_generation(random.Random(5), population, 2, POOL))
    crossover_parents = [p for c in children if c.operator == "crossover" for p in c.parents]
    assert set(crossover_parents) == {"p3"}


@pytest.fixture(scope="module")
def stub_server():
    with StubServer() as server:
        yield server


@pytest.fixture(scope="module", autouse=True)
def api_key():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", SECRET)
        yield


def gateway_resource(server):
    return ModelGatewayResource(**server.gateway_config()["config"])


def history_of(era, config, gateway, paragraphs, pool=POOL):
    """Every generation's population of an era run start to end."""
    history = []
    status = asyncio.run(
        run_era(
            era,
            config,
            lambda name: open_model(name, gateway=gateway),
            paragraphs,
            pool,
            lambda text: len(text.split()),
            lambda record: history.append(record.population),
        )
    )
    assert status == "complete"
    return history


def era_run(warehouse, server, era, config, instance=None):
    """Materialise an era partition (with its inputs) against the stub, by the code location's jobs
    configured as the launchpad configures them."""
    instance = instance or DagsterInstance.ephemeral()
    if era not in instance.get_dynamic_partitions("eras"):
        instance.add_dynamic_partitions("eras", [era])
    resources = {"warehouse": {"config": {"database": warehouse.database}}, "gateway": server.gateway_config()}
    assert (
        defs()
        .resolve_job_def("evolution_inputs")
        .execute_in_process(instance=instance, run_config={"resources": resources})
        .success
    )
    return (
        defs()
        .resolve_job_def("prompt_evolution_era")
        .execute_in_process(
            partition_key=era,
            instance=instance,
            raise_on_error=False,
            run_config={"resources": resources, "ops": {"evolution_era": {"config": config}}},
        )
    )


@pytest.mark.slow
def test_same_seed_same_era(stub_server):
    paragraphs = [{"paragraph_id": "p", "text": " ".join(f"word{i}" for i in range(60))}]
    config = EraSettings(
        population_size=8,
        generations=2,
        compression_model="openai/compressor",
        judge_panel={"openai": "openai/judge-openai"},
        seed=3,
    )
    gateway = gateway_resource(stub_server).gateway()

    def run():
        return [
            [(i.prompt_id, i.operator, tuple(i.parents), round(i.fitness, 9)) for i in pop]
            for pop in history_of("determinism", config, gateway, paragraphs)
        ]

    first = run()
    assert run() == first
    assert len(first) == 3 and all(len(pop) == 8 for pop in first)
    other_seed = history_of("determinism", config.model_copy(update={"seed": 4}), gateway, paragraphs)
    assert [i.prompt_id for i in other_seed[0]] != [p[0] for p in first[0]]


@pytest.fixture(scope="module")
def http_era(stub_server, tmp_path_factory):
    warehouse = WarehouseResource(database=str(tmp_path_factory.mktemp("era") / "warehouse.duckdb"))
    config = {
        "population_size": 10,
        "generations": 3,
        "compression_model": "openai/compressor",
        "judge_panel": PANEL,
        "seed": 11,
    }
    instance = DagsterInstance.ephemeral()

    def run(**changes):
        return era_run(warehouse, stub_server, "phylo-2", {**config, **changes}, instance)

    first = run()
    return warehouse, first, run


@pytest.mark.slow
def test_era_over_http_stores_every_generation(http_era):
    warehouse, result, _ = http_era
    assert result.success
    with warehouse.get_connection() as conn:
        per_generation = conn.execute("SELECT generation, count(*) FROM generations GROUP BY 1 ORDER BY 1").fetchall()
        assert per_generation == [(0, 10), (1, 10), (2, 10), (3, 10)]
        assert conn.execute("SELECT min(fitness) >= 0 AND max(fitness) <= 1 FROM generations").fetchone()[0]
        # Elite: the top 2 of each generation reappear unchanged in the next one.
        for generation in range(3):
            top = conn.execute(
                """SELECT prompt_id, fitness FROM generations WHERE generation = ?
                                  ORDER BY fitness DESC, prompt_id LIMIT 2""",
                [generation],
            ).fetchall()
            carried = conn.execute(
                """SELECT prompt_id, fitness FROM generations WHERE generation = ?
                                      AND carried_over ORDER BY fitness DESC, prompt_id""",
                [generation + 1],
            ).fetchall()
            assert carried == top
        stats = conn.execute(
            "SELECT generation, population, mean_fitness, max_fitness FROM generation_stats "
            "WHERE era = 'phylo-2' ORDER BY 1"
        ).fetchall()
        assert [s[:2] for s in stats] == [(g, 10) for g in range(4)]
        era = conn.execute(
            "SELECT total_generations, final_max_fitness FROM era_summaries WHERE era = 'phylo-2'"
        ).fetchone()
        assert era == (3, stats[-1][3])


@pytest.mark.slow
def test_judge_failures_timeouts_retries_and_invalid_json(http_era, stub_server):
    warehouse, _, _ = http_era
    with warehouse.get_connection() as conn:
        judges = {
            name: conn.execute(
                "SELECT count(*), count(error) FROM judge_scores WHERE era = 'phylo-2' AND judge_name = ?", [name]
            ).fetchone()
            for name in PANEL
        }
        assert judges["gemini"][0] == judges["gemini"][1] > 0  # every gemini call timed out
        gemini_error = conn.execute("SELECT any_value(error) FROM judge_scores WHERE judge_name = 'gemini'").fetchone()[
            0
        ]
        assert "Timeout" in gemini_error
        assert judges["claude"][1] == 0  # 500 then success, on every request
        assert 0 < judges["openai"][1] < judges["openai"][0]  # some invalid JSON
        openai_error = conn.execute(
            "SELECT any_value(error) FROM judge_scores WHERE judge_name = 'openai' AND error IS NOT NULL"
        ).fetchone()[0]
        assert "invalid JSON" in openai_error
        # The average covers exactly the judges that answered.
        mismatches = conn.execute("""
            SELECT count(*) FROM generations g JOIN (
                SELECT prompt_id, coalesce(avg(score), 0) AS expected FROM judge_scores
                WHERE era = 'phylo-2' GROUP BY 1) j USING (prompt_id)
            WHERE era = 'phylo-2' AND abs(g.quality_score_avg - j.expected) > 1e-9""").fetchone()[0]
        assert mismatches == 0
        assert (
            conn.execute("SELECT count(*) FROM generations WHERE quality_scores.gemini IS NOT NULL").fetchone()[0] == 0
        )
        asked = conn.execute(
            "SELECT count(*), sum(attempts) FROM gateway_calls WHERE era = 'phylo-2' "
            "AND judge_name = 'claude' AND NOT cached"
        ).fetchone()
    # Each distinct text was refused once with a 500 and answered on the retry; repeated texts came
    # from the response cache.
    assert stub_server.errors["judge-claude"] == asked[0] > 0
    assert stub_server.calls["judge-claude"] == asked[1] == 2 * asked[0]


def test_fitness_document_diagnostic_queries_run_verbatim(http_era):
    warehouse, _, _ = http_era
    with warehouse.get_connection() as con:
        first = con.execute(DIAGNOSTIC_QUERIES[0]).fetchall()
        assert [row[0] for row in first] == [0, 1, 2, 3]
        assert all(row[1] is not None and row[2] is not None and row[3] is None for row in first)
        low_quality_high_compression = con.execute(DIAGNOSTIC_QUERIES[1]).fetchall()
        assert all(row[3] < 6 and row[4] > 3 for row in low_quality_high_compression)
        assert len(low_quality_high_compression) > 0
        expansions = con.execute(DIAGNOSTIC_QUERIES[2]).fetchall()
        # the survival gate, recomputed from the word counts: a compression that is empty or no shorter
        expected = con.execute("""
            SELECT generation, count(*) FROM generations
            WHERE era = 'phylo-2' AND NOT coalesce(compressed_words > 0 AND compressed_words < original_words, false)
            GROUP BY generation ORDER BY generation""").fetchall()
        assert expansions == expected


@pytest.mark.slow
def test_rerunning_an_era_replaces_its_rows_and_secrets_stay_out(http_era):
    warehouse, first, run = http_era
    with warehouse.get_connection() as conn:
        before = [
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("generations", "judge_scores", "eras", "generation_stats", "era_summaries")
        ]
    second = run(restart=True)
    with warehouse.get_connection() as conn:
        after = [
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("generations", "judge_scores", "eras", "generation_stats", "era_summaries")
        ]
        dump = " ".join(
            str(row)
            for t in ("generations", "judge_scores", "eras")
            for row in conn.execute(f"SELECT * FROM {t}").fetchall()
        )
    assert after == before
    assert SECRET not in dump
    events = " ".join(str(event) for result in (first, second) for event in result.all_events)
    assert SECRET not in events
    metadata = next(
        e for e in second.get_asset_materialization_events() if e.asset_key.path[-1] == "era_summary"
    ).materialization.metadata
    assert metadata["fitness_plot"].value.startswith("![fitness per generation](data:image/png;base64,")


@pytest.mark.slow
def test_mutation_by_a_mutation_model(stub_server):
    paragraphs = [{"paragraph_id": "p", "text": " ".join(f"word{i}" for i in range(60))}]
    config = EraSettings(
        population_size=10,
        generations=1,
        compression_model="openai/compressor",
        judge_panel={"openai": "openai/judge-fast"},
        mutation_model="openai/mutator",
        seed=2,
    )
    history = history_of("mutation", config, gateway_resource(stub_server).gateway(), paragraphs)
    mutants = [ind for ind in history[1] if ind.operator == "mutation"]
    assert len(mutants) == 2
    for mutant in mutants:
        (parent,) = [ind for ind in history[0] if ind.prompt_id == mutant.parents[0]]
        changed = [t for t in TAGS if mutant.genome[t] != parent.genome[t]]
        assert len(changed) == 1 and mutant.genome[changed[0]] == "Rewritten: " + parent.genome[changed[0]]


def test_where_an_era_starts_follows_what_the_warehouse_holds_of_it():
    """`era_start`, the era's resume logic, on what the warehouse could hold: nothing (generation 0),
    its checkpoint (after it, with the cost so far), another configuration (refused, naming the
    setting, unless restarted), and a choice of paragraphs (in the order named; an unknown one refused)."""
    import json
    import random

    from eval_platform.evolution.eras import EraConfigurationChanged, config_hash, era_start

    settings = EraSettings(generations=2, seed=3)
    paragraphs = [{"paragraph_id": f"p{i}", "text": f"text {i}"} for i in range(3)]
    genes = [{"tag": tag, "gene_index": 0, "text": f"{tag} gene"} for tag in TAGS]
    fresh = era_start("e", settings, False, None, None, 0.0, paragraphs, genes)
    assert fresh.resume is None and fresh.paragraphs == paragraphs and not fresh.done(settings)
    assert fresh.gene_pool == {tag: [f"{tag} gene"] for tag in TAGS}
    state = {"config": settings.model_dump_json(), "config_hash": config_hash("e", settings)}
    rng = random.Random(1)
    row = {"prompt_id": "g001-000-x", "operator": "elite", "parents": [], "evaluated_generation": 0,
           "quality_scores": {"smollm2": 7.0}, **{tag: f"{tag} gene" for tag in TAGS},
           **{field: 0.5 for field in ("fitness", "quality_score_avg", "compression_ratio")}}  # fmt: skip
    from eval_platform.evolution.eras import EVALUATION_FIELDS

    row.update({field: row.get(field, 0.5) for field in EVALUATION_FIELDS})
    checkpoint = ({"generation": 1, "rng_state": json.dumps(rng.getstate())}, [row])
    resumed = era_start("e", settings, False, state, checkpoint, 0.25, paragraphs, genes)
    assert resumed.resume is not None and (resumed.resume.generation, resumed.resume.spent_usd) == (1, 0.25)
    assert resumed.resume.rng_state == rng.getstate() and [i.prompt_id for i in resumed.resume.population] == [
        "g001-000-x"
    ]
    assert not resumed.done(settings) and resumed.done(settings.model_copy(update={"generations": 1}))
    longer = era_start(
        "e", settings.model_copy(update={"generations": 5}), False, state, checkpoint, 0.0, paragraphs, genes
    )
    assert longer.resume is not None  # a longer era is the same era
    with pytest.raises(EraConfigurationChanged, match="changed: seed"):
        era_start("e", settings.model_copy(update={"seed": 4}), False, state, checkpoint, 0.0, paragraphs, genes)
    restarted = era_start("e", settings.model_copy(update={"seed": 4}), True, state, checkpoint, 0.0, paragraphs, genes)
    assert restarted.resume is None
    chosen = era_start("e", settings.model_copy(update={"paragraph_ids": ("p2", "p0")}), False, None, None, 0.0,
                       paragraphs, genes)  # fmt: skip
    assert [p["paragraph_id"] for p in chosen.paragraphs] == ["p2", "p0"]
    with pytest.raises(ValueError, match=r"Unknown paragraph_ids \['p9'\]"):
        era_start(
            "e", settings.model_copy(update={"paragraph_ids": ("p9",)}), False, None, None, 0.0, paragraphs, genes
        )
