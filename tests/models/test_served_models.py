"""A served model's log-likelihoods over real HTTP, from a completions server process that answers
from the local SmolLM2: equal to the in-process model's, through retries after a 500 and a timeout,
and scored by the benchmark assets like any other model. Also the choice of device and dtype."""

import json
import sys
import urllib.request

import duckdb
import pytest

from eval_engine import DEFAULT_LOCAL_MODEL, LOGLIKELIHOOD_TOLERANCE, Placement, choose_placement
from eval_platform.common.gateway import ModelGateway
from eval_platform.common.models import LoglikelihoodRequest
from eval_platform.common.models.served import ServedCompletionsModel, ServerCheckFailed
from eval_platform.resources import LanguageModelResource, ModelGatewayResource
from tests.conftest import PROJECT_ROOT
from tests.evaluation import dataset_requests, materialize_evaluation, materialize_inputs, roster_with
from tests.processes import WAIT_S, free_port, running
from tests.reference_scoring import naive_loglikelihoods
from tests.tables import differences

HARNESS = {"solvers": ["harness"]}


@pytest.fixture(scope="module")
def server():
    port = free_port()
    with (
        running(
            [sys.executable, "-m", "tests.completions_server", "--port", str(port)],
            f"http://127.0.0.1:{port}/health",
            cwd=PROJECT_ROOT,
        ),
        pytest.MonkeyPatch.context() as patch,
    ):
        patch.setenv("OPENAI_API_KEY", "sk-test-served-not-a-real-key")
        yield f"http://127.0.0.1:{port}"


def calls(server) -> int:
    return json.loads(urllib.request.urlopen(f"{server}/calls").read())["calls"]


def requests_of(name: str, rows: int) -> list[LoglikelihoodRequest]:
    """The harness's zero-shot requests for a dataset's first rows."""
    return dataset_requests(name, rows)


@pytest.mark.slow
def test_served_loglikelihoods_equal_the_in_process_model(server, local_model):
    requests = requests_of("arc_easy", 3) + requests_of("mmlu", 3)
    served = ServedCompletionsModel("served/smollm2", ModelGateway(api_base=f"{server}/v1"), tokenizer=local_model)
    assert served.loglikelihoods(requests, batch_size=4) == pytest.approx(
        naive_loglikelihoods(local_model, requests), abs=LOGLIKELIHOOD_TOLERANCE
    )
    by_text = ServedCompletionsModel("served/smollm2", ModelGateway(api_base=f"{server}/v1"))  # no tokenizer
    assert by_text.loglikelihoods(requests[:4], batch_size=4) == pytest.approx(
        naive_loglikelihoods(local_model, requests[:4]), abs=LOGLIKELIHOOD_TOLERANCE
    )


@pytest.mark.slow
@pytest.mark.parametrize("model", ["served/smollm2-500-once", "served/smollm2-slow-once"])
def test_served_path_retries_after_a_500_or_a_timeout(server, local_model, model):
    requests = requests_of("arc_easy", 1)
    # The slow model's first answer never comes before its retry; the test sits out the client's
    # timeout once, a fraction of the one wait setting, which a forward pass answers well within.
    gateway = ModelGateway(api_base=f"{server}/v1", timeout_s=WAIT_S / 8, max_retries=2, backoff_s=0.05)
    before = calls(server)
    served = ServedCompletionsModel(model, gateway, tokenizer=local_model, skip_check=True)  # the scoring call alone
    values = served.loglikelihoods(requests, batch_size=8)
    assert values == pytest.approx(naive_loglikelihoods(local_model, requests), abs=LOGLIKELIHOOD_TOLERANCE)
    assert calls(server) - before == 2  # the failed attempt and the retry


@pytest.mark.slow
def test_served_model_scores_arc_easy_and_mmlu_as_the_in_process_model_does(server, warehouse, tmp_path):
    roster_with(tmp_path, "served", model="served/smollm2", served_tokenizer=DEFAULT_LOCAL_MODEL)
    roster = roster_with(tmp_path, "in-process", model=DEFAULT_LOCAL_MODEL)
    for partition in ("arc_easy", "mmlu"):
        assert materialize_inputs(warehouse, partition, 6).success
        for name in ("served", "in-process"):
            assert materialize_evaluation(
                warehouse, partition, name, roster, HARNESS, gateway=ModelGatewayResource(api_base=f"{server}/v1")
            ).success
    with warehouse.get_connection() as conn:
        pairs = conn.execute(
            """
            SELECT a.benchmark, a.task, a.doc_id, a.metrics, b.metrics, a.responses, b.responses
            FROM samples a JOIN samples b USING (benchmark, settings_key, solver, task, doc_id, filter)
            WHERE a.model = 'served' AND b.model = 'in-process' AND a.solver = 'harness'"""
        ).fetchall()
        accuracies = conn.execute(
            "SELECT benchmark, task, metric, filter, list(DISTINCT value) FROM results GROUP BY ALL"
        ).fetchall()
        sources = conn.execute("SELECT DISTINCT model, model_source FROM evaluations ORDER BY model").fetchall()
    assert len(pairs) == 12
    assert all(a_metrics == b_metrics for *_, a_metrics, b_metrics, _, _ in pairs)
    served, in_process = ([json.loads(row[i]) for row in pairs] for i in (5, 6))
    found = [
        d
        for (*where, _, _, _, _), a, b in zip(pairs, served, in_process, strict=True)
        for d in differences([value for [[value, _]] in a], [value for [[value, _]] in b], str(where))
    ]
    assert not found, found  # each choice's log-likelihood within LOGLIKELIHOOD_TOLERANCE
    # a served model does not say whether a continuation is its greedy one (the run warns so)
    assert all(not is_greedy for responses in served for [[_, is_greedy]] in responses)
    assert all(len(values) == 1 for *_, values in accuracies)  # same accuracy for both models
    assert sources == [("in-process", DEFAULT_LOCAL_MODEL), ("served", "served/smollm2")]


@pytest.mark.parametrize(
    "suffix, problem",
    [
        ("generated-only", "the generated token's only, not the prompt's"),
        ("no-logprobs", "no log-probabilities at all"),
        ("off-by-one", "values one position off"),
    ],
)
@pytest.mark.parametrize("by_tokens", [True, False], ids=["token-ids", "text"])
def test_a_server_with_wrong_prompt_logprobs_is_refused_before_scoring(server, local_model, suffix, problem, by_tokens):
    served = ServedCompletionsModel(
        f"served/smollm2-{suffix}", ModelGateway(api_base=f"{server}/v1"), tokenizer=local_model if by_tokens else None
    )
    before = calls(server)
    with pytest.raises(ServerCheckFailed) as refused:
        served.loglikelihoods(requests_of("arc_easy", 2))
    message = str(refused.value)
    assert problem in message and f"{server}/v1" in message and "llama-cpp-python 0.3.36" in message
    assert "Nothing was scored" in message and calls(server) - before == 1  # the check, and no scoring request


@pytest.mark.slow
def test_a_server_that_refuses_max_tokens_0_is_scored_and_the_check_passes_on_a_right_one(server, local_model):
    requests = requests_of("arc_easy", 2)
    for by_tokens in (local_model, None):
        served = ServedCompletionsModel(
            "served/smollm2-min-tokens-1", ModelGateway(api_base=f"{server}/v1"), tokenizer=by_tokens
        )
        assert served.loglikelihoods(requests) == pytest.approx(
            naive_loglikelihoods(local_model, requests), abs=LOGLIKELIHOOD_TOLERANCE
        )


@pytest.mark.slow
def test_batches_spread_over_replicas_and_a_dead_one_costs_a_retry(server, local_model):
    requests = requests_of("arc_easy", 2)  # 8 requests: 4 calls of 2
    expected = naive_loglikelihoods(local_model, requests)
    port = free_port()
    with running(
        [sys.executable, "-m", "tests.completions_server", "--port", str(port)],
        f"http://127.0.0.1:{port}/health",
        cwd=PROJECT_ROOT,
    ):
        other = f"http://127.0.0.1:{port}"
        before = calls(server), calls(other)
        both = ServedCompletionsModel(
            "served/smollm2", ModelGateway(api_base=f"{server}/v1, {other}/v1"), tokenizer=local_model
        )
        assert both.loglikelihoods(requests, batch_size=2) == pytest.approx(expected, abs=LOGLIKELIHOOD_TOLERANCE)
        assert (calls(server) - before[0], calls(other) - before[1]) == (3, 2)  # the check and 4 calls, in turn
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with_dead = ServedCompletionsModel(
        "served/smollm2",
        ModelGateway(api_base=f"{server}/v1,{dead}", max_retries=1, backoff_s=0.05),
        tokenizer=local_model,
    )
    assert with_dead.loglikelihoods(requests, batch_size=2) == pytest.approx(expected, abs=LOGLIKELIHOOD_TOLERANCE)


@pytest.mark.slow
def test_a_served_model_of_the_roster_reaches_its_server_and_needs_no_key(server, tmp_path, monkeypatch):
    """The README's roster entry for a served model, run by the code location's own jobs with only
    the launchpad's resource config (warehouse and roster folder), no key set."""
    import yaml
    from dagster import DagsterInstance

    from eval_platform.definitions import defs
    from eval_platform.evaluation_assets.partitions import benchmark_partitions, evaluation_key, roster_partitions

    monkeypatch.delenv("OPENAI_API_KEY")
    entry = {**documented_served_entry(), "api_base": f"{server}/v1"}
    (tmp_path / "roster").mkdir()
    (tmp_path / "roster" / "my-served-model.yaml").write_text(yaml.safe_dump(entry))
    resources = {
        "warehouse": {"config": {"database": str(tmp_path / "served.duckdb")}},
        "roster": {"config": {"directory": str(tmp_path / "roster")}},
    }
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(roster_partitions.name, ["my-served-model"])  # as roster_sensor does
    instance.add_dynamic_partitions(benchmark_partitions.name, ["arc_easy"])
    assert (
        defs()
        .resolve_job_def("benchmark_inputs")
        .execute_in_process(
            partition_key="arc_easy",
            instance=instance,
            run_config={"resources": resources, "ops": {"benchmark_raw_rows": {"config": {"limit": 4}}}},
        )
        .success
    )
    before = calls(server)
    result = (
        defs()
        .resolve_job_def("model_evaluation")
        .execute_in_process(
            partition_key=evaluation_key("arc_easy", "my-served-model"),
            instance=instance,
            run_config={"resources": resources, "ops": {"benchmark_evaluation": {"config": HARNESS}}},
        )
    )
    assert result.success
    assert calls(server) - before >= 2  # the check and the scoring reached the entry's server
    with duckdb.connect(str(tmp_path / "served.duckdb")) as conn:
        assert conn.execute("SELECT DISTINCT model_source FROM evaluations").fetchall() == [("served/smollm2",)]
        assert conn.execute("SELECT DISTINCT model FROM results").fetchall() == [("my-served-model",)]
        assert conn.execute("SELECT device_name FROM evaluation_runs").fetchall() == [(f"{server}/v1",)]


def documented_served_entry() -> dict:
    """The docs' roster entry for a served model (docs/concepts/models.md: its YAML block naming
    `served/` and `api_base`)."""
    import yaml

    text = (PROJECT_ROOT / "docs" / "concepts" / "models.md").read_text()
    blocks = [yaml.safe_load(block.split("```")[0]) for block in text.split("```yaml\n")[1:]]
    (entry,) = [b for b in blocks if isinstance(b, dict) and str(b.get("model", "")).startswith("served/")]
    return entry


@pytest.mark.slow
def test_skipping_the_check_is_explicit_and_recorded(server, warehouse, tmp_path):
    broken = {"model": "served/smollm2-off-by-one", "served_tokenizer": DEFAULT_LOCAL_MODEL}
    roster_with(tmp_path, "broken", **broken)
    roster = roster_with(tmp_path, "skipped", **broken, skip_logprob_check=True)
    gateway = ModelGatewayResource(api_base=f"{server}/v1")
    assert materialize_inputs(warehouse, "arc_easy", 2).success
    refused = materialize_evaluation(
        warehouse, "arc_easy", "broken", roster, HARNESS, gateway=gateway, raise_on_error=False
    )
    assert not refused.success
    with warehouse.get_connection() as conn:
        assert conn.execute("SELECT count(*) FROM answers").fetchone() == (0,)  # never scored
    assert materialize_evaluation(warehouse, "arc_easy", "skipped", roster, HARNESS, gateway=gateway).success
    with warehouse.get_connection() as conn:
        assert conn.execute("SELECT device_name FROM evaluation_runs").fetchall() == [
            (f"{server}/v1 (log-probability check skipped)",)
        ]


@pytest.mark.parametrize(
    "device, dtype, cuda, bf16, mps, expected",
    [
        ("auto", "auto", False, False, False, Placement("cpu", "float32")),
        ("auto", "auto", True, True, False, Placement("cuda", "bfloat16")),
        ("auto", "auto", True, False, False, Placement("cuda", "float16")),
        ("auto", "auto", False, False, True, Placement("mps", "float16")),
        ("cpu", "bfloat16", True, True, False, Placement("cpu", "bfloat16")),
        ("cuda:1", "auto", True, True, False, Placement("cuda:1", "bfloat16")),
    ],
)
def test_device_and_dtype_choice(device, dtype, cuda, bf16, mps, expected):
    assert choose_placement(device, dtype, None, cuda, bf16, mps) == expected


@pytest.mark.slow
def test_device_map_needs_a_gpu_and_precision_is_part_of_the_fingerprint(local_model):
    assert choose_placement("auto", "auto", "auto", True, True, False) == Placement("cuda", "bfloat16", "auto")
    with pytest.raises(ValueError, match="spreads a model over GPUs"):
        choose_placement("cpu", "auto", "auto", False, False, False)
    assert "+" not in local_model.fingerprint  # float32 on the CPU keeps the fingerprint it always had
    bf16 = LanguageModelResource(device="cpu", dtype="bfloat16").load(ModelGateway())
    assert bf16.fingerprint == local_model.fingerprint + "+bfloat16"
