"""Secrets: with fake OpenAI, Anthropic and Gemini keys in the environment, an era over HTTP judges
of all three providers and a served-model run (servers that quote the key they were sent back in
their error, as a careless proxy might) leave no key in the warehouse (its file and every text
column), in Dagster's run and event storage, in the compute logs or on the console."""

import re
import sys
from pathlib import Path

import duckdb
import pytest
from dagster import DagsterInstance

from eval_engine import DEFAULT_LOCAL_MODEL
from eval_platform.common.gateway import redact
from eval_platform.evaluation_assets.benchmarks.assets import benchmark_evaluation
from eval_platform.evaluation_assets.evolution.assets import era_summary, evolution_era, gene_pools, source_paragraphs
from eval_platform.resources import ModelGatewayResource, WarehouseResource
from tests.evaluation import materialize_configured, materialize_evaluation, materialize_inputs, roster_with
from tests.openai_stub_server import StubServer
from tests.processes import free_port, running

KEYS = {
    "OPENAI_API_KEY": "sk-fault-suite-openai-7f3a9c1e5b2d4f60",
    "ANTHROPIC_API_KEY": "sk-ant-fault-suite-anthropic-19e4c7a2",
    "GEMINI_API_KEY": "AIza-fault-suite-gemini-5d8b2e6f0a13",
}


# Judges of the other providers: the stub refuses their APIs, quoting the key each was sent.
ECHO_OTHER_PROVIDERS = {"anthropic-echo": "anthropic/claude-echo-key", "gemini-echo": "gemini/gemini-echo-key"}


@pytest.fixture
def keys(monkeypatch):
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    return KEYS


def test_redaction_covers_secret_variables_and_bearer_tokens(keys, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_fault_suite_token_1234")
    text = redact(
        f"sent {keys['OPENAI_API_KEY']} and {keys['GEMINI_API_KEY']}, hf_fault_suite_token_1234; "
        "Authorization: Bearer abc.def-123, other"
    )
    assert text == (
        "sent [OPENAI_API_KEY redacted] and [GEMINI_API_KEY redacted], [HF_TOKEN redacted]; "
        "Authorization: Bearer [redacted], other"
    )


def run_era(instance, warehouse, api_base):
    instance.add_dynamic_partitions("eras", ["secret-era"])
    settings = {"warehouse": warehouse, "gateway": ModelGatewayResource(api_base=api_base, max_retries=0)}
    assert materialize_configured([source_paragraphs, gene_pools], settings, instance=instance).success
    config = {
        "population_size": 3,
        "generations": 1,
        "compression_model": "openai/compressor",
        "mutation_model": "openai/echo-key",
        "judge_panel": {"fast": "openai/judge-fast", "echo": "openai/echo-key", **ECHO_OTHER_PROVIDERS},
    }
    assert materialize_configured(
        [evolution_era, era_summary],
        settings,
        {"evolution_era": {"config": config}},
        partition_key="secret-era",
        instance=instance,
    ).success


def run_served(instance, warehouse, api_base, model):
    roster = roster_with(
        Path(warehouse.database).parent / "roster", "served", model=model, served_tokenizer=DEFAULT_LOCAL_MODEL
    )
    assert materialize_inputs(warehouse, "arc_easy", 3, instance=instance).success
    return materialize_evaluation(
        warehouse,
        "arc_easy",
        "served",
        roster,
        {"solvers": ["harness"]},
        gateway=ModelGatewayResource(api_base=api_base, max_retries=0),
        assets=[benchmark_evaluation],
        instance=instance,
        raise_on_error=False,
    )


def text_cells_holding(path, secret):
    """(table, column) of every text column of the warehouse with a value containing `secret`."""
    with duckdb.connect(str(path), read_only=True) as conn:
        columns = conn.execute("""SELECT table_name, column_name FROM information_schema.columns
                                  WHERE data_type NOT IN ('INTEGER', 'BIGINT', 'DOUBLE', 'FLOAT', 'BOOLEAN',
                                                          'TIMESTAMP', 'DATE')""").fetchall()
        return [
            (table, column)
            for table, column in columns
            if conn.execute(
                f'SELECT count(*) FROM "{table}" WHERE CAST("{column}" AS VARCHAR) LIKE ?', [f"%{secret}%"]
            ).fetchone()[0]
        ]


def test_no_key_reaches_the_warehouse_dagster_storage_or_logs(tmp_path, keys, capfd):
    home = tmp_path / "dagster_home"
    home.mkdir()
    warehouse_path = tmp_path / "warehouse.duckdb"
    warehouse = WarehouseResource(database=str(warehouse_path))
    with DagsterInstance.local_temp(str(home)) as instance:
        with StubServer() as stub:
            run_era(instance, warehouse, stub.api_base)
        refused_keys = set(stub.refused_keys)
        port = free_port()
        with running(
            [sys.executable, "-m", "tests.completions_server", "--port", str(port)], f"http://127.0.0.1:{port}/health"
        ):
            api_base = f"http://127.0.0.1:{port}/v1"
            assert run_served(instance, warehouse, api_base, "served/smollm2").success
            refused = run_served(instance, warehouse, api_base, "served/smollm2-echo-key")
        (failure,) = [e for e in refused.all_events if e.is_step_failure]
    console = capfd.readouterr()

    # The keys were sent and quoted back, so there was something to leak.
    assert (
        "Incorrect API key provided: Bearer [OPENAI_API_KEY redacted]" in failure.event_specific_data.error.to_string()
    )
    with duckdb.connect(str(warehouse_path), read_only=True) as conn:
        errors = [e for (e,) in conn.execute("SELECT error FROM judge_scores WHERE judge_name = 'echo'").fetchall()]
        quoted = {
            name: [e for (e,) in conn.execute("SELECT error FROM judge_scores WHERE judge_name = ?", [name]).fetchall()]
            for name in ECHO_OTHER_PROVIDERS
        }
        mutations = conn.execute(
            "SELECT count(*) FROM gateway_calls WHERE purpose = 'mutation' AND error LIKE "
            "'%Incorrect API key provided: [OPENAI_API_KEY redacted]%'"
        ).fetchone()[0]
        served = conn.execute(
            "SELECT count(*) FROM samples JOIN evaluations USING (benchmark, model, settings_key, solver) "
            "WHERE model_source = 'served/smollm2'"
        ).fetchone()[0]
    assert errors and all("Incorrect API key provided: [OPENAI_API_KEY redacted]" in e for e in errors)
    assert refused_keys == {keys["ANTHROPIC_API_KEY"], keys["GEMINI_API_KEY"]}  # sent, and quoted back
    for name, variable in (("anthropic-echo", "ANTHROPIC_API_KEY"), ("gemini-echo", "GEMINI_API_KEY")):
        # redacted by us, or already by litellm (which masks keys it recognises, such as "sk-ant-...")
        assert quoted[name] and all(
            re.search(rf"Incorrect API key provided: (\[{variable} redacted\]|REDACTED) ", e) for e in quoted[name]
        ), quoted[name][:1]
    assert mutations > 0 and served == 3
    stored = [p for p in tmp_path.rglob("*") if p.is_file()]
    compute_logs = [p for p in stored if p.suffix in (".out", ".err", ".complete")]
    assert compute_logs and any(p.suffix == ".db" for p in stored)

    for name, secret in keys.items():
        assert text_cells_holding(warehouse_path, secret) == [], name
        assert [str(p) for p in stored if secret.encode() in p.read_bytes()] == [], name
        assert secret not in console.out and secret not in console.err, name
