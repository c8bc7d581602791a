"""Named jobs of the code location (thin: the code lives in `eval_platform.jobs`)."""

from eval_platform.jobs import ALL_JOBS

__all__ = ["ALL_JOBS"]
