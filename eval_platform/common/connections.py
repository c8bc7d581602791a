"""Connections to the warehouse: a DuckDB file, taken in turns by short locked connections, or a
DuckLake catalog that many hosts write at once.

A file: each connection is short and holds an exclusive file lock, so steps in parallel processes
take turns instead of failing on DuckDB's single-writer lock; model work happens outside any
connection. A connection that finds the file held (by another run, or a DuckDB session a user
keeps open) says so, waits, and gives up after its timeout with an error naming the holder. A
lake: no lock; the process attaches the catalog once, and a write whose commit conflicts with
another writer's is re-run (common/warehouse/store.py).
"""

from __future__ import annotations

import fcntl
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TypeVar

import duckdb

from eval_platform.common.warehouse import check_schema, ensure_schema, registered_stores
from eval_platform.environment import DEFAULT_DECLARATIONS, DeclarationFolders

T = TypeVar("T")
DuckDBConfig = dict[str, str | bool | int | float | list[str]]  # what duckdb.connect takes as its config


class WarehouseBusyError(TimeoutError):
    """The warehouse stayed locked by another process for longer than the configured wait."""


@contextmanager
def connect(
    database: str,
    data_path: str | None = None,
    config: DuckDBConfig | None = None,
    lock_timeout_s: float = 600.0,
    wait_log_interval_s: float = 10.0,
    commit_retries: int = 5,
    log: Callable[[str], None] = print,
    read_only: bool = False,
    declarations: DeclarationFolders = DEFAULT_DECLARATIONS,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the warehouse with its schema ensured (the views built from declarations,
    from those in `declarations`): the lake `database` names, an in-memory database, or the file,
    locked for the connection's life. `read_only` (the sample viewer's): a connection that cannot
    write, to a warehouse whose schema is this platform's (it is checked, never created or migrated)."""
    config = dict(config or {})
    if database.startswith(LAKE_PREFIX):
        conn = open_lake(database, data_path, commit_retries, config, read_only, declarations)
        try:
            yield conn
        finally:
            conn.close()
        return
    if read_only and not Path(database).exists():
        raise FileNotFoundError(f"No warehouse at {database} yet: materialise an asset first (or set EVAL_WAREHOUSE)")
    if database == ":memory:":
        with duckdb.connect(":memory:") as conn:
            ensure_schema(conn, registered_stores(), declarations)
            yield conn
        return
    Path(database).parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + lock_timeout_s

    def attempt_connect() -> tuple[duckdb.DuckDBPyConnection | None, str]:
        try:
            return duckdb.connect(database, read_only=read_only, config=config), ""
        except duckdb.IOException as error:
            if "lock" not in str(error).lower():
                raise
            return None, f"a DuckDB session ({str(error).splitlines()[0]})"

    def wait(attempt: Callable[[], tuple[T | None, str]]) -> T:
        return _waited(attempt, database, deadline, lock_timeout_s, wait_log_interval_s, log)

    with open(f"{database}.lock", "a+") as lock:
        wait(lambda: _try_flock(lock))
        lock.seek(0)
        lock.truncate()
        lock.write(f"{'reading' if read_only else 'run'} process {os.getpid()}\n")
        lock.flush()
        try:
            conn = wait(attempt_connect)
            try:
                _check_or_ensure_schema(conn, read_only, declarations)
                yield conn
            finally:
                conn.close()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _waited(
    attempt: Callable[[], tuple[T | None, str]],
    database: str,
    deadline: float,
    lock_timeout_s: float,
    wait_log_interval_s: float,
    log: Callable[[str], None],
) -> T:
    """Repeat `attempt` (a result, or None and who holds the warehouse) until it gets a result,
    saying what it waits for, until `deadline` (of `time.monotonic`)."""
    (result, holder), next_log, waited = attempt(), 0.0, time.monotonic()
    while result is None:
        now = time.monotonic()
        if now >= deadline:
            raise WarehouseBusyError(
                f"The warehouse {database} stayed locked for {lock_timeout_s:.0f} s by {holder}; close that "
                "session (or wait for that run) and re-run, or raise lock_timeout_s "
                "(EVAL_WAREHOUSE_LOCK_TIMEOUT_S)."
            )
        if now >= next_log:
            log(
                f"Waiting for the warehouse {database} ({now - waited:.0f} s so far, giving up after "
                f"{lock_timeout_s:.0f} s): it is held by {holder}"
            )
            next_log = now + wait_log_interval_s
        time.sleep(0.2)
        result, holder = attempt()
    return result


LAKE_PREFIX = "ducklake:"
LAKE_ALIAS = "lake"


def lake_extensions() -> str:
    """The folder of the ducklake and postgres extensions that the duckdb-ext-* wheels install
    (DuckDB cannot download them offline)."""
    import duckdb_ext  # pyright: ignore[reportMissingImports]  (the team install's wheel only)

    return str(Path(next(iter(duckdb_ext.__path__))) / "extensions")


class _AttachedLakes:
    """The DuckDB instance of this process with a DuckLake catalog attached, one per catalog, data
    path and DuckDB config (the resource's `connection_config`, e.g. `memory_limit`). Loading the
    extensions and attaching the catalog cost about 0.2 s against a local PostgreSQL (more against
    a remote one); a store's connection is a cursor of the attached instance, a connection of its
    own with its own transaction."""

    def __init__(self):
        self._lock = threading.Lock()
        self._instances: dict[tuple, duckdb.DuckDBPyConnection] = {}
        self._inherited: list[duckdb.DuckDBPyConnection] = []
        os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        """A forked child attaches its own instances. The parent's are kept, never used nor closed:
        closing them would close the PostgreSQL connections the parent still uses."""
        self._lock = threading.Lock()
        self._inherited += self._instances.values()
        self._instances = {}

    def connection(
        self, catalog: str, data_path: str, config: DuckDBConfig, read_only: bool = False
    ) -> tuple[duckdb.DuckDBPyConnection, bool]:
        """A new connection to the attached catalog (attached read-only for `read_only`), and
        whether the instance was attached just now."""
        key = (*_lake_key(catalog, data_path, config), read_only)
        with self._lock:
            instance = self._instances.get(key)
            if instance is not None:
                return instance.cursor(), False
            instance = duckdb.connect(
                config={**config, "extension_directory": lake_extensions(), "autoinstall_known_extensions": False}
            )
            try:
                instance.execute("LOAD ducklake")
                if ":postgres:" in f"{catalog}:":
                    instance.execute("LOAD postgres")
                mode = ", READ_ONLY" if read_only else ""
                instance.execute(f"ATTACH '{catalog}' AS {LAKE_ALIAS} (DATA_PATH '{data_path}'{mode})")
            except BaseException:
                instance.close()
                raise
            self._instances[key] = instance
            return instance.cursor(), True

    def forget(self, catalog: str, data_path: str, config: DuckDBConfig, read_only: bool = False) -> None:
        """Attach the catalog anew at the next connection (after an error on this instance). The
        instance is not closed: connections in use keep it until they close."""
        with self._lock:
            self._instances.pop((*_lake_key(catalog, data_path, config), read_only), None)

    def close(self) -> None:
        """Detach every catalog (their PostgreSQL connections close)."""
        with self._lock:
            for instance in self._instances.values():
                instance.close()
            self._instances.clear()


def _lake_key(catalog: str, data_path: str, config: DuckDBConfig) -> tuple:
    return catalog, data_path, tuple(sorted((name, str(value)) for name, value in config.items()))


ATTACHED_LAKES = _AttachedLakes()


def _check_or_ensure_schema(conn: duckdb.DuckDBPyConnection, read_only: bool, declarations: DeclarationFolders) -> None:
    """A reader's check of the schema, or a writer's schema ensured (its views from `declarations`)."""
    if read_only:
        check_schema(conn, registered_stores())
    else:
        ensure_schema(conn, registered_stores(), declarations)


def open_lake(
    catalog: str,
    data_path: str | None,
    commit_retries: int,
    config: DuckDBConfig,
    read_only: bool,
    declarations: DeclarationFolders,
) -> duckdb.DuckDBPyConnection:
    """A connection whose current database is the DuckLake `catalog` (attached with the DuckDB
    `config`), its schema ensured, its views from `declarations` (`read_only`: attached read-only,
    its schema checked). The catalog's password comes from the environment (PGPASSWORD for a
    PostgreSQL catalog), never from the catalog string, which the UI shows."""
    if re.search(r"password\s*=|://[^/@\s]*:[^/@\s]*@", catalog, re.IGNORECASE):
        raise ValueError(
            "The lake warehouse's catalog string holds a password, which the UI would show: set it in "
            "the environment instead (PGPASSWORD for a PostgreSQL catalog)"
        )
    if not data_path:
        raise ValueError(
            f"The lake warehouse {catalog} needs a data_path (EVAL_LAKE_DATA_PATH): a folder every "
            "host sees, or an object-store URL"
        )
    attempt = 0
    while True:
        conn, attached_now = None, True
        try:
            conn, attached_now = ATTACHED_LAKES.connection(catalog, data_path, config, read_only)
            conn.execute(f"USE {LAKE_ALIAS}")
            _check_or_ensure_schema(conn, read_only, declarations)
            return conn
        except BaseException as error:
            if conn is not None:
                conn.close()
            if isinstance(error, Exception) and not attached_now:  # its catalog's server may have restarted since
                ATTACHED_LAKES.forget(catalog, data_path, config, read_only)
                continue
            # Hosts creating a new lake, or its tables, at once: one wins, the others try again.
            racing = isinstance(
                error, (duckdb.TransactionException, duckdb.CatalogException, duckdb.ConstraintException)
            ) or "initialize DuckLake" in str(error)
            if not racing or attempt == commit_retries:
                raise
            time.sleep(0.2 * 2**attempt * (1 + random.random()))
            attempt += 1


def _try_flock(lock: IO[str]) -> tuple[bool | None, str]:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True, ""
    except BlockingIOError:
        lock.seek(0)
        return None, lock.read().strip() or "another run"
