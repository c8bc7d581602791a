"""How far a result can move between runs, and where a run was computed.

The same model scores the same items with last-digit differences when the batch around them
changes (batch size, item order, which other items share a forward pass) or the CPU's kernels do
(AVX2, AVX-512, AMX): floating-point sums are taken in another order. Decisions (which choice wins)
do not move; log-likelihoods move by less than the engine's `LOGLIKELIHOOD_TOLERANCE`.
"""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from eval_engine import cpu_flags

# CPU features whose presence changes which kernels torch runs (and so the last float digits).
CPU_FEATURES = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_tile")


@dataclass(frozen=True)
class RunEnvironment:
    """Where and how a prediction run computed its predictions."""

    batch_size: int
    device: str  # cpu, cuda:0, mps, served, api
    device_name: str  # the CPU model or GPU name; the server for a served or API model
    dtype: str | None  # the weights' precision (None where a server decides)
    threads: int | None  # torch's intra-op threads in this process
    cpu_capability: str | None  # the instruction set torch's own CPU kernels use (AVX512, AVX2, DEFAULT)
    cpu_features: str  # those of CPU_FEATURES this CPU has
    torch_version: str | None
    transformers_version: str | None
    python_version: str
    platform: str

    def as_row(self) -> dict[str, object]:
        return asdict(self)


ENVIRONMENT_FIELDS = tuple(RunEnvironment.__dataclass_fields__)


def describe_environment(placement: Mapping[str, Any], batch_size: int) -> RunEnvironment:
    """This process's environment around a model whose `placement` is its device, device name,
    dtype and (for an in-process model) torch threads."""
    torch_version, flags = _version("torch"), cpu_flags()
    capability = None
    if torch_version and placement.get("threads") is not None:
        import torch

        capability = torch.backends.cpu.get_cpu_capability()
    return RunEnvironment(
        batch_size=batch_size,
        device=placement["device"],
        device_name=placement["device_name"],
        dtype=placement.get("dtype"),
        threads=placement.get("threads"),
        cpu_capability=capability,
        cpu_features=",".join(f for f in CPU_FEATURES if f in flags),
        torch_version=torch_version,
        transformers_version=_version("transformers"),
        python_version=platform.python_version(),
        platform=platform.platform(),
    )


def environment_differences(
    first: Sequence[Mapping[str, object] | None],
    second: Sequence[Mapping[str, object] | None],
    fields: Sequence[str] | None = ENVIRONMENT_FIELDS,
) -> str | None:
    """'field: values of the first vs of the second; ...' for every field of `fields` (None: any
    field either has) that differs between two sets of runs' environments (None for a run whose
    environment was not recorded), or None where nothing differs."""
    names = fields if fields is not None else sorted({name for env in (*first, *second) if env for name in env})
    differences = [
        f"{name}: {_values(first, name)} vs {_values(second, name)}"
        for name in names
        if _values(first, name) != _values(second, name)
    ]
    return "; ".join(differences) or None


def _values(environments: Sequence[Mapping[str, object] | None], name: str) -> str:
    return " | ".join(sorted({"unrecorded" if env is None else str(env.get(name)) for env in environments}))


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
