"""The blind-evaluation domain's store: its schema (schema.py) and the store that reads and writes
it (sheets.py)."""

from eval_platform.blind.store.schema import BlindSchema
from eval_platform.blind.store.sheets import BlindStore

__all__ = ["BlindSchema", "BlindStore"]
