"""Copy evenly spaced slices of the full evaluation splits into data/benchmarks/.

Usage: python scripts/make_data_slices.py [SOURCE_DIR] [ROWS]
The line numbers taken are written to data/benchmarks/slices.json so every shipped row
can be traced back to its line in the full file (see data/benchmarks/SOURCES.md).
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def evenly_spaced(total: int, count: int) -> list[int]:
    return sorted({i * total // count for i in range(min(count, total))})


def main(source_dir: Path, rows_per_benchmark: int) -> None:
    target = ROOT / "data" / "benchmarks"
    target.mkdir(parents=True, exist_ok=True)
    taken = {}
    for source in sorted(source_dir.glob("*.jsonl")):
        lines = source.read_text(encoding="utf-8").splitlines()
        indices = evenly_spaced(len(lines), rows_per_benchmark)
        (target / source.name).write_text("".join(lines[i] + "\n" for i in indices), encoding="utf-8")
        taken[source.name] = {"source_rows": len(lines), "line_numbers": [i + 1 for i in indices]}
    (target / "slices.json").write_text(json.dumps(taken, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT.parent / "shared" / "benchmarks"),
         int(sys.argv[2]) if len(sys.argv) > 2 else 50)
