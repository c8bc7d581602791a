"""The materialisations the fault suite interrupts, run the same way in a killed process and in
the test: a benchmark partition end to end, an era over HTTP judges, a blind-evaluation tally, a
served model's evaluation whose answers are kept in chunks, and a judging panel's verdicts over HTTP.

    python -m tests.faults.scenarios SCENARIO [ARGUMENT ...]    (one in a process of its own)"""

from __future__ import annotations

import json
import shutil
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagster import ConfigurableResource, DagsterInstance

from tests.conftest import DATA_BENCHMARKS, PROJECT_ROOT
from tests.processes import free_port, running

ERA = "crash"
ERA_CONFIG = {
    "population_size": 6,
    "generations": 2,
    "compression_model": "openai/compressor",
    "seed": 11,
    "judge_panel": {"openai": "openai/judge-fast", "claude": "openai/judge-claude"},
}


def warehouse(path: str):
    from eval_platform.resources import WarehouseResource

    return WarehouseResource(database=path)


def benchmark(path: str, limit: int = 6) -> None:
    """ARC-Easy's first `limit` rows: rows, few-shot rows, documents (benchmark_inputs), then a roster
    model's evaluation by the local model, by each of the benchmark's solvers (the chat prompt's
    letter, then the harness's own requests: two writes, each its own transaction)."""
    from tests.evaluation import materialize_evaluation, materialize_inputs, roster_with

    roster = roster_with(
        Path(path).parent / "roster", "smollm2", model="local/smollm2-135m-instruct", device="cpu", dtype="float32"
    )
    instance = DagsterInstance.ephemeral()
    assert materialize_inputs(
        warehouse(path), "arc_easy", limit, DATA_BENCHMARKS / "arc_easy.jsonl", instance=instance
    ).success
    assert materialize_evaluation(warehouse(path), "arc_easy", "smollm2", roster, instance=instance).success


def era(path: str, api_base: str) -> None:
    """The inputs, then a three-generation era judged over HTTP, then its summary."""
    from eval_platform.evaluation_assets.evolution.assets import (
        era_summary,
        evolution_era,
        gene_pools,
        source_paragraphs,
    )
    from eval_platform.resources import ModelGatewayResource
    from tests.evaluation import materialize_configured
    from tests.openai_stub_server import CLIENT_TIMEOUT_S

    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("eras", [ERA])
    settings = {
        "warehouse": warehouse(path),
        "gateway": ModelGatewayResource(api_base=api_base, timeout_s=CLIENT_TIMEOUT_S, max_retries=2, backoff_s=0.05),
    }
    assert materialize_configured([source_paragraphs, gene_pools], settings, instance=instance).success
    assert materialize_configured(
        [evolution_era, era_summary],
        settings,
        {"evolution_era": {"config": ERA_CONFIG}},
        partition_key=ERA,
        instance=instance,
    ).success


def blind(path: str, folder: str) -> None:
    """Questions, answers and the issued sheet; two demo raters fill it; their scores are read
    back and tallied."""
    from eval_platform.blind.raters import demo_rater_fill
    from eval_platform.evaluation_assets.blind.assets import (
        SHEET_FILE,
        blind_eval_answers,
        blind_eval_questions,
        blind_eval_scores,
        blind_eval_sheet,
        blind_eval_tally,
    )
    from tests.evaluation import materialize_configured

    root = Path(folder)
    if not root.exists():
        shutil.copytree(PROJECT_ROOT / "data" / "blind_eval", root, ignore=shutil.ignore_patterns("issued", "*.xlsx"))
    config = {"config": {"folder": folder}}
    settings: dict[str, ConfigurableResource | None] = {"warehouse": warehouse(path)}
    assert materialize_configured(
        [blind_eval_questions, blind_eval_answers, blind_eval_sheet],
        settings,
        {op: config for op in ("blind_eval_questions", "blind_eval_answers", "blind_eval_sheet")},
        instance=DagsterInstance.ephemeral(),
    ).success
    for seed, rater in enumerate(("ana", "ben")):
        demo_rater_fill(root / "issued" / SHEET_FILE, root / "filled" / f"{rater}.xlsx", rater_seed=seed)
    assert materialize_configured(
        [blind_eval_scores, blind_eval_tally],
        settings,
        {"blind_eval_scores": config},
        instance=DagsterInstance.ephemeral(),
    ).success


def instant_roster(folder: Path):
    """The roster in `folder` with the served instant model, `instant`, as its entry."""
    from tests.evaluation import roster_with

    return roster_with(folder, "instant", model="served/instant", solvers=["harness"])


def served_evaluation(path: str, api_base: str, instance: DagsterInstance | None = None, roster: str | None = None):
    """MMLU-Pro's shipped slice (70 documents, five-shot) asked by the harness of a model served at
    `api_base` (tests/completions_server.py --instant), one request in flight at a time:
    benchmark_evaluation alone (in `instance`, an ephemeral one by default), its answers kept in
    chunks as they come (EVAL_ANSWER_CHUNK). The roster is written beside the warehouse, or read
    from the folder `roster` (`instant_roster` wrote it)."""
    from eval_platform.resources import ModelGatewayResource, RosterResource
    from tests.evaluation import materialize_evaluation

    result = materialize_evaluation(
        warehouse(path),
        "leaderboard_mmlu_pro",
        "instant",
        RosterResource(directory=roster) if roster else instant_roster(Path(path).parent / "roster"),
        gateway=ModelGatewayResource(api_base=api_base, max_concurrency=1),
        instance=instance or DagsterInstance.ephemeral(),
    )
    assert result.success
    return result


def served_partition(path: str, api_base: str, roster: str) -> None:
    """`served_evaluation` with the roster written beforehand: runs of the partition at once share
    it, and none rewrites it while another reads it."""
    served_evaluation(path, api_base, roster=roster)


# A panel of two HTTP judges (the stub's length-loving pairwise judge under two names) on a slice of
# each judging asset's pairs: (its inputs, their config), (the verdicts asset, its config).
JUDGES = ["openai/judge-pairwise", "openai/judge-pairwise-second"]
JUDGINGS = {
    "pairwise_verdicts": (
        ("judging_sets", {"blind_sheets": False}),
        {"judges": JUDGES, "sets": ["llmbar_natural", "llmbar_neighbor"], "items": 14},
    ),
    "mt_bench_verdicts": (
        ("mt_bench_inputs", {}),
        {"judges": JUDGES, "questions": [81], "pairs": "pairwise-all"},
    ),
}


def judging(path: str, api_base: str, verdicts: str) -> None:
    """A judging asset's inputs, then its verdicts by the panel over HTTP (the stub server at
    `api_base`, the client's timeout its config's), with the verdicts' checks, which must pass."""
    from eval_platform.definitions import defs
    from eval_platform.evaluation_assets.judging import assets
    from eval_platform.resources import ModelGatewayResource
    from tests.evaluation import materialize_configured
    from tests.openai_stub_server import CLIENT_TIMEOUT_S

    (inputs, inputs_config), panel = JUDGINGS[verdicts]
    asset = getattr(assets, verdicts)
    checks = [c for c in defs().asset_checks or [] if {k.asset_key for k in c.check_keys} == {asset.key}]
    settings = {
        "warehouse": warehouse(path),
        "gateway": ModelGatewayResource(api_base=api_base, timeout_s=CLIENT_TIMEOUT_S, max_retries=0),
    }
    instance = DagsterInstance.ephemeral()
    assert materialize_configured(
        [getattr(assets, inputs)], settings, {inputs: {"config": inputs_config}}, instance=instance
    ).success
    result = materialize_configured([asset, *checks], settings, {verdicts: {"config": panel}}, instance=instance)
    assert result.success
    evaluations = result.get_asset_check_evaluations()
    assert evaluations and all(e.passed for e in evaluations), [e.check_name for e in evaluations if not e.passed]


SCENARIOS = {
    "benchmark": benchmark,
    "era": era,
    "blind": blind,
    "served_evaluation": served_evaluation,
    "served_partition": served_partition,
    "judging": judging,
}

if __name__ == "__main__":
    import sys

    SCENARIOS[sys.argv[1]](*sys.argv[2:])


@contextmanager
def instant_server(latency_s: float) -> Iterator[str]:
    """The instant completions server (tests/completions_server.py), `latency_s` per HTTP request;
    its address while in use."""
    port = free_port()
    command = [sys.executable, "-m", "tests.completions_server", "--port", str(port), "--instant"]
    with running([*command, "--latency", str(latency_s)], f"http://127.0.0.1:{port}/health", cwd=PROJECT_ROOT):
        yield f"http://127.0.0.1:{port}"


def prompts_answered(server: str) -> int:
    """The prompts the instant server has answered so far."""
    return json.loads(urllib.request.urlopen(f"{server}/calls").read())["prompts"]
