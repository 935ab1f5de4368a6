#!/usr/bin/env python
"""The longest functions and modules of the project's source folders, read with ``ast`` (nothing imported).

    python scripts/function_lengths.py            # functions over 60 lines, modules over 300
    python scripts/function_lengths.py --over 80

A function's length is its ``def`` line to its last line; fuzzer/repro/ is held to 60 lines whatever
``--over`` says, as the style asks of the reproduction code.
"""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("core", "results", "workers", "seeds", "fuzzer", "analysis", "scripts")


def functions(root: Path = ROOT):
    """(lines, path, name) of every function in the source folders."""
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield node.end_lineno - node.lineno + 1, path.relative_to(root).as_posix(), node.name


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--over", type=int, default=60, help="list functions longer than this (default: 60)")
    p.add_argument("--module-over", type=int, default=300, help="list modules longer than this (default: 300)")
    a = p.parse_args()
    found = sorted(functions(), reverse=True)
    for lines, path, name in found:
        if lines > a.over or (path.startswith("fuzzer/repro/") and lines > 60):
            print(f"{lines:4d}  {path}:{name}")
    print(f"longest function: {found[0][0]} lines ({found[0][1]}:{found[0][2]}); "
          f"in fuzzer/repro: {max(n for n, p, _ in found if p.startswith('fuzzer/repro/'))}")
    modules = sorted(((len(p.read_text().splitlines()), p.relative_to(ROOT).as_posix())
                      for f in FOLDERS for p in (ROOT / f).rglob("*.py")), reverse=True)
    for lines, path in modules:
        if lines > a.module_over:
            print(f"{lines:4d}  {path} (module)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
