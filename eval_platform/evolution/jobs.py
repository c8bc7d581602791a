"""The prompt-evolution jobs: load the inputs, run (or resume) an era."""

from dagster import AssetSelection, define_asset_job

from eval_platform.evolution.partitions import era_partitions

evolution_inputs_job = define_asset_job(
    "evolution_inputs",
    selection=AssetSelection.groups("evolution_inputs"),
    description="Load the source paragraphs and gene pools eras read.",
)

evolution_era_job = define_asset_job(
    "prompt_evolution_era",
    selection=AssetSelection.groups("prompt_evolution"),
    partitions_def=era_partitions,
    description="Run (or resume) one prompt-evolution era, a partition: add one in the launchpad, configure it "
    "there, or drop its configuration into data/evolution/eras/ for the era sensor.",
)

EVOLUTION_JOBS = [evolution_inputs_job, evolution_era_job]
