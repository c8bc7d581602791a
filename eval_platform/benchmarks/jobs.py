"""The benchmark jobs: a spec's inputs; a roster model's evaluation on a benchmark of either kind; a
named protocol's evaluation; the protocols' scores and the leaderboard."""

from dagster import AssetSelection, define_asset_job

from eval_platform.benchmarks.partitions import benchmark_partitions, evaluation_partitions
from eval_platform.benchmarks.protocols import PROTOCOLS

SPEC_EVALUATION_GROUPS = AssetSelection.groups("benchmark_prediction", "benchmark_scoring")

benchmark_inputs_job = define_asset_job(
    "benchmark_inputs",
    selection=AssetSelection.groups("benchmark_ingestion", "benchmark_preprocessing"),
    partitions_def=benchmark_partitions,
    description="Ingest and preprocess one benchmark: its rows, few-shot rows, prompts and harness requests.",
)

model_evaluation_job = define_asset_job(
    "model_evaluation",
    selection=SPEC_EVALUATION_GROUPS | AssetSelection.groups("benchmark_harness"),
    partitions_def=evaluation_partitions,
    description="One roster model on one benchmark of either kind (a benchmark x model partition), and its "
    "comparison with its baseline and predecessor: a spec's benchmark is predicted and scored from "
    "its inputs (benchmark_inputs), a harness benchmark (declared in data/harness/, or any harness "
    "task added by name, its data set in the launchpad) evaluated by harness_evaluation; the other "
    "kind's assets are skipped.",
)

protocol_jobs = [
    define_asset_job(
        protocol.name,
        selection=SPEC_EVALUATION_GROUPS,
        partitions_def=evaluation_partitions,
        config={"ops": {"benchmark_predictions": {"config": {"protocol": protocol.name}}}},
        description=f"{protocol.title}: launch it for a roster model on the benchmarks "
        f"{', '.join(t.benchmark for t in protocol.tasks)} (a backfill), then run score_protocols.",
    )
    for protocol in PROTOCOLS.values()
]

protocol_scores_job = define_asset_job(
    "score_protocols",
    selection=AssetSelection.assets("protocol_scores", "normalized_protocol_scores", "leaderboard"),
    description="Each protocol's tasks and average per roster model, and the leaderboard, from the stored scores.",
)

BENCHMARK_JOBS = [benchmark_inputs_job, model_evaluation_job, *protocol_jobs, protocol_scores_job]
