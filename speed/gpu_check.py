"""The GPU check: parity with lm-evaluation-harness, item by item, and items/s of both tools, on a
CUDA machine, in float32 and in bfloat16, on ARC-Challenge 25-shot and MMLU 5-shot.

    pip install -e .
    python speed/gpu_check.py                    # 200 items each
    python speed/gpu_check.py --items 50 --batch-size 32

It runs speed/lm_eval_parity.py with `--device cuda` once per precision (both tools on the GPU, the
same GGUF weights, the same items), so its table is the same: accuracies, per-item agreement,
prompts that differ, the largest log-likelihood difference and both tools' items/s.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lm_eval_parity import main as parity  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("gpu_check needs a CUDA GPU (torch.cuda.is_available() is False here)")
    print(f"GPU: {torch.cuda.get_device_name(0)}")
    for dtype in ("float32", "bfloat16"):
        print(f"\n== {dtype}")
        parity(
            [
                "--device",
                "cuda",
                "--dtype",
                dtype,
                "--items",
                str(args.items),
                "--batch-size",
                str(args.batch_size),
                "--benchmarks",
                "arc_challenge",
                "mmlu",
            ]
        )


if __name__ == "__main__":
    main()
