"""Named jobs of the code location."""

from dagster import AssetSelection, define_asset_job

from eval_platform.core.protocols import PROTOCOLS
from eval_platform.partitions import benchmark_partitions, era_partitions

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

evolution_inputs_job = define_asset_job(
    "evolution_inputs", selection=AssetSelection.groups("evolution_inputs"),
    description="Load the source paragraphs and gene pools eras read.",
)

evolution_era_job = define_asset_job(
    "prompt_evolution_era", selection=AssetSelection.groups("prompt_evolution"), partitions_def=era_partitions,
    description="Run (or resume) one prompt-evolution era, a partition: add one in the launchpad, configure it "
                "there, or drop its configuration into data/evolution/eras/ for the era sensor.",
)

blind_evaluation_sheet_job = define_asset_job(
    "blind_evaluation_sheet",
    selection=AssetSelection.assets("blind_eval_questions", "blind_eval_answers", "blind_eval_sheet"),
    description="Collect the questions and both systems' answers, and issue the scoring sheet and answer key.",
)

blind_evaluation_tally_job = define_asset_job(
    "blind_evaluation_tally",
    selection=AssetSelection.assets("blind_eval_scores", "blind_eval_tally"),
    description="Read the filled scoring sheets and tally wins, ties, averages and statistics.",
)

blind_evaluation_llm_rater_job = define_asset_job(
    "blind_evaluation_llm_rater",
    selection=AssetSelection.assets("blind_eval_llm_rating"),
    description="Let an LLM rate the issued sheet as one more rater (configure the model in the launchpad).",
)

ALL_JOBS = [benchmark_refresh_job, *protocol_jobs, protocol_scores_job, evolution_inputs_job, evolution_era_job, blind_evaluation_sheet_job,
            blind_evaluation_tally_job, blind_evaluation_llm_rater_job]
