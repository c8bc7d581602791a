"""The prompt-evolution domain's store: its schema (schema.py), its views (views/*.sql) and the
stores that read and write it: an era's inputs, the era itself generation by generation, and its
analyses."""

from eval_platform.evolution.store.analysis import EraAnalysisStore
from eval_platform.evolution.store.eras import EraStore
from eval_platform.evolution.store.inputs import EvolutionInputStore
from eval_platform.evolution.store.schema import (
    GENERATION_TABLES,
    PROVIDER_JUDGE_NAMES,
    EvolutionSchema,
    judge_json_schema,
    judge_struct,
)

__all__ = [
    "GENERATION_TABLES",
    "PROVIDER_JUDGE_NAMES",
    "EraAnalysisStore",
    "EraStore",
    "EvolutionInputStore",
    "EvolutionSchema",
    "judge_json_schema",
    "judge_struct",
]
