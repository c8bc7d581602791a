"""The benchmark jobs: a benchmark's inputs; a roster model's evaluation on a benchmark; a named
protocol's evaluation; the protocols' scores and the leaderboard."""

from dagster import AssetSelection, define_asset_job

from eval_platform.benchmarks.partitions import (
    benchmark_partitions, evaluation_partitions, harness_evaluation_partitions,
)
from eval_platform.benchmarks.protocols import PROTOCOLS

EVALUATION_GROUPS = AssetSelection.groups("benchmark_prediction", "benchmark_scoring")

benchmark_inputs_job = define_asset_job(
    "benchmark_inputs", selection=AssetSelection.groups("benchmark_ingestion", "benchmark_preprocessing"),
    partitions_def=benchmark_partitions,
    description="Ingest and preprocess one benchmark: its rows, few-shot rows, prompts and harness requests.",
)

model_evaluation_job = define_asset_job(
    "model_evaluation", selection=EVALUATION_GROUPS, partitions_def=evaluation_partitions,
    description="Predict, score and compare one roster model on one benchmark (a benchmark x model partition; "
                "its inputs come from benchmark_inputs).",
)

protocol_jobs = [
    define_asset_job(
        protocol.name, selection=EVALUATION_GROUPS, partitions_def=evaluation_partitions,
        config={"ops": {"benchmark_predictions": {"config": {"protocol": protocol.name}}}},
        description=f"{protocol.title}: launch it for a roster model on the benchmarks "
                    f"{', '.join(t.benchmark for t in protocol.tasks)} (a backfill), then run score_protocols.",
    )
    for protocol in PROTOCOLS.values()
]

harness_evaluation_job = define_asset_job(
    "harness_task_evaluation", selection=AssetSelection.groups("benchmark_harness"),
    partitions_def=harness_evaluation_partitions,
    description="One roster model on one lm-evaluation-harness task or group (a benchmark x model partition: one "
                "declared in data/harness/, or any harness task added by name, its data set in the launchpad), "
                "and its comparison with its baseline and predecessor.",
)

protocol_scores_job = define_asset_job(
    "score_protocols", selection=AssetSelection.assets("protocol_scores", "normalized_protocol_scores", "leaderboard"),
    description="Each protocol's tasks and average per roster model, and the leaderboard, from the stored scores.",
)

BENCHMARK_JOBS = [benchmark_inputs_job, model_evaluation_job, *protocol_jobs, harness_evaluation_job,
                  protocol_scores_job]
