"""The judging domain's store: its schema (schema.py), its views (views/*.sql) and the store class
that reads and writes it (judgments.py)."""

from eval_platform.judging.store.judgments import JudgingStore
from eval_platform.judging.store.schema import JudgingSchema

__all__ = ["JudgingSchema", "JudgingStore"]
