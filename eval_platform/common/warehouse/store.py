"""The base of the stores: one domain's tables and views over one connection, with named reads and
writes in plain DuckDB SQL.

Every write is one transaction. On a DuckLake catalog it first claims each table it writes (a row of
`write_claims`), because DuckLake sees no conflict between two writers that each found a partition
empty and inserted it: both would commit, and the partition would hold both. With the claim, two
writes of one table conflict, and the later commit is retried (the write re-run whole, reading what
the first wrote); one that outlasts its retries fails naming the tables and the partition. A lake
has no keys: a table is created without them, and each write replaces its partition's rows.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar

import duckdb
import pandas as pd

from eval_platform.common.warehouse.access import TABLE_NAMES, check_declared
from eval_platform.common.warehouse.catalog import is_lake, scalar
from eval_platform.common.warehouse.schema import ddl_columns, table_key, without_keys
from eval_platform.environment import DeclarationFolders

CLAIMS_TABLE = "write_claims"  # a lake's: one row per table, updated by each write of it
Migration = Callable[[duckdb.DuckDBPyConnection], None]  # a store's tables from one version to the next

_STORES: dict[str, type[Store]] = {}


class SchemaError(RuntimeError):
    """A warehouse whose schema this version of the platform cannot use, or a write that does not
    match its table."""


class CommitConflictError(RuntimeError):
    """A write whose commit kept conflicting with other writers' (a lake warehouse)."""


def utc_now() -> datetime:
    """The current UTC time as a naive timestamp, as DuckDB's TIMESTAMP columns store it."""
    return datetime.now(UTC).replace(tzinfo=None)


def registered_stores() -> tuple[type[Store], ...]:
    """Every store defined so far, in the order defined."""
    return tuple(_STORES.values())


def view_digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:16]


class Store:
    """One domain's tables over one connection. Subclasses set `name`, `version`, `tables`,
    `views` and `migrations` (version k -> k + 1), and define named reads and writes."""

    name: ClassVar[str]
    version: ClassVar[int]
    tables: ClassVar[Mapping[str, str]]
    views: ClassVar[Mapping[str, str]] = {}
    # views whose definition is built when the schema is ensured, from the declarations in the
    # folders the connection is given, by name
    dynamic_views: ClassVar[Mapping[str, Callable[[DeclarationFolders], str]]] = {}
    migrations: ClassVar[Mapping[int, Migration]] = {}

    def __init__(self, conn: duckdb.DuckDBPyConnection, commit_retries: int = 5, retry_backoff_s: float = 0.2):
        self.conn = conn
        self.commit_retries = commit_retries
        self.retry_backoff_s = retry_backoff_s
        self.lake = is_lake(conn)
        self.in_transaction = False  # a write's, which the writes it calls join

    def __init_subclass__(cls, **kwargs: object) -> None:
        """A class that names a store (sets `name`) registers it: the warehouse creates and migrates
        its tables, and the undeclared-table check knows their names."""
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            _STORES[cls.name] = cls
            TABLE_NAMES.update(cls.owned())

    @classmethod
    def owned(cls) -> set[str]:
        """The names of the store's tables and views."""
        return set(cls.tables) | set(cls.views) | set(cls.dynamic_views)

    @classmethod
    def oldest_version(cls) -> int:
        """The oldest schema version this platform migrates the store's tables from: where the
        unbroken run of `migrations` up to `version` starts."""
        oldest = cls.version
        while oldest - 1 in cls.migrations:
            oldest -= 1
        return oldest

    @classmethod
    def view_definitions(cls, declarations: DeclarationFolders) -> dict[str, str]:
        """Every view's definition: the fixed ones and those built now from `declarations`."""
        return {**cls.views, **{name: build(declarations) for name, build in cls.dynamic_views.items()}}

    # --- statements ---------------------------------------------------------------------------

    def sql(self, statement: str, params: Sequence[object] = ()) -> duckdb.DuckDBPyConnection:
        """Run one statement; it may name only the tables its method declared."""
        check_declared(type(self).__name__, statement)
        return self.conn.execute(statement, list(params))

    def value(self, statement: str, params: Sequence[object] = ()) -> Any:
        """The first value of the query's first row (an aggregate's, which always has one)."""
        check_declared(type(self).__name__, statement)
        return scalar(self.conn, statement, params)

    def rows(self, statement: str, params: Sequence[object] = ()) -> list[dict[str, Any]]:
        """Query results as dicts with plain Python values (lists stay lists)."""
        cursor = self.sql(statement, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=False)) for row in cursor.fetchall()]

    def frame(self, statement: str, params: Sequence[object] = ()) -> pd.DataFrame:
        return self.sql(statement, params).df()

    def frame_of_rows(self, statement: str, params: Sequence[object] = ()) -> pd.DataFrame:
        """Query results as a frame of plain Python values (NULL stays None, lists stay lists)."""
        cursor = self.sql(statement, params)
        return pd.DataFrame(cursor.fetchall(), columns=[d[0] for d in cursor.description])

    # --- writes -------------------------------------------------------------------------------

    def retrying_conflicts(
        self,
        method: Callable[..., object],
        tables: Sequence[str],
        args: tuple[object, ...],
        kwargs: Mapping[str, object],
    ) -> object:
        """Run a write in one transaction, re-running it whole when its commit conflicts with
        another writer's."""
        for attempt in range(self.commit_retries + 1):
            try:
                with self.transaction():
                    if self.lake:  # any other write of these tables now conflicts with this one
                        self.sql(
                            f"UPDATE {CLAIMS_TABLE} SET claims = claims + 1 WHERE table_name IN "
                            f"({', '.join('?' * len(tables))})",
                            tables,
                        )
                    return method(self, *args, **kwargs)
            except duckdb.TransactionException as error:
                try:
                    self.conn.execute("ROLLBACK")
                except duckdb.Error:
                    pass  # the failed commit ended the transaction already
                if attempt == self.commit_retries:
                    partition = ", ".join(str(a) for a in [*args, *kwargs.values()] if isinstance(a, (str, int)))
                    raise CommitConflictError(
                        f"{type(self).__name__}.{method.__name__}({partition}): the write to {', '.join(tables)} "
                        f"conflicted with another writer's {attempt + 1} times; the last: "
                        f"{str(error).splitlines()[0]}"
                    ) from error
                time.sleep(self.retry_backoff_s * 2**attempt * (1 + random.random()))

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN TRANSACTION")
        self.in_transaction = True
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        finally:
            self.in_transaction = False
        self.conn.execute("COMMIT")

    def insert(self, table: str, frame: pd.DataFrame | None, select: str = "*", ignore_duplicates: bool = False) -> int:
        """Insert a frame's columns by name (`select` may compute columns from it; no frame: nothing);
        with `ignore_duplicates`, rows whose key is already there are skipped."""
        if frame is None or not len(frame):
            return 0
        with self.registered("incoming", frame):
            self._check_columns(
                table, [row[0] for row in self.conn.execute(f"DESCRIBE SELECT {select} FROM incoming").fetchall()]
            )
            unseen = ""
            if ignore_duplicates:
                key = table_key(type(self).tables[table])
                unseen = (
                    f" WHERE ({', '.join(key)}) NOT IN (SELECT ({', '.join(key)}) FROM {table}) "
                    f"QUALIFY row_number() OVER (PARTITION BY {', '.join(key)}) = 1"
                )
            self.sql(f"INSERT INTO {table} BY NAME SELECT {select} FROM incoming{unseen}")
        return len(frame)

    @contextmanager
    def registered(self, name: str, frame: pd.DataFrame) -> Iterator[None]:
        """The frame as the view `name` for the block's statements. After a failed statement it is
        left registered (the aborted transaction refuses to unregister it, and would raise that
        instead of the statement's own error); the next registration of the name replaces it."""
        self.conn.register(name, frame)
        yield
        self.conn.unregister(name)

    def _check_columns(self, table: str, written: Sequence[str]) -> None:
        """A write names every column of its table (those with a default may be left out) and no
        other: a misspelt or forgotten column fails here, naming it, instead of storing NULL."""
        columns = dict(
            self.conn.execute(
                "SELECT column_name, column_default FROM duckdb_columns() "
                "WHERE table_name = ? AND database_name = current_database()",
                [table],
            ).fetchall()
        )
        unknown = [name for name in written if name not in columns]
        missing = [name for name, default in columns.items() if name not in written and default is None]
        problems = []
        if unknown:
            problems.append(f"no such column {', '.join(unknown)}")
        if missing:
            problems.append(f"missing {', '.join(missing)}")
        if problems:
            raise SchemaError(f"A write to {table} does not match its columns: {'; '.join(problems)}")

    def replace(
        self,
        table: str,
        frame: pd.DataFrame | None,
        where: str = "TRUE",
        params: Sequence[object] = (),
        select: str = "*",
    ) -> int:
        """Delete the rows matching `where`, then insert the frame (in the write's transaction)."""
        self.sql(f"DELETE FROM {table} WHERE {where}", params)
        return self.insert(table, frame, select)

    def rows_frame(
        self, table: str, rows: Sequence[Mapping[str, object]], **constants: str | datetime
    ) -> pd.DataFrame | None:
        """Rows as a frame of the table's columns (a column a row leaves out is NULL), or None."""
        if not rows:
            return None
        frame = pd.DataFrame(list(rows)).assign(**constants)
        unknown = sorted(set(frame.columns) - set(ddl_columns(type(self).tables[table])))
        if unknown:
            raise SchemaError(f"A write to {table} does not match its columns: no such column {', '.join(unknown)}")
        return frame.reindex(columns=ddl_columns(type(self).tables[table]))

    def replace_together(self, where: str, params: Sequence[object], **frames: pd.DataFrame) -> None:
        """Replace the rows matching `where` of every table named in `frames` with that frame (in
        the write's transaction: a partition's tables change together or not at all)."""
        for table, frame in frames.items():
            self.replace(table, frame, where, params)

    # --- schema -------------------------------------------------------------------------------

    @classmethod
    def create(cls, conn: duckdb.DuckDBPyConnection, declarations: DeclarationFolders) -> None:
        """The store's tables the warehouse lacks (on a lake, without keys, each with its claim row),
        and its views (those built from declarations, from `declarations`)."""
        lake = is_lake(conn)
        for table, columns in cls.tables.items():
            conn.execute(f"CREATE TABLE IF NOT EXISTS {table} ({without_keys(columns) if lake else columns})")
        if lake:  # each table's claim row, in the transaction that creates the table
            conn.execute(
                f"INSERT INTO {CLAIMS_TABLE} SELECT unnest(?::VARCHAR[]), 0 EXCEPT "
                f"SELECT table_name, 0 FROM {CLAIMS_TABLE}",
                [list(cls.tables)],
            )
        cls.create_views(conn, declarations)

    @classmethod
    def create_views(cls, conn: duckdb.DuckDBPyConnection, declarations: DeclarationFolders) -> None:
        """Create or replace each view, commented with its definition's digest (so a view whose
        definition changed since, e.g. `leaderboard_wide` with a column per benchmark, is rebuilt)."""
        for view, body in cls.view_definitions(declarations).items():
            conn.execute(f"CREATE OR REPLACE VIEW {view} AS {body}")
            conn.execute(f"COMMENT ON VIEW {view} IS '{view_digest(body)}'")
