"""A scenario in its own process that SIGKILLs itself in the middle of a write: right after the
n-th INSERT into or DELETE FROM `table` has run (inside its transaction, before the commit), or
right after the n-th transaction that wrote `table` has committed.

    python -m tests.faults.crash_run WAREHOUSE INSERT|DELETE|COMMIT TABLE N SCENARIO [ARGUMENT ...]
"""

import os
import re
import signal
import sys
from contextlib import contextmanager

from eval_platform.common.warehouse import Store
from tests.faults.scenarios import SCENARIOS

STATEMENTS = {"INSERT": r"\s*INSERT( OR IGNORE)? INTO {table}\b", "DELETE": r"\s*DELETE FROM {table}\b"}


def kill_at(point: str, table: str, n: int) -> None:
    run_statement, open_transaction = Store.sql, Store.transaction
    seen, wrote_table = [0], [False]

    def count() -> None:
        seen[0] += 1
        if seen[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)

    def sql(self, statement, params=()):
        result = run_statement(self, statement, params)
        if point in STATEMENTS and re.match(STATEMENTS[point].format(table=table), statement):
            count()
        wrote_table[0] |= bool(re.match(rf"\s*(INSERT( OR IGNORE)? INTO|DELETE FROM) {table}\b", statement))
        return result

    @contextmanager
    def transaction(self):
        wrote_table[0] = False
        with open_transaction(self):
            yield
        if point == "COMMIT" and wrote_table[0]:
            count()

    Store.sql, Store.transaction = sql, transaction


if __name__ == "__main__":
    path, point, table, n, scenario, *arguments = sys.argv[1:]
    kill_at(point, table, int(n))
    SCENARIOS[scenario](path, *arguments)
    sys.exit(3)  # the kill point was never reached
