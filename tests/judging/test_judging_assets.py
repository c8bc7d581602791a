"""Judging in the platform: real Dagster materialisations into a real DuckDB warehouse, judges over
HTTP through litellm (the local stub server) and the real local model; the shipped sets with their
recorded judges, a panel judging both orders, the platform's own generations and blind sheets as
sets, the MT-Bench leaderboard in SQL, the era's check and weights."""

import json
import shutil
from pathlib import Path

import pytest
from dagster import DagsterInstance, materialize

from eval_platform.blind import sheets
from eval_platform.blind.sheets import KEY_FILE
from eval_platform.common.panels import AgreementMetric
from eval_platform.common.warehouse import utc_now
from eval_platform.definitions import defs
from eval_platform.evaluation_assets.blind.assets import (
    blind_eval_answers,
    blind_eval_questions,
    blind_eval_scores,
    blind_eval_sheet,
)
from eval_platform.evaluation_assets.evolution.assets import evolution_era, gene_pools, source_paragraphs
from eval_platform.evaluation_assets.judging.assets import (
    judge_agreement,
    judging_sets,
    mt_bench_grades,
    mt_bench_inputs,
    mt_bench_leaderboard,
    mt_bench_verdicts,
    pairwise_verdicts,
    recorded_verdicts,
)
from eval_platform.judging.datasets import GPT4_LLMBAR_JUDGE, HUMAN_EXPERTS_JUDGE
from eval_platform.judging.store import JudgingStore
from eval_platform.resources import LanguageModelResource, ModelGatewayResource
from tests.blind.test_blind_evaluation import fill
from tests.conftest import PROJECT_ROOT
from tests.evaluation import materialize_configured, materialize_evaluation, materialize_inputs, roster_with
from tests.judging.test_judging_data import MT_BENCH_MODELS
from tests.openai_stub_server import StubServer, single_rating

DATA = PROJECT_ROOT / "data" / "judging"
CHECKS = list(defs().asset_checks or [])
STUB_JUDGE = "openai/judge-pairwise"
ROUNDS = 50  # bootstrap rounds here: the values are exact, only the intervals are resampled
# The shipped sets and their items (data/judging/SOURCES.md).
SHIPPED = {
    "llmbar_natural": 100,
    "llmbar_neighbor": 134,
    "llmbar_gptinst": 92,
    "llmbar_gptout": 47,
    "llmbar_manual": 46,
    "pandalm_test": 999,
    "mt_bench_human": 200,
}
# LLMBar's published GPT-4 (Vanilla*) accuracy and positional agreement, in percent (its statistics.json).
LLMBAR_GPT4 = {
    "llmbar_natural": (95.5, 95.0),
    "llmbar_neighbor": (78.73134328358209, 93.28358208955224),
    "llmbar_gptinst": (86.41304347826086, 94.56521739130434),
    "llmbar_gptout": (77.6595744680851, 93.61702127659575),
    "llmbar_manual": (80.43478260869566, 82.6086956521739),
}


@pytest.fixture(scope="module")
def server():
    with StubServer() as stub, pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-judging-not-a-real-key")
        yield stub


def judging(warehouse, assets, ops=None, server=None, **kwargs):
    """Materialise judging assets and their checks with the code location's resources (the gateway
    at the stub)."""
    gateway = ModelGatewayResource(api_base=server.api_base, max_retries=0) if server else None
    keys = {a.key for a in assets}
    checks = [c for c in CHECKS if {k.asset_key for k in c.check_keys} <= keys]
    return materialize_configured(
        [*assets, *checks],
        {"warehouse": warehouse, "gateway": gateway},
        {name: {"config": config} for name, config in (ops or {}).items()},
        **kwargs,
    )


def stored_sets(warehouse, **config):
    assert judging(warehouse, [judging_sets], {"judging_sets": {"blind_sheets": False, **config}}).success


def query(warehouse, sql, params=()):
    with warehouse.get_connection() as conn:
        return conn.execute(sql, list(params)).fetchall()


def llmbar_natural(count):
    """LLMBar Natural's first items as the file has them: (output_1, output_2, gold 1 or 2)."""
    rows = json.loads((DATA / "llmbar" / "Natural" / "dataset.json").read_text())
    return [(row["output_1"], row["output_2"], row["label"]) for row in rows[:count]]


def shown_first(prompt: str) -> str:
    """The answer a judge prompt shows as assistant A's."""
    return prompt.split("[The Start of Assistant A's Answer]\n")[1].split("\n[The End of Assistant A's Answer]")[0]


def test_the_shipped_sets_and_recorded_judges_give_llmbars_published_figures(warehouse):
    result = judging(
        warehouse,
        [judging_sets, recorded_verdicts, judge_agreement],
        {"judging_sets": {"blind_sheets": False}, "judge_agreement": {"rounds": ROUNDS}},
    )
    assert result.success
    assert dict(query(warehouse, "SELECT set_name, items FROM judging_sets")) == SHIPPED
    assert query(warehouse, "SELECT count(*) FROM judging_items") == [(sum(SHIPPED.values()),)]
    # GPT-4 on LLMBar's five sets in both orders, GPT-3.5-turbo and PandaLM-7B on PandaLM's in one.
    recorded = dict(query(warehouse, "SELECT judge, count(*) FROM recorded_verdicts GROUP BY judge"))
    assert recorded == {
        GPT4_LLMBAR_JUDGE: 2 * (100 + 134 + 92 + 47 + 46),
        "recorded/pandalm/gpt-3.5-turbo": 999,
        "recorded/pandalm/pandalm-7b": 999,
    }
    # The agreement asset's figures and the position-bias view's own SQL both give LLMBar's.
    figures = query(
        warehouse,
        "SELECT h.set_name, h.accuracy, h.position_consistency, b.consistency FROM judge_vs_human h "
        "JOIN judge_position_bias b USING (judge, set_name) WHERE judge = ?",
        [GPT4_LLMBAR_JUDGE],
    )
    assert {name: (accuracy * 100, a * 100, b * 100) for name, accuracy, a, b in figures} == {
        name: (pytest.approx(accuracy), pytest.approx(agreement), pytest.approx(agreement))
        for name, (accuracy, agreement) in LLMBAR_GPT4.items()
    }
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert checks["llmbar_figures_reproduced"].passed
    # PandaLM's annotators agree among themselves (Fleiss' kappa) far above either recorded judge.
    pandalm = query(warehouse, "SELECT kappa, human_kappa FROM judge_vs_human WHERE set_name = 'pandalm_test'")
    assert len(pandalm) == 2 and all(kappa < 0.5 < 0.8 < ceiling for kappa, ceiling in pandalm)


@pytest.mark.slow
def test_an_api_judge_over_http_judges_both_orders_and_a_rerun_replaces_its_verdicts(warehouse, server):
    stored_sets(warehouse)
    panel = {"judges": [STUB_JUDGE], "sets": ["llmbar_natural"], "items": 5}
    calls = server.calls["judge-pairwise"]
    assert judging(warehouse, [pairwise_verdicts], {"pairwise_verdicts": panel}, server).success
    first = query(warehouse, "SELECT * EXCLUDE (judged_at) FROM judge_verdicts ORDER BY ALL")
    assert server.calls["judge-pairwise"] - calls == 10
    # a rerun reuses the stored verdicts (the same judge and prompt): it asks nothing, and rewrites none
    assert judging(warehouse, [pairwise_verdicts], {"pairwise_verdicts": panel}, server).success
    assert server.calls["judge-pairwise"] - calls == 10
    assert query(warehouse, "SELECT * EXCLUDE (judged_at) FROM judge_verdicts ORDER BY ALL") == first
    # with recompute it asks every call again, and its verdicts replace the first's (none doubled)
    result = judging(warehouse, [pairwise_verdicts], {"pairwise_verdicts": {**panel, "recompute": True}}, server)
    assert result.success
    assert server.calls["judge-pairwise"] - calls == 2 * 10
    assert query(warehouse, "SELECT * EXCLUDE (judged_at) FROM judge_verdicts ORDER BY ALL") == first
    rows = query(
        warehouse,
        "SELECT item_id, shown_order, verdict, raw, prompt, source FROM judge_verdicts "
        "ORDER BY item_id::INT, shown_order",
    )
    assert len(rows) == 10 and {r[5] for r in rows} == {"model"}
    # The stub prefers the longer answer: a verdict in the item's own order, whichever was shown first.
    for (first, second, _), pair in zip(llmbar_natural(5), zip(rows[::2], rows[1::2], strict=True), strict=True):
        longer = "a" if len(first) > len(second) else "b" if len(second) > len(first) else "tie"
        (_, as_is, verdict_1, raw, prompt_1, _), (_, swapped, verdict_2, _, prompt_2, _) = pair
        assert (as_is, swapped, verdict_1, verdict_2) == ("as_is", "swapped", longer, longer)
        assert "Final verdict: [[" in raw
        assert shown_first(prompt_1) == first and shown_first(prompt_2) == second
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert checks["set_pairs_in_both_orders"].passed
    # The judgments' preview shows the model's text as text: its Markdown escaped, never rendered.
    (materialization,) = result.get_asset_materialization_events()
    examples = str(materialization.materialization.metadata["examples"].value)
    assert "Final verdict: \\[\\[" in examples and "[[" not in examples.replace("\\[", "")
    # Against LLMBar's gold labels: right where the gold answer is the longer one; never swayed by order.
    assert judging(warehouse, [judge_agreement], {"judge_agreement": {"rounds": ROUNDS}}).success
    (measured,) = query(
        warehouse,
        "SELECT accuracy, position_consistency, first_wins, longer_wins FROM judge_vs_human WHERE judge = ?",
        [STUB_JUDGE],
    )
    gold_longer = [(len(a) > len(b)) == (gold == 1) for a, b, gold in llmbar_natural(5)]
    assert measured == pytest.approx((sum(gold_longer) / 5, 1.0, 0.5, 1.0))


@pytest.mark.slow
def test_the_local_model_judges_both_orders(warehouse):
    stored_sets(warehouse)
    panel = {"sets": ["llmbar_neighbor"], "items": 1}  # the default judge: the local model (a short item)
    assert judging(warehouse, [pairwise_verdicts], {"pairwise_verdicts": panel}).success
    rows = query(warehouse, "SELECT judge, shown_order, verdict, raw FROM judge_verdicts ORDER BY shown_order")
    assert [(judge, order) for judge, order, _, _ in rows] == [
        ("local/smollm2-135m-instruct", "as_is"),
        ("local/smollm2-135m-instruct", "swapped"),
    ]
    for _, _, verdict, raw in rows:  # the likeliest of A, B and C after MT-Bench's prompt
        probabilities = dict(part.split("=") for part in raw.replace("P(", "").replace(")", "").split())
        assert sum(map(float, probabilities.values())) == pytest.approx(1, abs=1e-3)
        assert verdict in ("a", "b", "tie")


@pytest.mark.slow
def test_a_sampled_judge_gives_the_majority_of_its_samples_and_its_self_consistency(warehouse, server):
    """The local judge at temperature 1, 5 verdicts a call: each drawn from its distribution over A,
    B and C (seeded: a rerun asks nothing and finds the same verdicts), its verdict their majority
    (the first seen of a tie), its self-consistency the share agreeing; a greedy run's verdicts are not
    reused for it. An API judge is sent its temperature and a seed per sample."""
    from collections import Counter

    stored_sets(warehouse)
    greedy = {"sets": ["llmbar_neighbor"], "items": 2}
    assert judging(warehouse, [pairwise_verdicts], {"pairwise_verdicts": greedy}).success
    sampled = {**greedy, "judge_temperature": 1.0, "judge_samples": 5, "judge_seed": 3}
    result = judging(warehouse, [pairwise_verdicts], {"pairwise_verdicts": sampled})
    assert result.success
    rows = query(warehouse, "SELECT verdict, sample_verdicts, request_key FROM judge_verdicts ORDER BY ALL")
    assert len(rows) == 4 and all(len(samples) == 5 for _, samples, _ in rows)
    for verdict, samples, _ in rows:
        counts = Counter(samples)
        assert verdict == max(samples, key=lambda v: (counts[v], -samples.index(v)))
    assert any(len(set(samples)) > 1 for _, samples, _ in rows)  # drawn, not the likeliest each time
    consistency = [sum(v == verdict for v in samples) / 5 for verdict, samples, _ in rows]
    summary = str(result.get_asset_materialization_events()[0].materialization.metadata["verdicts"].value)
    assert "self_consistency" in summary and f"{sum(consistency) / 4:.4g}"[:4] in summary
    assert judging(warehouse, [pairwise_verdicts], {"pairwise_verdicts": sampled}).success
    assert query(warehouse, "SELECT verdict, sample_verdicts, request_key FROM judge_verdicts ORDER BY ALL") == rows

    panel = {"judges": [STUB_JUDGE], "sets": ["llmbar_natural"], "items": 1, "judge_temperature": 0.7}
    before = len(server.sent.get("judge-pairwise", []))
    assert judging(warehouse, [pairwise_verdicts], {"pairwise_verdicts": {**panel, "judge_samples": 3}}, server).success
    sent = server.sent["judge-pairwise"][before:]
    assert len(sent) == 6 and {s["temperature"] for s in sent} == {0.7} and len({s["seed"] for s in sent}) == 3


@pytest.mark.slow
def test_the_mt_bench_leaderboard_of_the_eight_models_is_queryable(warehouse, server):
    stored_sets(warehouse)
    result = judging(
        warehouse,
        [mt_bench_inputs, mt_bench_verdicts, mt_bench_leaderboard],
        {
            "mt_bench_verdicts": {"judges": [STUB_JUDGE], "questions": [81, 107], "pairs": "pairwise-all"},
            "mt_bench_leaderboard": {"rounds": ROUNDS},
        },
        server,
    )
    assert result.success
    assert query(warehouse, "SELECT count(*) FROM mt_bench_verdicts") == [(2 * 28 * 2,)]
    # Each battle goes to the longer first-turn answer (the stub's taste), read here from the files.
    answers = {
        model: {
            row["question_id"]: row["choices"][0]["turns"][0]
            for row in map(json.loads, (DATA / "mt_bench" / "model_answer" / f"{model}.jsonl").read_text().splitlines())
        }
        for model in MT_BENCH_MODELS
    }
    battles = query(
        warehouse, "SELECT question_id, model_a, model_b, winner FROM mt_bench_battles WHERE judge = ?", [STUB_JUDGE]
    )
    assert len(battles) == 2 * 28
    for question, a, b, winner in battles:
        length_a, length_b = len(answers[a][question]), len(answers[b][question])
        assert winner == ("model_a" if length_a > length_b else "model_b" if length_b > length_a else "tie")
    board = query(
        warehouse,
        "SELECT rank, model, battles, wins, losses, ties, win_rate, lc_win_rate FROM mt_bench_leaderboard "
        "WHERE judge = ? AND set_name = 'mt_bench' ORDER BY rank",
        [STUB_JUDGE],
    )
    assert sorted(row[1] for row in board) == MT_BENCH_MODELS and all(row[2] == 14 for row in board)
    assert [row[0] for row in board] == sorted(row[0] for row in board)
    assert all(row[6] == pytest.approx((row[3] + row[5] / 2) / row[2]) for row in board)
    # The length-controlled win rate against gpt-3.5-turbo: every other model has one.
    assert {row[1] for row in board if row[7] is not None} == set(MT_BENCH_MODELS) - {"gpt-3.5-turbo"}
    # The recorded judge: the MT-Bench human experts' majority, for the models their pairs name.
    experts = query(warehouse, "SELECT model FROM mt_bench_leaderboard WHERE judge = ?", [HUMAN_EXPERTS_JUDGE])
    assert {m for (m,) in experts} == {"gpt-4", "claude-v1", "gpt-3.5-turbo", "alpaca-13b", "llama-13b"}
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert checks["mt_bench_pairs_in_both_orders"].passed
    # In the viewer, linked from the asset: the leaderboard's models, and the judge's verdicts with its words.
    from urllib.parse import urlsplit

    from markupsafe import escape
    from starlette.testclient import TestClient

    from eval_platform.viewer.app import build_app
    from eval_platform.viewer.warehouse import WarehouseSource

    event = next(e for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == "mt_bench_leaderboard")
    link = event.materialization.metadata["viewer"].value
    with TestClient(build_app(WarehouseSource(warehouse.database))) as viewer:
        page = viewer.get(urlsplit(link).path)
        assert page.status_code == 200 and all(model in page.text for model in MT_BENCH_MODELS)
        verdicts = viewer.get("/judging/verdicts", params={"judge": STUB_JUDGE, "set": "mt_bench"})
    raws = {raw for (raw,) in query(warehouse, "SELECT raw FROM mt_bench_verdicts WHERE judge = ?", [STUB_JUDGE])}
    shown = [raw for raw in raws if str(escape(raw)) in verdicts.text]  # as text, escaped
    assert verdicts.status_code == 200 and len(shown) >= min(len(raws), 10)


def test_mt_bench_single_answer_grades_over_http(warehouse, server):
    config = {"judges": ["openai/judge-single"], "models": ["gpt-4", "llama-13b"], "questions": [107]}
    assert judging(warehouse, [mt_bench_inputs, mt_bench_grades], {"mt_bench_grades": config}, server).success
    rows = query(warehouse, "SELECT model, turn, score, prompt FROM judge_grades ORDER BY model, turn")
    assert [(model, turn) for model, turn, _, _ in rows] == [
        ("gpt-4", 1),
        ("gpt-4", 2),
        ("llama-13b", 1),
        ("llama-13b", 2),
    ]
    assert [score for _, _, score, _ in rows] == [single_rating(prompt) for _, _, _, prompt in rows]
    scores = dict(query(warehouse, "SELECT model, graded FROM mt_bench_scores"))
    assert scores == {
        model: sum(s is not None for m, _, s, _ in rows if m == model) for model in ("gpt-4", "llama-13b")
    }


@pytest.mark.slow
def test_two_roster_models_generations_become_a_set_and_their_battles(warehouse, server, tmp_path):
    folder = tmp_path / "roster"
    roster_with(folder, "answering", model="openai/answerer", solvers=["generate"], benchmarks=["gsm8k"])
    roster = roster_with(folder, "echoing", model="openai/echo", solvers=["generate"], benchmarks=["gsm8k"])
    instance = DagsterInstance.ephemeral()
    assert materialize_inputs(warehouse, "gsm8k", 2, instance=instance).success
    gateway = ModelGatewayResource(api_base=server.api_base, max_retries=0)
    for name in ("answering", "echoing"):
        assert materialize_evaluation(
            warehouse,
            "gsm8k",
            name,
            roster,
            evaluation_model=LanguageModelResource(),
            gateway=gateway,
            instance=instance,
        ).success
    stored_sets(warehouse, generations=["gsm8k|answering|echoing"])
    items = query(
        warehouse,
        "SELECT item_id, instruction, answer_a, answer_b, model_a, model_b FROM judging_items WHERE set_name = ?",
        ["gsm8k|answering|echoing"],
    )
    assert len(items) == 2
    for _, instruction, answer_a, _, model_a, model_b in items:
        assert (model_a, model_b) == ("answering", "echoing")
        assert answer_a.startswith("Answer to: ") and instruction  # what each model generated for the same prompt
    panel = {"judges": [STUB_JUDGE], "sets": ["gsm8k|*"]}
    assert judging(warehouse, [pairwise_verdicts], {"pairwise_verdicts": panel}, server).success
    battles = query(
        warehouse, "SELECT model_a, model_b, winner FROM judge_battles WHERE set_name = 'gsm8k|answering|echoing'"
    )
    expected = [
        ("answering", "echoing", "model_a" if len(a) > len(b) else "model_b" if len(b) > len(a) else "tie")
        for _, _, a, b, _, _ in items
    ]
    assert sorted(battles) == sorted(expected)


def test_a_loglikelihood_benchmark_has_no_answers_to_judge(warehouse, local_model, tmp_path):
    roster = roster_with(tmp_path / "roster", "scoring", solvers=["harness"], benchmarks=["arc_easy"])
    instance = DagsterInstance.ephemeral()
    assert materialize_inputs(warehouse, "arc_easy", 1, instance=instance).success
    assert materialize_evaluation(warehouse, "arc_easy", "scoring", roster, instance=instance).success
    roster_with(tmp_path / "roster", "other", solvers=["harness"], benchmarks=["arc_easy"])
    result = judging(
        warehouse, [judging_sets], {"judging_sets": {"generations": ["arc_easy|scoring|other"]}}, raise_on_error=False
    )
    error = str(next(e for e in result.all_events if e.is_step_failure).step_failure_data.error)
    assert "arc_easy: scoring's sample" in error and "holds no generated text" in error


@pytest.mark.slow
def test_a_blind_sheet_is_a_human_labelled_set(warehouse, server, tmp_path):
    folder = tmp_path / "blind_eval"
    shutil.copytree(PROJECT_ROOT / "data" / "blind_eval", folder, ignore=shutil.ignore_patterns("issued", "*.xlsx"))
    blind = {"config": {"folder": str(folder)}}
    issuing = [blind_eval_questions, blind_eval_answers, blind_eval_sheet]
    assert materialize_configured(issuing, {"warehouse": warehouse}, {a.key.path[-1]: blind for a in issuing}).success
    key = sheets.read_answer_key(folder / "issued" / KEY_FILE)
    fill(folder, key, "rater-1")
    assert materialize_configured([blind_eval_scores], {"warehouse": warehouse}, {"blind_eval_scores": blind}).success
    assert judging(warehouse, [judging_sets]).success
    (name,) = [n for (n,) in query(warehouse, "SELECT set_name FROM judging_sets WHERE kind = 'blind'")]
    items = query(
        warehouse,
        "SELECT item_id, labels, gold, model_a, model_b FROM judging_items WHERE set_name = ? ORDER BY 1",
        [name],
    )
    # The rater scored demo-rag above demo-generic on every question but Q4 (a tie): the winner's side.
    expected = {}
    for qid, (system_a, _) in key["sides"].items():
        expected[qid] = "tie" if qid == "Q4" else "a" if system_a == "demo-rag" else "b"
    assert {qid: (labels, gold) for qid, labels, gold, _, _ in items} == {q: ([g], g) for q, g in expected.items()}
    panel = {"judges": [STUB_JUDGE], "sets": ["blind|*"], "items": None}
    assert judging(warehouse, [pairwise_verdicts, judge_agreement], {"pairwise_verdicts": panel}, server).success
    assert query(warehouse, "SELECT items, verdicts FROM judge_vs_human WHERE set_name = ?", [name]) == [(5, 10)]


def era_file(folder: Path, era: str, **settings) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"{era}.json").write_text(json.dumps(settings))


def test_the_flag_check_fires_below_the_bound_and_passes_above_it(warehouse, tmp_path, monkeypatch):
    """GPT-4's recorded verdicts on LLMBar Natural give it Cohen's kappa 0.908 against the gold labels."""
    eras = tmp_path / "eras"
    gpt4 = {"gpt4": GPT4_LLMBAR_JUDGE}
    era_file(eras, "trusting", judge_panel=gpt4, agreement_set="llmbar_natural", min_judge_agreement=0.9)
    monkeypatch.setenv("EVAL_ERAS_DIR", str(eras))
    assets = [judging_sets, recorded_verdicts, judge_agreement]
    ops = {"judging_sets": {"blind_sheets": False}, "judge_agreement": {"rounds": ROUNDS}}
    passed = {c.check_name: c for c in judging(warehouse, assets, ops).get_asset_check_evaluations()}
    assert passed["flag_panel_judges"].passed
    era_file(eras, "demanding", judge_panel=gpt4, agreement_set="llmbar_natural", min_judge_agreement=0.95)
    era_file(eras, "unmeasured", judge_panel={"new": "openai/gpt-4o"}, agreement_set="llmbar_natural")
    again = judging(warehouse, [judge_agreement], {"judge_agreement": {"rounds": ROUNDS}})
    checks = {c.check_name: c for c in again.get_asset_check_evaluations()}
    flagged = checks["flag_panel_judges"]
    assert not flagged.passed and flagged.metadata["offending_rows"].value == 2
    examples = str(flagged.metadata["examples"].value)
    assert "demanding" in examples and "below the bound 0.95" in examples
    assert "unmeasured" in examples and "openai/gpt-4o has no measured kappa on llmbar_natural" in examples
    assert "trusting" not in examples


def test_an_era_weighs_its_judges_by_their_measured_agreement(warehouse, server, tmp_path):
    """Two judges measured at kappa 0.6 and 0.2: the era's quality is 0.75 and 0.25 of their scores."""
    measured = [
        AgreementMetric("openai/judge-harsh", "llmbar_natural", "kappa", 0.6, 0.5, 0.7, 100, "bootstrap"),
        AgreementMetric("openai/judge-lenient", "llmbar_natural", "kappa", 0.2, 0.1, 0.3, 100, "bootstrap"),
    ]
    with warehouse.store(JudgingStore) as store:
        store.replace_judge_agreement(measured, utc_now())
    era = {
        "population_size": 4,
        "generations": 0,
        "compression_model": "openai/compressor",
        "judge_panel": {"harsh": "openai/judge-harsh", "lenient": "openai/judge-lenient"},
        "judge_weighting": "agreement",
        "agreement_set": "llmbar_natural",
    }
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("eras", ["weighted"])
    resources = {
        "warehouse": warehouse,
        "evaluation_model": LanguageModelResource(),
        "gateway": ModelGatewayResource(api_base=server.api_base, max_retries=0),
    }
    assert materialize([source_paragraphs, gene_pools], resources=resources, instance=instance).success
    result = materialize(
        [evolution_era],
        partition_key="weighted",
        resources=resources,
        instance=instance,
        run_config={"ops": {"evolution_era": {"config": era}}},
    )
    assert result.success
    scores = query(
        warehouse,
        "SELECT g.quality_score_avg, list(j.score ORDER BY j.judge_name) FROM generations g "
        "JOIN judge_scores j USING (era, prompt_id) GROUP BY g.prompt_id, g.quality_score_avg",
    )
    assert len(scores) == 4
    for average, (harsh, lenient) in scores:
        assert average == pytest.approx(0.75 * harsh + 0.25 * lenient)
    (materialization,) = result.get_asset_materialization_events()
    assert materialization.materialization.metadata["judge_weights"].value == pytest.approx(
        {"harsh": 0.75, "lenient": 0.25}
    )
