"""Named jobs of the code location (thin: the code lives in each domain's `jobs.py`)."""

from eval_platform.definitions import ALL_JOBS

__all__ = ["ALL_JOBS"]
