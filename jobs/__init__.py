"""The code location's jobs: a benchmark's inputs, a roster model's evaluation on a benchmark, a
protocol's evaluation (a job per declared protocol), the protocols and the leaderboard; an era; blind
evaluation's sheet, tally and LLM rater; judging's sets, its panels and what they measure, and
MT-Bench's grading."""

from pathlib import Path

from dagster import AssetSelection, define_asset_job

from eval_platform.benchmarks.protocols import declared_protocols
from eval_platform.evaluation_assets.partitions import benchmark_partitions, era_partitions, evaluation_partitions

EVALUATION = AssetSelection.groups("benchmark_evaluation")

benchmark_inputs_job = define_asset_job(
    "benchmark_inputs",
    selection=AssetSelection.groups("benchmark_inputs"),
    partitions_def=benchmark_partitions,
    description="Ingest a dataset benchmark: its rows, few-shot rows and documents (a harness task reads its own "
    "data when it is evaluated).",
)

model_evaluation_job = define_asset_job(
    "model_evaluation",
    selection=EVALUATION,
    partitions_def=evaluation_partitions,
    description="One roster model on one benchmark (a benchmark x model partition), by each of its solvers, and its "
    "comparison with its baseline and predecessor.",
)


def protocol_jobs(folder: Path):
    """A job per protocol declared in `folder` (the code location reads EVAL_PROTOCOLS_DIR when it loads):
    the evaluation job with the protocol's settings."""
    return [
        define_asset_job(
            name,
            selection=EVALUATION,
            partitions_def=evaluation_partitions,
            config={"ops": {"benchmark_evaluation": {"config": {"protocol": name}}}},
            description=f"{protocol.title}: launch it for a roster model on the benchmarks "
            f"{', '.join(t.benchmark for t in protocol.tasks)} (a backfill), then run score_protocols.",
        )
        for name, protocol in declared_protocols(folder).items()
    ]


protocol_scores_job = define_asset_job(
    "score_protocols",
    selection=AssetSelection.assets("protocol_scores", "leaderboard"),
    description="Each protocol's tasks and average per roster model, and the leaderboard, from the stored results.",
)

evolution_inputs_job = define_asset_job(
    "evolution_inputs",
    selection=AssetSelection.groups("evolution_inputs"),
    description="Load the source paragraphs and gene pools eras read.",
)

evolution_era_job = define_asset_job(
    "prompt_evolution_era",
    selection=AssetSelection.groups("prompt_evolution"),
    partitions_def=era_partitions,
    description="Run (or resume) one prompt-evolution era, a partition: add one in the launchpad, configure it there, "
    "or drop its configuration into data/evolution/eras/ for the era sensor.",
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

judging_inputs_job = define_asset_job(
    "judging_inputs",
    selection=AssetSelection.groups("judging_inputs"),
    description="Store the pairwise sets (shipped, blind sheets, roster models' generations), the recorded verdicts "
    "and MT-Bench's questions and answers.",
)

judging_job = define_asset_job(
    "judging",
    selection=AssetSelection.groups("judging"),
    description="A panel judges the stored sets and MT-Bench's model pairs in both orders; every judge's agreement "
    "with humans (and the flags an era's panel gets); the MT-Bench leaderboard.",
)

mt_bench_grading_job = define_asset_job(
    "mt_bench_grading",
    selection=AssetSelection.groups("mt_bench_grading"),
    description="MT-Bench's single-answer grading (1-10) of the chosen answers by the chosen judges.",
)

JOBS = [
    benchmark_inputs_job,
    model_evaluation_job,
    protocol_scores_job,
    evolution_inputs_job,
    evolution_era_job,
    blind_evaluation_sheet_job,
    blind_evaluation_tally_job,
    blind_evaluation_llm_rater_job,
    judging_inputs_job,
    judging_job,
    mt_bench_grading_job,
]
