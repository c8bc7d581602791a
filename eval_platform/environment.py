"""The environment, read in one place: every `EVAL_*` variable the platform reads, with its default.

`environment()` reads the process's environment when called (a test or a process that sets a
variable first sees it), so no module keeps a value it read at import time. The reference page of
the docs lists these fields, generated from this class. The code location and the command line read
it and hand the library its folders and settings as arguments; no other library module reads the
environment. The secrets (API keys) and the variables other libraries read (litellm's, NLTK's) are
read or set by the named functions at the end.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from eval_engine import DEFAULT_CACHE_DIR

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = PROJECT_ROOT / "data"
CACHE_DIR = Path.home() / ".cache"
# The defaults of the folders the library is given (each an Environment field's default below).
MODEL_CACHE = DEFAULT_CACHE_DIR  # the engine's folder of converted weights
HARNESS_INDEX = CACHE_DIR / "eval_platform" / "harness_index"
HARNESS_DATA = CACHE_DIR / "eval_platform" / "harness_format"
CODE_EXECUTION_VARIABLE = "HF_ALLOW_CODE_EVAL"
SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)


@dataclass(frozen=True)
class DeclarationFolders:
    """The folders benchmarks and protocols are declared in, one YAML file each."""

    benchmarks: Path = DATA_DIR / "benchmarks"
    protocols: Path = DATA_DIR / "protocols"


DEFAULT_DECLARATIONS = DeclarationFolders()  # the project's own (data/)


class Environment(BaseModel):
    """The `EVAL_*` environment variables (each field's alias), their defaults and what they set."""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    warehouse: str = Field(
        default=str(DATA_DIR / "warehouse.duckdb"),
        alias="EVAL_WAREHOUSE",
        description="The warehouse: a DuckDB file, or a DuckLake catalog (`ducklake:postgres:...`).",
    )
    lake_data_path: str | None = Field(
        default=None, alias="EVAL_LAKE_DATA_PATH", description="A DuckLake warehouse's data files (a shared folder)."
    )
    warehouse_lock_timeout_s: float = Field(
        default=600.0,
        alias="EVAL_WAREHOUSE_LOCK_TIMEOUT_S",
        description="How long a run waits for a warehouse file another process holds.",
    )
    answer_chunk: int = Field(
        default=1000,
        ge=1,
        alias="EVAL_ANSWER_CHUNK",
        description="An evaluation keeps the answers it computes (a judging panel the verdicts it is given) in the "
        "warehouse in chunks of at most this many (or EVAL_ANSWER_CHUNK_S seconds' worth, whichever comes first): "
        "a run killed mid-way recomputes at most one.",
    )
    answer_chunk_s: float = Field(
        default=60.0,
        gt=0,
        alias="EVAL_ANSWER_CHUNK_S",
        description="The seconds' worth of computed answers (or verdicts) a run keeps at a time "
        "(see EVAL_ANSWER_CHUNK).",
    )
    benchmarks_dir: Path = Field(
        default=DEFAULT_DECLARATIONS.benchmarks,
        alias="EVAL_BENCHMARKS_DIR",
        description="The folder of benchmark declarations (one YAML file per benchmark).",
    )
    protocols_dir: Path = Field(
        default=DEFAULT_DECLARATIONS.protocols,
        alias="EVAL_PROTOCOLS_DIR",
        description="The folder of protocol declarations (one YAML file per protocol).",
    )
    roster_dir: Path = Field(
        default=DATA_DIR / "roster", alias="EVAL_ROSTER_DIR", description="The roster: one YAML file per model."
    )
    imports_dir: Path = Field(
        default=DATA_DIR / "imports",
        alias="EVAL_IMPORTS_DIR",
        description="Evaluations made elsewhere joining the roster: one YAML file per import, naming its file.",
    )
    exports_dir: Path = Field(
        default=DATA_DIR / "exports",
        alias="EVAL_EXPORTS_DIR",
        description="Where evaluations are written as inspect_ai logs (the `inspect_log` asset, `eval-platform "
        "export`), a folder per benchmark.",
    )
    checkpoint_dir: Path = Field(
        default=DATA_DIR / "checkpoints",
        alias="EVAL_CHECKPOINT_DIR",
        description="Where new checkpoint directories become roster entries (the checkpoint sensor).",
    )
    eras_dir: Path = Field(
        default=DATA_DIR / "evolution" / "eras",
        alias="EVAL_ERAS_DIR",
        description="Where era configurations (<era>.json) are dropped (the era sensor and the main command).",
    )
    blind_dir: Path = Field(
        default=DATA_DIR / "blind_eval",
        alias="EVAL_BLIND_DIR",
        description="Blind evaluation's folder: questions, answers, issued and filled sheets.",
    )
    model_cache: Path = Field(
        default=MODEL_CACHE,
        alias="EVAL_MODEL_CACHE",
        description="Where the local model's converted weights are kept.",
    )
    harness_index: Path = Field(
        default=HARNESS_INDEX,
        alias="EVAL_HARNESS_INDEX",
        description="Where the index of lm-evaluation-harness's own task files is cached.",
    )
    harness_data: Path = Field(
        default=HARNESS_DATA,
        alias="EVAL_HARNESS_DATA",
        description="Where a dataset benchmark's documents are written as the harness task's local files.",
    )
    torch_threads: int | None = Field(
        default=None, alias="EVAL_TORCH_THREADS", description="torch's intra-op threads (unset: torch's default)."
    )
    api_base: str | None = Field(
        default=None,
        alias="EVAL_API_BASE",
        description="The model gateway's default server (an OpenAI-compatible URL).",
    )
    nightly_cron: str = Field(
        default="0 2 * * *", alias="EVAL_NIGHTLY_CRON", description="When the nightly refresh runs (cron)."
    )
    timezone: str = Field(default="UTC", alias="EVAL_TIMEZONE", description="The nightly refresh's time zone.")
    max_reject_rate: float = Field(
        default=0.05, alias="EVAL_MAX_REJECT_RATE", description="The reject-rate check's bound per benchmark."
    )
    regression_alpha: float = Field(
        default=0.05,
        alias="EVAL_REGRESSION_ALPHA",
        description="The significance level of the regression and baseline checks (exact McNemar).",
    )
    max_judge_failure_rate: float = Field(
        default=0.34,
        alias="EVAL_MAX_JUDGE_FAILURE_RATE",
        description="The judge-failure check's bound per judge and era.",
    )
    celery_broker: str | None = Field(
        default=None,
        alias="EVAL_CELERY_BROKER",
        description="A Celery broker URL: runs' steps execute on Celery workers (a team's setup).",
    )
    viewer_host: str = Field(
        default="127.0.0.1",
        alias="EVAL_VIEWER_HOST",
        description="The interface the sample viewer listens on (127.0.0.1: this machine only).",
    )
    viewer_port: int = Field(default=3010, alias="EVAL_VIEWER_PORT", description="The sample viewer's port.")
    viewer_url: str | None = Field(
        default=None,
        alias="EVAL_VIEWER_URL",
        description="The sample viewer's address as users reach it, for the links in Dagster's metadata "
        "(default: http://127.0.0.1:<EVAL_VIEWER_PORT>).",
    )
    celery_config: Path = Field(
        default=PROJECT_ROOT / "deploy" / "team" / "celery.yaml",
        alias="EVAL_CELERY_CONFIG",
        description="The Celery executor's settings, read by the workers too.",
    )

    @property
    def viewer_base_url(self) -> str:
        """Where the links in Dagster's metadata point: EVAL_VIEWER_URL, else the viewer on this machine."""
        return (self.viewer_url or f"http://127.0.0.1:{self.viewer_port}").rstrip("/")

    @property
    def declaration_folders(self) -> DeclarationFolders:
        return DeclarationFolders(self.benchmarks_dir, self.protocols_dir)


def environment() -> Environment:
    """The `EVAL_*` variables as set now (an empty one counts as unset)."""
    aliases = {field.alias for field in Environment.model_fields.values()}
    return Environment.model_validate({name: value for name, value in os.environ.items() if name in aliases and value})


def hub_offline() -> bool:
    """Whether Hugging Face's hub is off here (HF_HUB_OFFLINE or HF_DATASETS_OFFLINE is 1)."""
    return "1" in (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("HF_DATASETS_OFFLINE"))


def code_execution_allowed() -> bool:
    """Whether HF_ALLOW_CODE_EVAL is 1: the harness's (and `code_eval`'s) opt-in to executing
    model-written code, one of the two a task marked `unsafe_code` needs."""
    return os.environ.get(CODE_EXECUTION_VARIABLE) == "1"


def secrets() -> dict[str, str]:
    """The values no log or table may hold, by variable: every secret-named variable's (…_API_KEY,
    …TOKEN, …SECRET, …PASSWORD) of 8 characters or more."""
    return {name: value for name, value in os.environ.items() if len(value) >= 8 and SECRET_NAME.search(name)}


def openai_api_key() -> str | None:
    """OPENAI_API_KEY, where set (litellm reads every provider's key itself)."""
    return os.environ.get("OPENAI_API_KEY") or None


def litellm_offline() -> None:
    """litellm reads its price list from its package instead of fetching it at import."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def add_nltk_data(folder: Path) -> None:
    """`folder` first on NLTK_DATA, which NLTK reads when it is imported."""
    paths = os.environ.get("NLTK_DATA", "")
    if str(folder) not in paths.split(os.pathsep):
        os.environ["NLTK_DATA"] = os.pathsep.join(p for p in (str(folder), paths) if p)
