"""The standing GPU check (speed/gpu_standing_check.sh), run here as the suite runs it between GPU
runs: the same script and steps on the CPU with tiny shapes, so that it cannot rot; and its kernel
check, which stops a run whose kernel differs from the definition."""

import json
import os
import sys

import pytest

from eval_engine import kernels
from speed import gpu_check
from tests.conftest import PROJECT_ROOT
from tests.processes import run_to_end


def test_the_standing_gpu_check_runs_every_step_on_the_cpu(tmp_path):
    returncode, output = run_to_end(
        ["bash", "speed/gpu_standing_check.sh", "--cpu"],
        timeout_s=1800,  # a hang guard: a few minutes on two cores
        cwd=PROJECT_ROOT,
        env={**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable},
    )
    assert returncode == 0, output[-4000:]
    assert "FlashAttention's operator: aten::_flash_attention_forward(Tensor query" in output
    assert "kernel check (cpu against the definition, bfloat16): passed" in output
    report = json.loads((tmp_path / "tiny" / "gpu_check.json").read_text())
    ran = {(result["shape"], result["task"]): result.get("error") for result in report["results"]}
    expected = {("llama-3.1-8b", task) for task in gpu_check.TASKS} | {("mistral-7b", "arc_challenge"),
                                                                      ("mistral-7b", "gsm8k_cot")}  # fmt: skip
    assert ran == dict.fromkeys(expected)  # every task of both shapes ran, none failed
    assert "| llama-3.1-8b | gsm8k_cot |" in (tmp_path / "tiny" / "gpu_check.md").read_text()


def test_a_kernel_that_fails_the_check_stops_the_gpu_check(monkeypatch):
    def swapped_heads(query, key, value, cu_q, cu_k, window, scale):  # a log-sum-exp read in the wrong layout
        out, lse = kernels.reference_varlen(query, key, value, cu_q, cu_k, window, scale)
        return out, lse.flip(1)

    monkeypatch.setattr(kernels, "cpu_varlen", swapped_heads)
    with pytest.raises(SystemExit, match="kernel check failed on cpu: .* its lse differs from the definition"):
        gpu_check.check_kernels("cpu")
