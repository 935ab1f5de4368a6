#!/usr/bin/env python
"""Where a campaign's time went, per stage and per backend, from its run folder alone.

    python scripts/profile_campaign.py RUN_DIR

Reads the records (``prepare_s`` less ``first_run_s``: a conversion, or a compiler's setup; ``first_run_s``:
the first call, where a lazy compiler such as ``torch.compile`` compiles; ``run_s`` x ``runs``,
``align_s``: tier 2, ``bisect_s``: attribution, ``worker_s``: all of a run in its worker) and the
session statistics (``stats/session-*.json``: wall time, Ray's start, seed builds). A worker's time
not under a named stage (probes' inputs, judging, explanations, transfers) is ``other``. Prints one
table of seconds per backend and stage, then the campaign's wall time beside the workers' busy time.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

STAGES = ["prepare", "first call", "timed runs", "tier 2", "attribution", "other"]


def profile(run_dir: Path) -> pd.DataFrame:
    df = pd.read_parquet(run_dir / "records", columns=["backend", "prepare_s", "first_run_s", "run_s", "runs",
                                                       "align_s", "bisect_s", "worker_s"])
    # prepare_s runs to the end of the first call (a lazy compiler compiles there): the first call is apart
    first = df["first_run_s"].fillna(0)
    s = pd.DataFrame({"backend": df["backend"], "prepare": (df["prepare_s"].fillna(0) - first).clip(lower=0),
                      "first call": first,
                      "timed runs": (df["run_s"].fillna(0) * df["runs"].fillna(1)),
                      "tier 2": df["align_s"].fillna(0), "attribution": df["bisect_s"].fillna(0),
                      "worker": df["worker_s"].fillna(0)})
    s["other"] = (s["worker"] - s[STAGES[:-1]].sum(axis=1)).clip(lower=0)
    table = s.groupby("backend")[[*STAGES, "worker"]].sum()
    table.loc["total"] = table.sum()
    return table.round(1)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    run_dir = Path(sys.argv[1])
    table = profile(run_dir)
    print(table.to_string())
    sessions = [json.loads(p.read_text()) for p in sorted((run_dir / "stats").glob("session-*.json"))]
    for s in sessions:
        builds = sum(b.get("build_s", 0) + b.get("capture_s", 0) for b in s.get("builds", []))
        busy = sum(w.get("busy_s", 0) for w in s.get("workers", []))
        print(f"session {s.get('started', '?')}: wall {s.get('wall_s', 0):.0f} s, Ray and workers starting "
              f"{s.get('start_s', 0):.0f} s, seed builds {builds:.0f} s, workers busy {busy:.0f} s "
              f"({len(s.get('workers', []))} workers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
