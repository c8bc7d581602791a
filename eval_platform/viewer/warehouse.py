"""The viewer's side of the warehouse: read-only connections (a file is taken in turns with the
runs that write it, a lake is attached read-only; neither is ever created or migrated here), and
query results as typed rows."""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TypeVar

import duckdb

# The stores whose tables the pages read: imported, they are those whose versions a connection checks.
import eval_platform.benchmarks.store
import eval_platform.blind.store
import eval_platform.evolution.store  # noqa: F401
from eval_platform.common.connections import LAKE_PREFIX, WarehouseBusyError, connect
from eval_platform.common.warehouse import SchemaError
from eval_platform.environment import Environment

LOG = logging.getLogger("eval_platform.viewer")
Row = TypeVar("Row")
Connection = duckdb.DuckDBPyConnection  # what the pages' queries run on (they import no DuckDB)
# What a page shows when the warehouse cannot be read: missing, locked too long, or another version.
UNREADABLE = (FileNotFoundError, WarehouseBusyError, SchemaError)
HOLD_S = 1.0  # how long a file's connection stays open after a page, for the next page of a burst


class ViewerInputError(ValueError):
    """A page asked with parameters that name nothing in the warehouse, or cannot be read."""


class WarehouseReadError(RuntimeError):
    """A page's query failed."""


class MissingTableError(WarehouseReadError):
    """A page reads a table the warehouse does not have yet (no run of its domain has written it)."""


@dataclass(frozen=True)
class WarehouseSource:
    """The warehouse the viewer reads: a DuckDB file or a DuckLake catalog (EVAL_WAREHOUSE)."""

    database: str
    data_path: str | None = None
    lock_timeout_s: float = 30.0

    @classmethod
    def from_settings(cls, settings: Environment) -> WarehouseSource:
        """The settings' warehouse, waiting at most 30 s for its lock."""
        return cls(settings.warehouse, settings.lake_data_path, min(settings.warehouse_lock_timeout_s, 30.0))

    def connection(self) -> AbstractContextManager[Connection]:
        """A read-only connection; a file's lock is held while it is open."""
        return connect(
            self.database, self.data_path, lock_timeout_s=self.lock_timeout_s, log=LOG.warning, read_only=True
        )


class Reader:
    """The pages' connections to one warehouse. A file's connection stays open between the pages of
    a burst (opening one costs tens of milliseconds) and closes `hold_s` after the last page, its
    lock released, so that a run waits at most that long to write; while it is open no run writes,
    so every page reads what was committed last. A lake stays attached (connections.py): each page
    takes a connection of its own."""

    def __init__(self, source: WarehouseSource, hold_s: float = HOLD_S) -> None:
        self.source, self.hold_s = source, hold_s
        self._lock = threading.Lock()
        self._opened: AbstractContextManager[Connection] | None = None
        self._conn: Connection | None = None
        self._pages = 0  # pages reading now
        self._last = 0.0

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A read-only connection for one page; a failed query raises WarehouseReadError."""
        with self._connection() as conn:
            try:
                yield conn
            except duckdb.CatalogException as error:
                missing = re.search(r"Table with name (\w+) does not exist", str(error))
                if missing is None:
                    raise WarehouseReadError(f"{type(error).__name__}: {str(error).splitlines()[0]}") from error
                raise MissingTableError(
                    f"This warehouse has no {missing.group(1)} table yet: no run of its domain has written it"
                ) from error
            except duckdb.Error as error:
                raise WarehouseReadError(f"{type(error).__name__}: {str(error).splitlines()[0]}") from error

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        if self.source.database.startswith(LAKE_PREFIX):
            with self.source.connection() as conn:
                yield conn
            return
        with self._lock:
            if self._conn is None:
                opened = self.source.connection()
                self._conn, self._opened = opened.__enter__(), opened
            self._pages += 1
            cursor = self._conn.cursor()
        try:
            yield cursor
        finally:
            cursor.close()
            with self._lock:
                self._pages -= 1
                self._last = time.monotonic()
            timer = threading.Timer(self.hold_s, self._close_when_idle)
            timer.daemon = True
            timer.start()

    def _close_when_idle(self) -> None:
        with self._lock:
            if self._pages == 0 and time.monotonic() - self._last >= self.hold_s * 0.99:
                self._close()

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._opened is not None:
            self._opened.__exit__(None, None, None)
        self._conn = self._opened = None


def found(row: Row | None, missing: str) -> Row:
    """The row a page is about; where there is none, the page says `missing` (a 404)."""
    if row is None:
        raise ViewerInputError(missing)
    return row


def fetch(
    conn: Connection, statement: str, params: Mapping[str, object] | Sequence[object], row: type[Row]
) -> list[Row]:
    """The statement's rows as `row` dataclasses, their fields named by the statement's columns."""
    cursor = conn.execute(statement, params)
    names = [column[0] for column in cursor.description]
    fields = {field.name for field in dataclasses.fields(row)}  # type: ignore[arg-type]
    unknown = [name for name in names if name not in fields]
    if unknown:
        raise TypeError(f"{row.__name__} has no field for the column(s) {unknown}")
    return [row(**dict(zip(names, values, strict=True))) for values in cursor.fetchall()]


def fetch_one(
    conn: Connection, statement: str, params: Mapping[str, object] | Sequence[object], row: type[Row]
) -> Row | None:
    rows = fetch(conn, statement, params, row)
    return rows[0] if rows else None
