"""The code location's resources, configured in one place (`RESOURCES`): the folders of declared
benchmarks and protocols, the warehouse, the model gateway, the model under evaluation (and how any
model is opened), and the roster.

Every field can be set from the launchpad or a run config; their defaults come from the environment
(eval_platform/environment.py).

The annotations are evaluated (no `from __future__ import annotations`): Dagster reads a resource's
`ResourceDependency` fields from them when the class is made."""

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import duckdb
from dagster import ConfigurableResource, ResourceDependency, get_dagster_logger
from dagster_duckdb import DuckDBResource
from pydantic import Field, create_model

# Every domain's store: a warehouse opened through the resource is created and migrated whole.
import eval_platform.benchmarks.store
import eval_platform.blind.store
import eval_platform.evolution.store
import eval_platform.judging.store  # noqa: F401
from eval_platform.benchmarks.declarations import Benchmark, declared_benchmarks
from eval_platform.benchmarks.protocols import Protocol, declared_protocols
from eval_platform.benchmarks.roster import RosterEntry, RosterError, load_roster
from eval_platform.common.connections import LAKE_PREFIX, connect
from eval_platform.common.gateway import ModelGateway
from eval_platform.common.models import LanguageModel, ModelSettings, open_model
from eval_platform.common.warehouse import Store
from eval_platform.environment import DeclarationFolders, Environment, environment

S = TypeVar("S", bound=Store)
WAREHOUSE_POOL = "duckdb_warehouse"  # a concurrency pool: runs' warehouse steps in turns on one file
MEMORY_LIMIT = r"^\d+(\.\d+)?\s*[KMGT]i?B$"  # a DuckDB memory limit: 128MB, 1.5 GiB


class DeclarationsResource(ConfigurableResource):
    """The folders benchmarks and protocols are declared in, one YAML file each: set once (here, in
    the launchpad or the environment), read by every resource that uses them: the roster's entries,
    the warehouse's views, the evaluations and the leaderboard."""

    benchmarks_dir: str | None = Field(
        default=None,
        description="The folder of benchmark declarations. Default (unset): EVAL_BENCHMARKS_DIR as the run reads it, "
        "else data/benchmarks/.",
    )
    protocols_dir: str | None = Field(
        default=None,
        description="The folder of protocol declarations. Default (unset): EVAL_PROTOCOLS_DIR as the run reads it, "
        "else data/protocols/.",
    )

    def folders(self) -> DeclarationFolders:
        """Its folders: those it is configured with, else the environment's as it is now."""
        default = environment().declaration_folders
        return DeclarationFolders(
            Path(self.benchmarks_dir) if self.benchmarks_dir else default.benchmarks,
            Path(self.protocols_dir) if self.protocols_dir else default.protocols,
        )


def declaration_folders(declarations: object) -> DeclarationFolders:
    """The folders of a resource's `declarations`: the configured resource's, else (none given, or
    one still to be configured at launch) the environment's as it is now."""
    if isinstance(declarations, DeclarationsResource):
        return declarations.folders()
    return environment().declaration_folders


class WarehouseResource(DuckDBResource):
    """The warehouse: a DuckDB file (the default), or a DuckLake catalog that many hosts write at
    once (`database` = `ducklake:postgres:dbname=... host=...`, its data files under `data_path`).
    See eval_platform/common/connections.py for how a file is taken in turns and a lake attached."""

    database: str = Field(
        default="",
        description="The warehouse: a DuckDB file, or a DuckLake catalog (`ducklake:postgres:...`). Default "
        "(empty): EVAL_WAREHOUSE as the run reads it, else data/warehouse.duckdb.",
    )
    lock_timeout_s: float | None = Field(
        default=None,
        description="How long to wait for the warehouse file. Default (unset): EVAL_WAREHOUSE_LOCK_TIMEOUT_S as "
        "the run reads it.",
    )
    wait_log_interval_s: float = Field(default=10.0, description="How often a waiting run says what it waits for.")
    data_path: str | None = Field(
        default=None,
        description="A DuckLake warehouse's data files: a folder every host sees (or an object-store URL). "
        "Default (unset): EVAL_LAKE_DATA_PATH as the run reads it.",
    )
    commit_retries: int = Field(default=5, description="A lake: how often a conflicting commit is re-run.")
    import_memory_limit: str = Field(
        default="128MB",
        pattern=MEMORY_LIMIT,
        description="DuckDB's memory limit while an import is stored in its one transaction: past it, the "
        "import's uncommitted rows spill to disk, so a log of any size is stored in bounded memory. A file "
        "warehouse's (a lake's connections share one DuckDB instance, limited by its connection_config).",
    )
    # the folders its views (leaderboard_wide) are built from; unset: the environment's
    declarations: ResourceDependency[DeclarationsResource] = None  # pyright: ignore[reportAssignmentType]

    @property
    def location(self) -> str:
        """The warehouse it opens: its `database`, else the environment's, read now."""
        return self.database or environment().warehouse

    @contextmanager
    def get_connection(self) -> Iterator[duckdb.DuckDBPyConnection]:
        settings = environment()
        with connect(
            self.location,
            self.data_path or settings.lake_data_path,
            dict(self.connection_config),
            settings.warehouse_lock_timeout_s if self.lock_timeout_s is None else self.lock_timeout_s,
            self.wait_log_interval_s,
            self.commit_retries,
            get_dagster_logger().warning,
            declarations=declaration_folders(self.declarations),
        ) as conn:
            yield conn

    @contextmanager
    def store(self, kind: type[S], memory_limit: str | None = None) -> Iterator[S]:
        """A domain store over one short connection, DuckDB's memory on it bounded by `memory_limit`
        (`import_memory_limit`'s form) where one is given."""
        with self.get_connection() as conn:
            if memory_limit is None or self.location.startswith(LAKE_PREFIX):  # a lake's instance is shared
                yield kind(conn, commit_retries=self.commit_retries)
                return
            if not re.fullmatch(MEMORY_LIMIT, memory_limit):
                raise ValueError(f"memory limit {memory_limit!r} is not a size such as 128MB")
            (previous,) = conn.execute("SELECT current_setting('memory_limit')").fetchone() or ("",)
            conn.execute(f"SET memory_limit = '{memory_limit}'")
            try:
                yield kind(conn, commit_retries=self.commit_retries)
            finally:
                conn.execute(f"SET memory_limit = '{previous}'")

    @contextmanager
    def stores(self, *kinds: type[Store]) -> Iterator[tuple[Any, ...]]:
        """Several stores over one short connection (one lock on a warehouse file)."""
        with self.get_connection() as conn:
            yield tuple(kind(conn, commit_retries=self.commit_retries) for kind in kinds)


class ModelGatewayResource(ConfigurableResource):
    """The one gateway for calls to API and served models, whichever asset makes them (benchmark
    evaluations, compression, mutation, judges, blind-evaluation answers and rating). API keys are
    read from the environment by litellm (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, ...)
    and are never part of this configuration; a local server that needs no key works with none set."""

    api_base: str | None = Field(
        default=None,
        description="Base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1, or of several "
        "replicas separated by commas (calls go to each in turn, a retry to the next); default (unset): "
        "EVAL_API_BASE as the run reads it.",
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
            api_base=self.api_base or environment().api_base,
            timeout_s=self.timeout_s,
            model_timeouts_s=dict(self.model_timeouts_s),
            max_retries=self.max_retries,
            backoff_s=self.backoff_s,
            max_concurrency=self.max_concurrency,
        )


# The resource's config fields are ModelSettings' own, declared there once; the machine's (where
# converted weights are kept, torch's threads) unset default to the environment's, read by `settings`.
_MACHINE: dict[str, tuple[str, Callable[[Environment], Any]]] = {
    "model_cache_dir": ("EVAL_MODEL_CACHE", lambda settings: str(settings.model_cache)),
    "torch_threads": ("EVAL_TORCH_THREADS", lambda settings: settings.torch_threads),
}
_MODEL_SETTINGS: dict[str, Any] = {
    name: (
        cast(Any, info.annotation) | None,
        Field(
            default=None, description=f"{info.description} Default (unset): {_MACHINE[name][0]} as the run reads it."
        ),
    )
    if name in _MACHINE
    else (info.annotation, info)
    for name, info in ModelSettings.model_fields.items()
}
_ModelSettingsConfig: type[ConfigurableResource] = create_model(
    "ModelSettingsConfig", __base__=ConfigurableResource, **_MODEL_SETTINGS
)


class LanguageModelResource(_ModelSettingsConfig):  # type: ignore[misc, valid-type]
    """The model under evaluation, and how any model is opened (eras' compressors and judges, blind
    evaluation's answering systems and LLM rater): `local/smollm2-135m-instruct` (offline default),
    `local/<path or hub id>` for any Hugging Face causal LM (on this resource's device and dtype),
    `served/<name>` for a model behind an OpenAI-compatible server (vLLM, llama.cpp, TGI) at the
    gateway's api_base, or a litellm provider string such as `openai/gpt-4o-mini`; API calls go
    through the `gateway` resource (its server, retries, timeout and concurrency)."""

    def settings(self) -> ModelSettings:
        """Its settings, the machine's that are unset read from the environment now."""
        values = {name: getattr(self, name) for name in ModelSettings.model_fields}
        machine = environment()
        return ModelSettings(
            **{**values, **{n: read(machine) for n, (_, read) in _MACHINE.items() if values[n] is None}}
        )

    def open(self, name: str, gateway: ModelGateway) -> LanguageModel:
        """Any model by name with this resource's settings; API and served calls through `gateway`."""
        return open_model(name, self.settings(), gateway)

    def load(self, gateway: ModelGateway) -> LanguageModel:
        """The model under evaluation."""
        return self.open(self.settings().model, gateway)

    def for_entry(self, entry: RosterEntry) -> "LanguageModelResource":
        """These settings with a roster entry's on top."""
        values = {field: getattr(self, field) for field in ModelSettings.model_fields}
        return LanguageModelResource(**{**values, **entry.model_settings()})


class RosterResource(ConfigurableResource):
    """The roster folder, one file per model, and the imports folder, one file per evaluation made
    elsewhere (eval_platform/benchmarks/roster.py), over the declared benchmarks and protocols they
    name (the `declarations` resource's)."""

    directory: str | None = Field(
        default=None,
        description="The roster folder: one YAML or JSON file per model. Default (unset): EVAL_ROSTER_DIR as the run "
        "reads it, else data/roster/.",
    )
    imports_dir: str | None = Field(
        default=None,
        description="The imports folder: one YAML or JSON file per evaluation made elsewhere (an lm-evaluation-harness "
        "output folder). Default (unset): EVAL_IMPORTS_DIR as the run reads it, else data/imports/.",
    )
    # the folders of the benchmarks and protocols its entries name; unset: the environment's
    declarations: ResourceDependency[DeclarationsResource] = None  # pyright: ignore[reportAssignmentType]

    def folder(self) -> Path:
        """Its roster folder: the one it is configured with, else the environment's at run time."""
        return Path(self.directory) if self.directory else environment().roster_dir

    def imports_folder(self) -> Path:
        """Its imports folder: the one it is configured with, else the environment's at run time."""
        return Path(self.imports_dir) if self.imports_dir else environment().imports_dir

    def benchmarks(self) -> dict[str, Benchmark]:
        return declared_benchmarks(declaration_folders(self.declarations).benchmarks)

    def protocols(self) -> dict[str, Protocol]:
        return declared_protocols(declaration_folders(self.declarations).protocols)

    def entries(self) -> dict[str, RosterEntry]:
        return load_roster(self.folder(), self.benchmarks(), self.protocols(), self.imports_folder())

    def entry(self, name: str) -> RosterEntry:
        roster = self.entries()
        if name not in roster:
            raise RosterError(
                f"No roster entry named {name!r} in {self.folder()} (entries: {sorted(roster)}); add {name}.yaml there"
            )
        return roster[name]


def entry_gateway(entry: RosterEntry, defaults: ModelGatewayResource) -> ModelGatewayResource:
    """The gateway resource's settings, with the roster entry's server where it names one."""
    values = {field: getattr(defaults, field) for field in ModelGatewayResource.model_fields}
    return ModelGatewayResource(**{**values, **({"api_base": entry.api_base} if entry.api_base else {})})


# One `declarations` resource, configured at launch (every field has its default): the roster and
# the warehouse read the folders the launchpad sets for it.
DECLARATIONS = DeclarationsResource.configure_at_launch()
RESOURCES = {
    "declarations": DECLARATIONS,
    "warehouse": WarehouseResource(declarations=DECLARATIONS),
    # Every asset that opens a model takes both, so the launchpad's (or a run config's) `gateway`
    # settings reach every model it opens: the one under evaluation, an era's, blind evaluation's.
    "gateway": ModelGatewayResource(),
    "evaluation_model": LanguageModelResource(),
    # The models the benchmark assets evaluate: the roster folder's entries, over evaluation_model's.
    "roster": RosterResource(declarations=DECLARATIONS),
}
