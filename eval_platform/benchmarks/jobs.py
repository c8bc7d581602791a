"""The benchmark jobs: refresh a partition, run a named protocol, score the protocols."""

from dagster import AssetSelection, define_asset_job

from eval_platform.benchmarks.partitions import benchmark_partitions
from eval_platform.benchmarks.protocols import PROTOCOLS

BENCHMARK_GROUPS = AssetSelection.groups(
    "benchmark_ingestion", "benchmark_preprocessing", "benchmark_prediction", "benchmark_scoring")

benchmark_refresh_job = define_asset_job(
    "benchmark_refresh", selection=BENCHMARK_GROUPS, partitions_def=benchmark_partitions,
    description="Ingest, preprocess, predict and score one benchmark partition.",
)

protocol_jobs = [
    define_asset_job(
        protocol.name, selection=BENCHMARK_GROUPS, partitions_def=benchmark_partitions,
        config={"ops": {"benchmark_predictions": {"config": {"protocol": protocol.name}}}},
        description=f"{protocol.title}: launch it for the partitions "
                    f"{', '.join(t.benchmark for t in protocol.tasks)} (a backfill), then run score_protocols.",
    )
    for protocol in PROTOCOLS.values()
]

protocol_scores_job = define_asset_job(
    "score_protocols", selection=AssetSelection.assets("protocol_scores"),
    description="Each protocol's tasks and average from the stored benchmark scores.",
)

BENCHMARK_JOBS = [benchmark_refresh_job, *protocol_jobs, protocol_scores_job]
