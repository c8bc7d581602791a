"""The platform's assets and asset checks (thin: the code lives in `eval_platform`, by domain)."""

from eval_platform.benchmarks.assets import (
    benchmark_fewshot_rows,
    benchmark_predictions,
    benchmark_prompts,
    benchmark_raw_rows,
    benchmark_scores,
    harness_evaluation,
    harness_model_comparison,
    leaderboard,
    model_comparison,
    normalized_protocol_scores,
    protocol_scores,
)
from eval_platform.blind.assets import (
    blind_eval_answers,
    blind_eval_llm_rating,
    blind_eval_questions,
    blind_eval_scores,
    blind_eval_sheet,
    blind_eval_tally,
)
from eval_platform.definitions import ALL_CHECKS
from eval_platform.evolution.assets import (
    era_summary,
    evolution_era,
    gene_pools,
    judge_analysis,
    pareto_front,
    source_paragraphs,
)

__all__ = [
    "ALL_CHECKS",
    "benchmark_fewshot_rows",
    "benchmark_predictions",
    "benchmark_prompts",
    "benchmark_raw_rows",
    "benchmark_scores",
    "harness_evaluation",
    "harness_model_comparison",
    "leaderboard",
    "model_comparison",
    "normalized_protocol_scores",
    "protocol_scores",
    "blind_eval_answers",
    "blind_eval_llm_rating",
    "blind_eval_questions",
    "blind_eval_scores",
    "blind_eval_sheet",
    "blind_eval_tally",
    "era_summary",
    "evolution_era",
    "gene_pools",
    "judge_analysis",
    "pareto_front",
    "source_paragraphs",
]
