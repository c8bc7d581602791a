"""The main command: `python -m jobs.run_all` materialises the whole graph offline (see eval_platform.main)."""

import sys

from eval_platform.main import main

if __name__ == "__main__":
    sys.exit(main())
