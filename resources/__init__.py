"""Resources, configured in one place: the DuckDB warehouse and the language model under evaluation."""

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path

from dagster import ConfigurableResource
from dagster_duckdb import DuckDBResource
from pydantic import Field

from evaluation_logic.gateway import ModelGateway
from evaluation_logic.local_model import DEFAULT_CACHE_DIR, DEFAULT_LOCAL_MODEL, is_local_model, load_local_model
from evaluation_logic.warehouse import ensure_tables

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = PROJECT_ROOT / "data"
DEFAULT_WAREHOUSE = os.environ.get("EVAL_WAREHOUSE", str(DATA_DIR / "warehouse.duckdb"))
BLIND_EVAL_DIR = Path(os.environ.get("EVAL_BLIND_DIR", str(DATA_DIR / "blind_eval")))
WAREHOUSE_POOL = "duckdb_warehouse"


class WarehouseResource(DuckDBResource):
    """The DuckDB warehouse file. Each connection is short and holds an exclusive file lock, so
    steps in parallel processes (Dagster's multiprocess executor) take turns instead of failing on
    DuckDB's single-writer lock; model work happens outside any connection."""

    @contextmanager
    def get_connection(self):
        if self.database != ":memory:":
            Path(self.database).parent.mkdir(parents=True, exist_ok=True)
        with open(f"{self.database}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with super().get_connection() as conn:
                    ensure_tables(conn)
                    yield conn
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


class LanguageModelResource(ConfigurableResource):
    """The model under evaluation: `local/smollm2-135m-instruct` (offline default), `local/<path or
    hub id>` for any Hugging Face causal LM, or a litellm provider string such as `openai/gpt-4o-mini`."""

    model: str = Field(default=DEFAULT_LOCAL_MODEL)
    batch_size: int = Field(default=8, description="Items per forward pass.")
    max_new_tokens: int = Field(default=160, description="Generation budget per answer (GSM8K).")
    model_cache_dir: str = Field(default=str(DEFAULT_CACHE_DIR), description="Where converted weights are kept.")
    api_base: str | None = Field(default=None, description="Base URL of an OpenAI-compatible server.")

    def load(self):
        if is_local_model(self.model):
            return load_local_model(self.model, self.model_cache_dir)
        from evaluation_logic.api_model import ApiChatModel

        return ApiChatModel(self.model, api_base=self.api_base)


class ModelGatewayResource(ConfigurableResource):
    """The one gateway for text generation (compression, mutation, judges, blind-evaluation answers).
    API keys are read from the environment by litellm (OPENAI_API_KEY, ANTHROPIC_API_KEY,
    GEMINI_API_KEY, ...) and are never part of this configuration."""

    api_base: str | None = Field(default=None, description="Base URL of an OpenAI-compatible server.")
    timeout_s: float = Field(default=60.0)
    max_retries: int = Field(default=3, description="Retries on timeouts, connection errors, 429 and 5xx.")
    backoff_s: float = Field(default=0.5, description="First retry delay; doubles on each retry.")
    max_concurrency: int = Field(default=8, description="Calls in flight at once.")

    def gateway(self) -> ModelGateway:
        return ModelGateway(api_base=self.api_base, timeout_s=self.timeout_s, max_retries=self.max_retries,
                            backoff_s=self.backoff_s, max_concurrency=self.max_concurrency)
