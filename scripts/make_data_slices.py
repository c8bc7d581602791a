"""Copy slices of the full evaluation and few-shot splits into data/benchmarks/.

Usage: python scripts/make_data_slices.py [SOURCE_DIR] [ROWS] [FEWSHOT_ROWS]
Evaluation splits: ROWS rows at evenly spaced line numbers, written to data/benchmarks/slices.json
so every shipped row can be traced back to its line in the full file. Few-shot splits (SOURCE_DIR/
fewshot/): the first FEWSHOT_ROWS lines, in order, all of MMLU's dev split (five per subject); the
Winogrande slice is of train_l. See data/benchmarks/SOURCES.md.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FEWSHOT_FILES = {
    "arc_easy_train.jsonl": "arc_easy_train.jsonl",
    "arc_challenge_train.jsonl": "arc_challenge_train.jsonl",
    "gsm8k_train.jsonl": "gsm8k_train.jsonl",
    "mmlu_dev.jsonl": "mmlu_dev.jsonl",
    "winogrande_train_l.jsonl": "winogrande_train.jsonl",
}


def evenly_spaced(total: int, count: int) -> list[int]:
    return sorted({i * total // count for i in range(min(count, total))})


def main(source_dir: Path, rows_per_benchmark: int, fewshot_rows: int) -> None:
    target = ROOT / "data" / "benchmarks"
    target.mkdir(parents=True, exist_ok=True)
    taken = {}
    for source in sorted(source_dir.glob("*.jsonl")):
        lines = source.read_text(encoding="utf-8").rstrip("\n").split("\n")  # not splitlines(): U+2028 is text
        indices = evenly_spaced(len(lines), rows_per_benchmark)
        (target / source.name).write_text("".join(lines[i] + "\n" for i in indices), encoding="utf-8")
        taken[source.name] = {"source_rows": len(lines), "line_numbers": [i + 1 for i in indices]}
    (target / "slices.json").write_text(json.dumps(taken, indent=1) + "\n", encoding="utf-8")
    (target / "fewshot").mkdir(exist_ok=True)
    for name, shipped in FEWSHOT_FILES.items():
        lines = (source_dir / "fewshot" / name).read_text(encoding="utf-8").rstrip("\n").split("\n")
        keep = lines if name == "mmlu_dev.jsonl" else lines[:fewshot_rows]
        (target / "fewshot" / shipped).write_text("".join(line + "\n" for line in keep), encoding="utf-8")


if __name__ == "__main__":
    main(
        Path(sys.argv[1] if len(sys.argv) > 1 else ROOT.parent / "shared" / "benchmarks"),
        int(sys.argv[2]) if len(sys.argv) > 2 else 50,
        int(sys.argv[3]) if len(sys.argv) > 3 else 100,
    )
