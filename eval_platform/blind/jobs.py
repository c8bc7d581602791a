"""The blind-evaluation jobs: issue the sheet, tally the filled sheets, add an LLM rater."""

from dagster import AssetSelection, define_asset_job

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

BLIND_JOBS = [blind_evaluation_sheet_job, blind_evaluation_tally_job, blind_evaluation_llm_rater_job]
