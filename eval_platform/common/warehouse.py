"""The DuckDB warehouse: short locked connections, versioned schemas, and the base of the stores.

The warehouse is a DuckDB file, or a DuckLake catalog (many writers on many hosts). A lake has no
PRIMARY KEY or UNIQUE constraints: its tables are created without them, a key is kept by each
write replacing its partition's rows, and `no_duplicate_*` checks guard it. Every write is one
transaction. On a lake it first claims each table it writes (a row of `write_claims`), because
DuckLake sees no conflict between two writers that each found a partition empty and inserted it:
both would commit, and the partition would hold both. With the claim, two writes of one table
conflict, and the later commit is retried (the write re-run whole, reading what the first wrote);
one that outlasts its retries fails naming the tables and the partition.

A store owns one domain's tables and views. It declares them with a schema version, creates them
once per warehouse, migrates an older warehouse step by step, and refuses a newer one. Its named
reads and writes are plain DuckDB SQL; each declares the tables it touches (`@reads`, `@writes`),
and a statement that names a table outside that declaration raises, so the declarations are the
truth that tests check the asset graph against.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

SCHEMA_TABLE = "schema_versions"
CLAIMS_TABLE = "write_claims"  # a lake's: one row per table, updated by each write of it


class SchemaError(RuntimeError):
    """A warehouse whose schema this version of the platform cannot use."""


def utc_now() -> datetime:
    """The current UTC time as a naive timestamp, as DuckDB's TIMESTAMP columns store it."""
    return datetime.now(UTC).replace(tzinfo=None)


# --- declared table access --------------------------------------------------------------------

_STORES: dict[str, type[Store]] = {}
_ALL_TABLE_NAMES: set[str] = set()
_allowed: contextvars.ContextVar[frozenset[str] | None] = contextvars.ContextVar("allowed_tables", default=None)


class CommitConflictError(RuntimeError):
    """A write whose commit kept conflicting with other writers' (a lake warehouse)."""


def _access(kind: str, tables: Sequence[str]) -> Callable:
    def decorate(method: Callable) -> Callable:
        @functools.wraps(method)
        def wrapper(self: Store, *args: Any, **kwargs: Any) -> Any:
            outer = _allowed.get()
            token = _allowed.set(frozenset(tables) | (outer or frozenset()))
            try:
                written = wrapper.table_access["writes"]  # type: ignore[attr-defined]
                if written and not self.in_transaction:  # the outermost write: re-run whole on a conflict
                    return self.retrying_conflicts(method, written, args, kwargs)
                return method(self, *args, **kwargs)
            finally:
                _allowed.reset(token)

        previous = getattr(method, "table_access", {"reads": (), "writes": ()})
        wrapper.table_access = {**previous, kind: tuple(tables)}  # type: ignore[attr-defined]
        return wrapper

    return decorate


def reads(*tables: str) -> Callable:
    """Declare the tables (or views) a store method reads."""
    return _access("reads", tables)


def writes(*tables: str) -> Callable:
    """Declare the tables a store method writes (it may read them too)."""
    return _access("writes", tables)


def table_access(method: Callable) -> dict[str, tuple[str, ...]]:
    """{'reads': (...), 'writes': (...)} as declared on a store method."""
    return getattr(method, "table_access", {"reads": (), "writes": ()})


# --- stores -----------------------------------------------------------------------------------


class Store:
    """One domain's tables over one connection. Subclasses set `name`, `version`, `tables`,
    `views` and `migrations` (version k -> k + 1), and define named reads and writes."""

    name: ClassVar[str]
    version: ClassVar[int]
    tables: ClassVar[Mapping[str, str]]
    views: ClassVar[Mapping[str, str]] = {}
    # views whose definition is built when the schema is ensured (from declarations), by name
    dynamic_views: ClassVar[Mapping[str, Callable[[], str]]] = {}
    migrations: ClassVar[Mapping[int, Callable[[Any], None]]] = {}

    def __init__(self, conn: Any, commit_retries: int = 5, retry_backoff_s: float = 0.2):
        self.conn = conn
        self.commit_retries = commit_retries
        self.retry_backoff_s = retry_backoff_s
        self.lake = is_lake(conn)
        self.in_transaction = False  # a write's, which the writes it calls join

    def retrying_conflicts(self, method: Callable, tables: Sequence[str], args: tuple, kwargs: dict) -> Any:
        """Run a write in one transaction, re-running it whole when its commit conflicts with
        another writer's."""
        import duckdb

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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A class that names a store (sets `name`) registers it: the warehouse creates and migrates
        its tables, and the undeclared-table check knows their names."""
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            _STORES[cls.name] = cls
            _ALL_TABLE_NAMES.update(cls.owned())

    # The names every store owns, to recognise a statement's tables.
    @classmethod
    def owned(cls) -> set[str]:
        return set(cls.tables) | set(cls.views) | set(cls.dynamic_views)

    @classmethod
    def view_definitions(cls) -> dict[str, str]:
        """Every view's definition: the fixed ones and those built now."""
        return {**cls.views, **{name: build() for name, build in cls.dynamic_views.items()}}

    def sql(self, statement: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; it may name only the tables its method declared."""
        allowed = _allowed.get()
        if allowed is not None:
            named = {name for name in _ALL_TABLE_NAMES if re.search(rf"\b{name}\b", statement)}
            undeclared = named - allowed
            if undeclared:
                raise AssertionError(f"{type(self).__name__} touched undeclared table(s) {sorted(undeclared)}")
        return self.conn.execute(statement, list(params))

    def rows(self, statement: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Query results as dicts with plain Python values (lists stay lists)."""
        cursor = self.sql(statement, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=False)) for row in cursor.fetchall()]

    def frame(self, statement: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        return self.sql(statement, params).df()

    def frame_of_rows(self, statement: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        """Query results as a frame of plain Python values (NULL stays None, lists stay lists)."""
        cursor = self.sql(statement, params)
        return pd.DataFrame(cursor.fetchall(), columns=[d[0] for d in cursor.description])

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
        columns = {
            name: default
            for name, default in self.conn.execute(
                "SELECT column_name, column_default FROM duckdb_columns() "
                "WHERE table_name = ? AND database_name = current_database()",
                [table],
            ).fetchall()
        }
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
        self, table: str, frame: pd.DataFrame | None, where: str = "TRUE", params: Sequence[Any] = (), select: str = "*"
    ) -> int:
        """Delete the rows matching `where`, then insert the frame (in the write's transaction)."""
        self.sql(f"DELETE FROM {table} WHERE {where}", params)
        return self.insert(table, frame, select)

    def rows_frame(self, table: str, rows: Sequence[Mapping[str, Any]], **constants: Any) -> pd.DataFrame | None:
        """Rows as a frame of the table's columns (a column a row leaves out is NULL), or None."""
        if not rows:
            return None
        frame = pd.DataFrame(list(rows)).assign(**constants)
        unknown = sorted(set(frame.columns) - set(ddl_columns(type(self).tables[table])))
        if unknown:
            raise SchemaError(f"A write to {table} does not match its columns: no such column {', '.join(unknown)}")
        return frame.reindex(columns=ddl_columns(type(self).tables[table]))

    def replace_together(self, where: str, params: Sequence[Any], **frames: pd.DataFrame) -> None:
        """Replace the rows matching `where` of every table named in `frames` with that frame (in
        the write's transaction: a partition's tables change together or not at all)."""
        for table, frame in frames.items():
            self.replace(table, frame, where, params)

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

    # --- schema -------------------------------------------------------------------------------

    @classmethod
    def create(cls, conn: Any) -> None:
        lake = is_lake(conn)
        for table, columns in cls.tables.items():
            conn.execute(f"CREATE TABLE IF NOT EXISTS {table} ({without_keys(columns) if lake else columns})")
        if lake:  # each table's claim row, in the transaction that creates the table
            conn.execute(
                f"INSERT INTO {CLAIMS_TABLE} SELECT unnest(?::VARCHAR[]), 0 EXCEPT "
                f"SELECT table_name, 0 FROM {CLAIMS_TABLE}",
                [list(cls.tables)],
            )
        cls.create_views(conn)

    @classmethod
    def create_views(cls, conn: Any) -> None:
        """Create or replace each view, commented with its definition's digest (so a view whose
        definition changed since, e.g. `leaderboard_wide` with a column per benchmark, is rebuilt)."""
        for view, body in cls.view_definitions().items():
            conn.execute(f"CREATE OR REPLACE VIEW {view} AS {body}")
            conn.execute(f"COMMENT ON VIEW {view} IS '{view_digest(body)}'")


def is_lake(conn: Any) -> bool:
    """Whether the connection's current database is a DuckLake catalog."""
    return (
        conn.execute("SELECT type FROM duckdb_databases() WHERE database_name = current_database()").fetchone()[0]
        == "ducklake"
    )


_KEY = re.compile(r",\s*PRIMARY KEY\s*\(([^)]*)\)", re.IGNORECASE)
_INLINE_KEY = re.compile(r"^\s*(\w+)\s+[^,]*?\bPRIMARY KEY\b", re.IGNORECASE)


def table_key(columns: str) -> list[str]:
    """The key columns a table's DDL declares."""
    found = _KEY.search(columns)
    if found:
        return [name.strip() for name in found.group(1).split(",")]
    return [match.group(1) for part in columns.split(",") if (match := _INLINE_KEY.match(part))]


def ddl_columns(columns: str) -> list[str]:
    """The column names a table's DDL declares, in order."""
    names, depth, piece = [], 0, ""
    for char in columns + ",":
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            first = piece.split()[0] if piece.split() else ""
            if first and first.upper() not in ("PRIMARY", "UNIQUE"):
                names.append(first)
            piece = ""
        else:
            piece += char
    return names


def without_keys(columns: str) -> str:
    """A table's DDL without its PRIMARY KEY and UNIQUE constraints (which DuckLake lacks)."""
    return re.sub(r"\s+(PRIMARY KEY|UNIQUE)\b", "", _KEY.sub("", columns), flags=re.IGNORECASE)


def view_digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def stale_views(conn: Any, stores: Sequence[type[Store]]) -> bool:
    """Whether a view is missing, or was created from another definition than its store's now."""
    current = dict(
        conn.execute(
            "SELECT view_name, comment FROM duckdb_views() WHERE NOT internal AND database_name = current_database()"
        ).fetchall()
    )
    return any(
        current.get(view) != view_digest(body) for store in stores for view, body in store.view_definitions().items()
    )


def registered_stores() -> tuple[type[Store], ...]:
    """Every store defined so far, in the order defined."""
    return tuple(_STORES.values())


LEGACY_VERSION = 0  # a warehouse written before schemas were versioned


def ensure_schema(conn: Any, stores: Sequence[type[Store]]) -> None:
    """Create, migrate or refuse: two cheap queries when the warehouse is current. A table a store
    declares that the warehouse lacks is created without a version step; a new column of an existing
    table needs one (a migration), which the structure tests hold every table to."""
    try:
        current = dict(conn.execute(f"SELECT store, version FROM {SCHEMA_TABLE}").fetchall())
    except Exception:  # no version table yet: a new warehouse, or one from before versioning
        current = None
    if current is not None and all(current.get(s.name) == s.version for s in stores):
        existing = {
            name
            for (name,) in conn.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
            ).fetchall()
        }
        if all(table in existing for store in stores for table in store.tables) and (
            CLAIMS_TABLE in existing or not is_lake(conn)
        ):
            if stale_views(conn, stores):  # a definition changed (a new benchmark's column): rebuilt, rows untouched
                conn.execute("BEGIN TRANSACTION")
                for store in stores:
                    store.create_views(conn)
                conn.execute("COMMIT")
            return
        # A table declared since, without a version step: created below, as a new store's are.
    conn.execute("BEGIN TRANSACTION")
    try:
        if current is None:
            legacy = {
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database()"
                ).fetchall()
            }
            columns = "store VARCHAR PRIMARY KEY, version INTEGER NOT NULL, migrated_at TIMESTAMP NOT NULL"
            conn.execute(f"CREATE TABLE {SCHEMA_TABLE} ({without_keys(columns) if is_lake(conn) else columns})")
            current = {s.name: LEGACY_VERSION for s in stores if legacy & set(s.tables)}
        if is_lake(conn):
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {CLAIMS_TABLE} (table_name VARCHAR NOT NULL, claims BIGINT NOT NULL)"
            )
        for store in stores:
            version = current.get(store.name)
            if version is not None and version > store.version:
                raise SchemaError(
                    f"The warehouse's {store.name} tables are at schema version {version}, newer than this "
                    f"platform's {store.version}: upgrade the platform, or point EVAL_WAREHOUSE at another file."
                )
            if version is None:
                store.create(conn)
            else:
                drop_views(conn, list(store.view_definitions()))
                for step in range(version, store.version):
                    if step not in store.migrations:
                        raise SchemaError(
                            f"No migration of the {store.name} tables from version {step}; "
                            "move the warehouse file aside to start a new one."
                        )
                    store.migrations[step](conn)
                store.create(conn)  # tables added since, and views
            conn.execute(f"DELETE FROM {SCHEMA_TABLE} WHERE store = ?", [store.name])
            conn.execute(f"INSERT INTO {SCHEMA_TABLE} VALUES (?, ?, ?)", [store.name, store.version, utc_now()])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def check_schema(conn: Any, stores: Sequence[type[Store]]) -> None:
    """A reader's check of the warehouse (it never creates or migrates): each store's tables, where
    the warehouse has them, are at this platform's schema version; otherwise the error says what to do."""
    try:
        current = dict(conn.execute(f"SELECT store, version FROM {SCHEMA_TABLE}").fetchall())
    except Exception as error:  # no version table: a warehouse no materialisation has written yet
        raise SchemaError("The warehouse holds no platform tables yet: materialise an asset first") from error
    for store in stores:
        version = current.get(store.name)
        if version is not None and version != store.version:
            step = (
                "materialise any asset (or run `eval-platform run`) to migrate it; a reader only reads"
                if version < store.version
                else "upgrade the platform"
            )
            raise SchemaError(
                f"The warehouse's {store.name} tables are at schema version {version}, this platform's are at "
                f"{store.version}: {step}."
            )


def rebuild_table(conn: Any, table: str, columns: str, select: str) -> None:
    """Replace a table by one with new columns (e.g. a new primary key), copying rows via `select`
    over the old table, which it can name as `old` (on a DuckLake catalog, without its keys)."""
    conn.execute(f"ALTER TABLE {table} RENAME TO {table}_old")
    conn.execute(f"CREATE TABLE {table} ({without_keys(columns) if is_lake(conn) else columns})")
    conn.execute(f"INSERT INTO {table} BY NAME SELECT {select} FROM {table}_old AS old")
    conn.execute(f"DROP TABLE {table}_old")


def existing_tables(conn: Any) -> set[str]:
    """The names of the tables of the connection's current database."""
    return {
        name
        for (name,) in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
        ).fetchall()
    }


def has_column(conn: Any, table: str, column: str) -> bool:
    return (
        conn.execute(
            "SELECT count(*) FROM duckdb_columns() WHERE table_name = ? AND column_name = ? "
            "AND database_name = current_database()",
            [table, column],
        ).fetchone()[0]
        > 0
    )


def add_column(conn: Any, table: str, column: str, kind: str) -> None:
    """Add a column to a table that lacks it (a table an earlier step created with today's columns
    has it already; one added since is created whole afterwards)."""
    table_exists = conn.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND database_name = current_database()", [table]
    ).fetchone()[0]
    if table_exists and not has_column(conn, table, column):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


def drop_views(conn: Any, views: Sequence[str]) -> None:
    """Drop those of `views` that exist as views (a name may still be a table of an older schema)."""
    existing = {
        r[0]
        for r in conn.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal AND database_name = current_database()"
        ).fetchall()
    }
    for view in set(views) & existing:
        conn.execute(f"DROP VIEW {view}")


# --- moving a warehouse -----------------------------------------------------------------------


def export_tables(conn: Any, stores: Sequence[type[Store]], folder: str) -> dict[str, int]:
    """Every table of `stores` as `<table>.parquet` in `folder` (a form any DuckDB version reads):
    rows per table."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    counts = {}
    for table in sorted(name for store in stores for name in store.tables):
        conn.execute(f"COPY {table} TO '{Path(folder) / table}.parquet' (FORMAT parquet)")
        counts[table] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    return counts


def import_tables(conn: Any, stores: Sequence[type[Store]], source: str) -> dict[str, int]:
    """Copy every table of `stores` from `source` (a warehouse file at this schema version, or a
    folder `export_tables` wrote) into the connection's warehouse, which must hold none of their
    rows, in one transaction: rows per table, each checked equal to the source's."""
    tables = sorted(name for store in stores for name in store.tables)
    folder = Path(source).is_dir()
    if not folder:
        conn.execute(f"ATTACH '{source}' AS moved_from (READ_ONLY)")
    relation = (
        (lambda table: f"read_parquet('{Path(source) / table}.parquet')")
        if folder
        else (lambda table: f"moved_from.main.{table}")
    )
    try:
        occupied = {table: n for table in tables if (n := conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])}
        if occupied:
            raise SchemaError(f"The warehouse to move into already holds rows ({occupied}): move into an empty one.")
        missing = [table for table in tables if folder and not (Path(source) / f"{table}.parquet").exists()]
        if missing:
            raise SchemaError(f"{source} has no export of {', '.join(missing)}: export it again with this version.")
        counts = {}
        conn.execute("BEGIN TRANSACTION")
        try:
            for table in tables:
                conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {relation(table)}")
                counts[table] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                expected = conn.execute(f"SELECT count(*) FROM {relation(table)}").fetchone()[0]
                if counts[table] != expected:
                    raise SchemaError(f"{table}: {counts[table]} rows moved of {expected} in {source}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return counts
    finally:
        if not folder:
            conn.execute("DETACH moved_from")
