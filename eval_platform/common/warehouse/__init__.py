"""The DuckDB warehouse's engine: the base of the stores, and each store's schema kept at its version.

The warehouse is a DuckDB file, or a DuckLake catalog (many writers on many hosts). A store owns one
domain's tables and views (`store.py`): it declares them with a schema version, and its named reads
and writes, plain DuckDB SQL, declare the tables they touch (`access.py`). The warehouse creates a
store's tables once, migrates an older warehouse step by step from the oldest version this platform
carries, and refuses an older or a newer one (`migrations.py`). A table's declaration is DDL text
(`schema.py`), what a database holds is asked of its catalog (`catalog.py`), and a warehouse moves
between installs as Parquet (`transfer.py`).
"""

from eval_platform.common.warehouse.access import reads, table_access, writes
from eval_platform.common.warehouse.migrations import SCHEMA_TABLE, check_schema, ensure_schema
from eval_platform.common.warehouse.schema import table_key, without_keys
from eval_platform.common.warehouse.store import (
    CLAIMS_TABLE,
    CommitConflictError,
    SchemaError,
    Store,
    registered_stores,
    utc_now,
)
from eval_platform.common.warehouse.transfer import export_tables, import_tables

__all__ = [
    "CLAIMS_TABLE",
    "SCHEMA_TABLE",
    "CommitConflictError",
    "SchemaError",
    "Store",
    "check_schema",
    "ensure_schema",
    "export_tables",
    "import_tables",
    "reads",
    "registered_stores",
    "table_access",
    "table_key",
    "utc_now",
    "without_keys",
    "writes",
]
