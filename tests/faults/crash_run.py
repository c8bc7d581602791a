"""A scenario in its own process that SIGKILLs itself in the middle of a write: right after the
n-th INSERT into `table` has run, inside its transaction, before the commit.

    python -m tests.faults.crash_run WAREHOUSE TABLE N SCENARIO [ARGUMENT ...]
"""

import os
import re
import signal
import sys

from eval_platform.stores.warehouse import Store
from tests.faults.scenarios import SCENARIOS


def kill_after_insert(table: str, n: int) -> None:
    run_statement, inserts = Store.sql, [0]

    def sql(self, statement, params=()):
        result = run_statement(self, statement, params)
        if re.match(rf"\s*INSERT( OR IGNORE)? INTO {table}\b", statement):
            inserts[0] += 1
            if inserts[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
        return result

    Store.sql = sql


if __name__ == "__main__":
    path, table, n, scenario, *arguments = sys.argv[1:]
    kill_after_insert(table, int(n))
    SCENARIOS[scenario](path, *arguments)
    sys.exit(3)  # the write was never reached
