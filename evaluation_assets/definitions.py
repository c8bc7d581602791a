"""The code location, also loadable as `evaluation_assets.definitions` (see workspace.yaml)."""

from eval_platform.definitions import defs

__all__ = ["defs"]
