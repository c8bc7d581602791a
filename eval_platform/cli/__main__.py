import sys

from eval_platform.cli.main import main

sys.exit(main())
