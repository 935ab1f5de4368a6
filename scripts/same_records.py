"""Do two run folders hold the same records? Compares every column except those that measure time,
place or cost, row by (variant, backend, probe), and prints what differs.

    python scripts/same_records.py runs/a runs/b

Exit status 0 when the records are the same, 1 when they differ. Used to show that a change to
gapfuzz kept a campaign's results (run the same campaign before and after, then compare).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gapfuzz.core.bugs import EXAMPLE_PROBE
from gapfuzz.results.columns import NESTED, decode_column
from gapfuzz.results.store import RecordStore

# Columns that differ between two runs of the same campaign by nature: time, place and cost.
VOLATILE = {"time", "host", "worker", "worker_s", "gen_s", "capture_s", "prepare_s", "first_run_s", "latency_ms",
            "run_s", "align_s", "bisect_s"}
KEY = ["variant_id", "backend", "probe"]


def load(run_dir: str) -> pd.DataFrame:
    table = RecordStore(run_dir).read()  # nested columns as values, from a folder of either format
    df = table.drop_columns(list(NESTED)).to_pandas()
    for column in NESTED:
        df[column] = pd.Series(decode_column(column, table.column(column)), index=df.index, dtype=object)
    df["probe"] = df["probe"].fillna(EXAMPLE_PROBE)  # records of schema 1 have the example only
    if df.duplicated(KEY).any():
        raise SystemExit(f"{run_dir}: {int(df.duplicated(KEY).sum())} duplicate (variant, backend, probe) rows")
    return df.set_index(KEY).sort_index()


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    try:
        if isinstance(a, (str, dict)) or isinstance(b, (str, dict)) or not hasattr(a, "__len__"):
            return bool(a == b)  # a nested column's value compares whole (a mapping, or its lists inside)
        return list(a) == list(b)
    except (TypeError, ValueError):
        return False


def differences(a: pd.DataFrame, b: pd.DataFrame, limit: int = 20) -> list[str]:
    out = []
    only_a, only_b = a.index.difference(b.index), b.index.difference(a.index)
    out += [f"only in the first: {k}" for k in only_a[:limit]]
    out += [f"only in the second: {k}" for k in only_b[:limit]]
    for col in sorted(set(a.columns) | set(b.columns)):
        if col in VOLATILE:
            continue
        if col not in a.columns or col not in b.columns:
            out.append(f"column {col} is only in the {'first' if col in a.columns else 'second'}")
            continue
        both = a.index.intersection(b.index)
        for key in both:
            x, y = a.at[key, col], b.at[key, col]
            if (x is None or x is pd.NA) and (y is None or y is pd.NA):
                continue
            if not _same(x, y):
                out.append(f"{key[0]} {key[1]} {col}: {x!r} != {y!r}")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("first")
    p.add_argument("second")
    args = p.parse_args()
    a, b = load(args.first), load(args.second)
    diff = differences(a, b)
    ignored = ", ".join(sorted(VOLATILE))
    if not diff:
        print(f"same records: {len(a)} rows, {len(a.columns) - len(VOLATILE & set(a.columns))} columns compared "
              f"(not compared: {ignored})")
        return 0
    print("\n".join(diff[:200]))
    print(f"{len(diff)} differences over {len(a)} / {len(b)} rows (not compared: {ignored})")
    return 1


if __name__ == "__main__":
    sys.exit(main())
