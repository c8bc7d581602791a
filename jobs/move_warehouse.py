"""Move a warehouse into another, every row kept: `python -m jobs.move_warehouse` (see eval_platform.move_warehouse)."""

import sys

from eval_platform.move_warehouse import main

if __name__ == "__main__":
    sys.exit(main())
