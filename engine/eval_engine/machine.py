"""Where the engine computes, and how far its floats may move.

The same model scores the same sequences with last-digit differences when the batch around them
changes (batch size, order, which other sequences share a pass) or the CPU's kernels do (AVX2,
AVX-512, AMX): floating-point sums are taken in another order. Decisions (which choice wins) do not
move; log-likelihoods move by less than `LOGLIKELIHOOD_TOLERANCE`.
"""

from __future__ import annotations

import platform

# The largest |difference| of a stored float (a choice's summed log-likelihood, a label probability,
# an `mc2` or other float score) between two computations of the same item by the same model and
# precision, whatever the batch size, order, company, process or CPU. Measured by
# the platform's speed/reproducibility.py on float32 (every log-likelihood benchmark, zero- and few-shot): at
# most 3.7e-05 across batch sizes 1-32, two orders, alone and mixed; 2.9e-05 on one thread; 2.0e-04
# with AVX2 instead of AVX-512 kernels (another CPU generation); 6.1e-05 against lm-evaluation-harness
# (the README's parity table). The bound, 5e-4, is 2.5 times the largest, for longer prompts, and far
# below the smallest margin that decided an item there (6.0e-02).
LOGLIKELIHOOD_TOLERANCE = 5e-4


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    for line in _cpuinfo_lines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> set[str]:
    """The CPU's feature flags (from /proc/cpuinfo; none where there is none)."""
    for line in _cpuinfo_lines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _cpuinfo_lines() -> list[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            return handle.read().splitlines()
    except OSError:
        return []
