"""Each store's tables in a warehouse at the store's schema version: created in a new warehouse,
migrated step by step from the oldest version this platform carries (`Store.oldest_version`), and
an older or a newer warehouse refused, saying what to do. `schema_versions` records each store's."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from eval_platform.common.warehouse.catalog import existing_tables, existing_views, is_lake, warehouse_name
from eval_platform.common.warehouse.schema import without_keys
from eval_platform.common.warehouse.store import CLAIMS_TABLE, SchemaError, Store, utc_now, view_digest
from eval_platform.environment import DeclarationFolders

SCHEMA_TABLE = "schema_versions"
LEGACY_VERSION = 0  # a warehouse written before schemas were versioned


def _recorded_versions(conn: duckdb.DuckDBPyConnection) -> dict[str, int] | None:
    """Each store's recorded version, or None where the warehouse has no version table."""
    try:
        return dict(conn.execute(f"SELECT store, version FROM {SCHEMA_TABLE}").fetchall())
    except duckdb.CatalogException:
        return None


def _refusal(conn: duckdb.DuckDBPyConnection, store: type[Store], version: int) -> str | None:
    """Why this platform cannot carry the store's tables from `version` to its own (None: it can)."""
    held = (
        f"The warehouse {warehouse_name(conn)}: its {store.name} tables are at schema version {version}"
        if version != LEGACY_VERSION
        else f"The warehouse {warehouse_name(conn)}: its {store.name} tables were written before schema versions"
    )
    if version > store.version:
        return (
            f"{held}, newer than this platform's {store.version}: upgrade the platform, or point EVAL_WAREHOUSE "
            "at another file."
        )
    oldest = store.oldest_version()
    if version < oldest:
        return (
            f"{held}, older than the oldest this platform migrates, version {oldest} (its own is {store.version}). "
            f"To keep its rows, open it once with an earlier version of the platform that migrates it to version "
            f"{oldest} (the changelog names it), then here; or materialise into a new warehouse: point "
            "EVAL_WAREHOUSE at another one, or move this file aside."
        )
    return None


def _stale_views(
    conn: duckdb.DuckDBPyConnection, stores: Sequence[type[Store]], declarations: DeclarationFolders
) -> bool:
    """Whether a view is missing, or was created from another definition than its store's now."""
    current = existing_views(conn)
    return any(
        current.get(view) != view_digest(body)
        for store in stores
        for view, body in store.view_definitions(declarations).items()
    )


def _drop_views(conn: duckdb.DuckDBPyConnection, views: Sequence[str]) -> None:
    """Drop those of `views` that exist as views (a name may be a table of an older schema)."""
    for view in set(views) & set(existing_views(conn)):
        conn.execute(f"DROP VIEW {view}")


def ensure_schema(
    conn: duckdb.DuckDBPyConnection, stores: Sequence[type[Store]], declarations: DeclarationFolders
) -> None:
    """Create, migrate or refuse: two cheap queries when the warehouse is current. A table a store
    declares that the warehouse lacks is created without a version step; a new column of an existing
    table needs one (a migration), which the structure tests hold every table to. The views built from
    declarations are built from those in `declarations`."""
    current = _recorded_versions(conn)
    if current is not None and all(current.get(s.name) == s.version for s in stores):
        existing = existing_tables(conn)
        if all(table in existing for store in stores for table in store.tables) and (
            CLAIMS_TABLE in existing or not is_lake(conn)
        ):
            # a definition changed (a new benchmark's column): rebuilt, rows untouched
            if _stale_views(conn, stores, declarations):
                conn.execute("BEGIN TRANSACTION")
                for store in stores:
                    store.create_views(conn, declarations)
                conn.execute("COMMIT")
            return
        # A table declared since, without a version step: created below, as a new store's are.
    conn.execute("BEGIN TRANSACTION")
    try:
        if current is None:  # a new warehouse, or one from before versioning (with a store's tables)
            legacy = existing_tables(conn)
            columns = "store VARCHAR PRIMARY KEY, version INTEGER NOT NULL, migrated_at TIMESTAMP NOT NULL"
            conn.execute(f"CREATE TABLE {SCHEMA_TABLE} ({without_keys(columns) if is_lake(conn) else columns})")
            current = {s.name: LEGACY_VERSION for s in stores if legacy & set(s.tables)}
        if is_lake(conn):
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {CLAIMS_TABLE} (table_name VARCHAR NOT NULL, claims BIGINT NOT NULL)"
            )
        for store in stores:
            version = current.get(store.name)
            if version is not None:
                refusal = _refusal(conn, store, version)
                if refusal:
                    raise SchemaError(refusal)
                _drop_views(conn, [*store.views, *store.dynamic_views])
                for step in range(version, store.version):
                    store.migrations[step](conn)
            store.create(conn, declarations)  # a new store's tables, or those added since, and the views
            conn.execute(f"DELETE FROM {SCHEMA_TABLE} WHERE store = ?", [store.name])
            conn.execute(f"INSERT INTO {SCHEMA_TABLE} VALUES (?, ?, ?)", [store.name, store.version, utc_now()])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def check_schema(conn: duckdb.DuckDBPyConnection, stores: Sequence[type[Store]]) -> None:
    """A reader's check of the warehouse (it never creates or migrates): each store's tables, where
    the warehouse has them, are at this platform's schema version; otherwise the error says what to do."""
    current = _recorded_versions(conn)
    if current is None:
        raise SchemaError("The warehouse holds no platform tables yet: materialise an asset first")
    for store in stores:
        version = current.get(store.name)
        if version is not None and version != store.version:
            raise SchemaError(
                _refusal(conn, store, version)
                or f"The warehouse {warehouse_name(conn)}: its {store.name} tables are at schema version {version}, "
                f"this platform's are at {store.version}: materialise any asset (or run `eval-platform run`) to "
                "migrate it; a reader only reads."
            )
