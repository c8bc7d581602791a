"""Resources, configured in one place: the DuckDB warehouse, the model gateway and the model under
evaluation."""

from __future__ import annotations

import fcntl
import os
import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from dagster import ConfigurableResource, get_dagster_logger
from dagster_duckdb import DuckDBResource
from pydantic import Field, create_model

from eval_platform.common.gateway import ModelGateway
from eval_platform.common.models import LanguageModel, ModelSettings, open_model
from eval_platform.common.warehouse import Store, ensure_schema, registered_stores

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = PROJECT_ROOT / "data"
DEFAULT_WAREHOUSE = os.environ.get("EVAL_WAREHOUSE", str(DATA_DIR / "warehouse.duckdb"))
BLIND_EVAL_DIR = Path(os.environ.get("EVAL_BLIND_DIR", str(DATA_DIR / "blind_eval")))
WAREHOUSE_POOL = "duckdb_warehouse"
LOCK_TIMEOUT_S = float(os.environ.get("EVAL_WAREHOUSE_LOCK_TIMEOUT_S", "600"))

S = TypeVar("S", bound=Store)


class WarehouseBusyError(TimeoutError):
    """The warehouse stayed locked by another process for longer than the configured wait."""


class WarehouseResource(DuckDBResource):
    """The warehouse: a DuckDB file (the default), or a DuckLake catalog that many hosts write at
    once (`database` = `ducklake:postgres:dbname=... host=...`, its data files under `data_path`).

    A file: each connection is short and holds an exclusive file lock, so steps in parallel
    processes take turns instead of failing on DuckDB's single-writer lock; model work happens
    outside any connection. A run that finds the file held (by another run, or a DuckDB session a
    user keeps open) says so in its log, waits, and gives up after `lock_timeout_s` with an error
    naming the holder. A lake: no lock; the process attaches the catalog once, and a write whose
    commit conflicts with another writer's is re-run, up to `commit_retries` times."""

    lock_timeout_s: float = Field(default=LOCK_TIMEOUT_S, description="How long to wait for the warehouse file.")
    wait_log_interval_s: float = Field(default=10.0, description="How often a waiting run says what it waits for.")
    data_path: str | None = Field(
        default=os.environ.get("EVAL_LAKE_DATA_PATH"),
        description="A DuckLake warehouse's data files: a folder every host sees (or an "
        "object-store URL). Default: EVAL_LAKE_DATA_PATH.",
    )
    commit_retries: int = Field(default=5, description="A lake: how often a conflicting commit is re-run.")

    @contextmanager
    def get_connection(self) -> Iterator:
        if self.database.startswith(LAKE_PREFIX):
            conn = open_lake(self.database, self.data_path, self.commit_retries, dict(self.connection_config))
            try:
                yield conn
            finally:
                conn.close()
            return
        if self.database == ":memory:":
            import duckdb

            with duckdb.connect(":memory:") as conn:
                ensure_schema(conn, registered_stores())
                yield conn
            return
        Path(self.database).parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.lock_timeout_s
        with open(f"{self.database}.lock", "a+") as lock:
            self._wait(deadline, lambda: _try_flock(lock))
            lock.seek(0)
            lock.truncate()
            lock.write(f"run process {os.getpid()}\n")
            lock.flush()
            try:
                conn = self._wait(deadline, self._try_connect)
                try:
                    ensure_schema(conn, registered_stores())
                    yield conn
                finally:
                    conn.close()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _try_connect(self):
        import duckdb

        try:
            return duckdb.connect(self.database, config=dict(self.connection_config)), ""
        except duckdb.IOException as error:
            if "lock" not in str(error).lower():
                raise
            return None, f"a DuckDB session ({str(error).splitlines()[0]})"

    def _wait(self, deadline: float, attempt):
        """Repeat `attempt` (returning a result, or None and who holds the warehouse) until it gets
        a result, saying in the run's log what it waits for."""
        (result, holder), next_log, waited = attempt(), 0.0, time.monotonic()
        while result is None:
            now = time.monotonic()
            if now >= deadline:
                raise WarehouseBusyError(
                    f"The warehouse {self.database} stayed locked for {self.lock_timeout_s:.0f} s by {holder}; "
                    "close that session (or wait for that run) and re-run, or raise lock_timeout_s "
                    "(EVAL_WAREHOUSE_LOCK_TIMEOUT_S)."
                )
            if now >= next_log:
                get_dagster_logger().warning(
                    f"Waiting for the warehouse {self.database} ({now - waited:.0f} s so far, giving up after "
                    f"{self.lock_timeout_s:.0f} s): it is held by {holder}"
                )
                next_log = now + self.wait_log_interval_s
            time.sleep(0.2)
            result, holder = attempt()
        return result

    @contextmanager
    def store(self, kind: type[S]) -> Iterator[S]:
        """A domain store over one short connection."""
        with self.get_connection() as conn:
            yield kind(conn, commit_retries=self.commit_retries)


LAKE_PREFIX = "ducklake:"
LAKE_ALIAS = "lake"


def lake_extensions() -> str:
    """The folder of the ducklake and postgres extensions that the duckdb-ext-* wheels install
    (DuckDB cannot download them offline)."""
    import duckdb_ext

    return str(Path(next(iter(duckdb_ext.__path__))) / "extensions")


class _AttachedLakes:
    """The DuckDB instance of this process with a DuckLake catalog attached, one per catalog, data
    path and DuckDB config (the resource's `connection_config`, e.g. `memory_limit`). Loading the extensions and attaching the catalog cost about 0.2 s against a local
    PostgreSQL (more against a remote one); a store's connection is a cursor of the attached
    instance, a connection of its own with its own transaction."""

    def __init__(self):
        self._lock = threading.Lock()
        self._instances: dict[tuple, Any] = {}
        self._inherited: list[Any] = []
        os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        """A forked child attaches its own instances. The parent's are kept, never used nor closed:
        closing them would close the PostgreSQL connections the parent still uses."""
        self._lock = threading.Lock()
        self._inherited += self._instances.values()
        self._instances = {}

    def connection(self, catalog: str, data_path: str, config: dict[str, Any]) -> tuple[Any, bool]:
        """A new connection to the attached catalog, and whether the instance was attached just now."""
        import duckdb

        key = _lake_key(catalog, data_path, config)
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
                instance.execute(f"ATTACH '{catalog}' AS {LAKE_ALIAS} (DATA_PATH '{data_path}')")
            except BaseException:
                instance.close()
                raise
            self._instances[key] = instance
            return instance.cursor(), True

    def forget(self, catalog: str, data_path: str, config: dict[str, Any]) -> None:
        """Attach the catalog anew at the next connection (after an error on this instance). The
        instance is not closed: connections in use keep it until they close."""
        with self._lock:
            self._instances.pop(_lake_key(catalog, data_path, config), None)

    def close(self) -> None:
        """Detach every catalog (their PostgreSQL connections close)."""
        with self._lock:
            for instance in self._instances.values():
                instance.close()
            self._instances.clear()


def _lake_key(catalog: str, data_path: str, config: dict[str, Any]) -> tuple:
    return catalog, data_path, tuple(sorted((name, str(value)) for name, value in config.items()))


ATTACHED_LAKES = _AttachedLakes()


def open_lake(catalog: str, data_path: str | None, commit_retries: int, config: dict[str, Any]):
    """A connection whose current database is the DuckLake `catalog` (attached with the DuckDB
    `config`), its schema ensured. The catalog's password comes from the environment (PGPASSWORD for a PostgreSQL catalog), never
    from the catalog string, which the UI shows."""
    import duckdb

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
            conn, attached_now = ATTACHED_LAKES.connection(catalog, data_path, config)
            conn.execute(f"USE {LAKE_ALIAS}")
            ensure_schema(conn, registered_stores())
            return conn
        except BaseException as error:
            if conn is not None:
                conn.close()
            if isinstance(error, Exception) and not attached_now:  # its catalog's server may have restarted since
                ATTACHED_LAKES.forget(catalog, data_path, config)
                continue
            # Hosts creating a new lake, or its tables, at once: one wins, the others try again.
            racing = isinstance(
                error, (duckdb.TransactionException, duckdb.CatalogException, duckdb.ConstraintException)
            ) or "initialize DuckLake" in str(error)
            if not racing or attempt == commit_retries:
                raise
            time.sleep(0.2 * 2**attempt * (1 + random.random()))
            attempt += 1


def _try_flock(lock) -> tuple[bool | None, str]:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True, ""
    except BlockingIOError:
        lock.seek(0)
        return None, lock.read().strip() or "another run"


class ModelGatewayResource(ConfigurableResource):
    """The one gateway for calls to API and served models, whichever asset makes them (benchmark
    predictions, compression, mutation, judges, blind-evaluation answers and rating). API keys are
    read from the environment by litellm (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, ...)
    and are never part of this configuration; a local server that needs no key works with none set."""

    api_base: str | None = Field(
        default=os.environ.get("EVAL_API_BASE"),
        description="Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1, "
        "or of several replicas separated by commas (calls go to each in turn, "
        "a retry to the next); default: EVAL_API_BASE.",
    )
    timeout_s: float = Field(default=60.0, description="Seconds an attempt may take before it is retried.")
    model_timeouts_s: dict[str, float] = Field(
        default={}, description="A model's own timeout, by its model string (e.g. a slow reasoning model's)."
    )
    max_retries: int = Field(default=3, description="Retries on timeouts, connection errors, 429 and 5xx.")
    backoff_s: float = Field(default=0.5, description="First retry delay; doubles on each retry.")
    max_concurrency: int = Field(default=8, description="Calls in flight at once, per server.")

    def gateway(self) -> ModelGateway:
        return ModelGateway(
            api_base=self.api_base,
            timeout_s=self.timeout_s,
            model_timeouts_s=dict(self.model_timeouts_s),
            max_retries=self.max_retries,
            backoff_s=self.backoff_s,
            max_concurrency=self.max_concurrency,
        )


# The resource's config fields are ModelSettings' own, declared there once.
_ModelSettingsConfig = create_model(
    "ModelSettingsConfig",
    __base__=ConfigurableResource,
    **{name: (info.annotation, info) for name, info in ModelSettings.model_fields.items()},
)


class LanguageModelResource(_ModelSettingsConfig):
    """The model under evaluation, and how any model is opened (eras' compressors and judges, blind
    evaluation's answering systems and LLM rater): `local/smollm2-135m-instruct` (offline default),
    `local/<path or hub id>` for any Hugging Face causal LM (on this resource's device and dtype),
    `served/<name>` for a model behind an OpenAI-compatible server (vLLM, llama.cpp, TGI) at the
    gateway's api_base, or a litellm provider string such as `openai/gpt-4o-mini`; API calls go
    through the `gateway` resource (its server, retries, timeout and concurrency)."""

    def settings(self) -> ModelSettings:
        return ModelSettings(**{name: getattr(self, name) for name in ModelSettings.model_fields})

    def open(self, name: str, gateway: ModelGateway) -> LanguageModel:
        """Any model by name with this resource's settings; API and served calls through `gateway`
        (the `gateway` resource's, which the asset takes, so one configuration reaches every model)."""
        return open_model(name, self.settings(), gateway)

    def load(self, gateway: ModelGateway) -> LanguageModel:
        """The model under evaluation."""
        return self.open(self.model, gateway)
