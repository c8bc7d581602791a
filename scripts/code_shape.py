"""The code's shape: each module's lines and its longest functions, and the imports that run from one
top-level folder into another (`python scripts/code_shape.py [--functions N]`)."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("eval_platform", "evaluation_assets", "resources", "jobs", "schedules", "engine/eval_engine")


def modules() -> list[Path]:
    found: list[Path] = []
    for name in FOLDERS:
        path = ROOT / name
        found += [path] if path.is_file() else sorted(path.rglob("*.py")) if path.is_dir() else []
    return found


def functions(tree: ast.AST) -> list[tuple[str, int]]:
    """Every function (methods by class.name) and its length in lines, nested ones within their parent."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((prefix + child.name, (child.end_lineno or child.lineno) - child.lineno + 1))
                visit(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")

    visit(tree, "")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--functions", type=int, default=15, help="how many of the longest functions to print")
    args = parser.parse_args()
    rows, longest = [], []
    for path in modules():
        text = path.read_text()
        relative = path.relative_to(ROOT)
        rows.append((len(text.splitlines()), str(relative)))
        longest += [(n, f"{relative}:{name}") for name, n in functions(ast.parse(text))]
    print(f"{len(rows)} modules, {sum(n for n, _ in rows)} lines; the longest modules:")
    for n, name in sorted(rows, reverse=True)[: args.functions]:
        print(f"  {n:5d}  {name}")
    print("the longest functions:")
    for n, name in sorted(longest, reverse=True)[: args.functions]:
        print(f"  {n:5d}  {name}")


if __name__ == "__main__":
    main()
