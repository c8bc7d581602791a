"""Named jobs of the code location."""

from dagster import AssetSelection, define_asset_job

from evaluation_assets.benchmarks import benchmark_partitions

benchmark_refresh_job = define_asset_job(
    "benchmark_refresh",
    selection=AssetSelection.groups(
        "benchmark_ingestion", "benchmark_preprocessing", "benchmark_prediction", "benchmark_scoring"
    ),
    partitions_def=benchmark_partitions,
    description="Ingest, preprocess, predict and score one benchmark partition.",
)

evolution_era_job = define_asset_job(
    "evolution_era",
    selection=AssetSelection.groups("prompt_evolution"),
    description="Run one prompt-evolution era (configure it in the launchpad) and its statistics.",
)

ALL_JOBS = [benchmark_refresh_job, evolution_era_job]
