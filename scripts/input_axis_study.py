#!/usr/bin/env python
"""Real defects per CPU-hour of two runs of one study, side by side: the input axis on and off.

    python scripts/input_axis_study.py runs/ops-inputs runs/ops-inputs-off \\
        [--annotations docs/findings/annotations.yaml]

A defect is a cluster its annotation classes ``defect``: read and noted by hand (its own entry), or
classed by a ``_by_message`` rule (a missing conversion, an invalid exported model); both counts are
printed. Clusters annotated ``same_as: <cluster>`` count as that one, so a defect seen as several
clusters counts once. CPU-hours are the workers' busy time from the runs' session figures (``stats/``). Prints a
table, one row per run folder, and each run's defects by id, with the runs that showed them.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gapfuzz.analysis.api import load_run
from gapfuzz.analysis.findings import classify, performance
from gapfuzz.analysis.known import KnownIssues
from gapfuzz.analysis.table import markdown_table
from gapfuzz.results.store import ResultsError


def defects(run, annotations: KnownIssues) -> tuple[dict[str, int], int]:
    """Defects noted by hand (id -> runs showing it) in one run folder, and how many more clusters
    message rules class as defects."""
    clusters = run.clusters()
    notes = classify(clusters, annotations)
    found: dict[str, int] = {}
    by_rule = 0
    for r in clusters.itertuples():
        note = notes.get(r.cluster) or {}
        if note.get("class") == "defect" and "rule" in note:
            by_rule += 1
        elif note.get("class") == "defect":
            key = note.get("same_as") or r.cluster
            found[key] = found.get(key, 0) + int(r.count)
    return found, by_rule


def row(path: str, annotations: KnownIssues) -> tuple[dict, dict]:
    run = load_run(path, annotations.path)
    _, fig = performance(run)
    records = run.records(["variant_id", "seed_id", "probe"])
    hours = fig["busy_s"] / 3600
    found, by_rule = defects(run, annotations)
    clusters = run.clusters()
    return {"run": run.name, "seeds": records["seed_id"].nunique(), "variants": records["variant_id"].nunique(),
            "records": len(records), "probes per variant": records.groupby("variant_id")["probe"].nunique().max(),
            "clusters": len(clusters), "vendor clusters": int(clusters["vendor"].sum()) if len(clusters) else 0,
            "worker CPU-hours": round(hours, 3), "defects (noted)": len(found),
            "per CPU-hour": round(len(found) / hours, 2) if hours else float("nan"),
            "defects (+ message rules)": len(found) + by_rule,
            "per CPU-hour (+ rules)": round((len(found) + by_rule) / hours, 2) if hours else float("nan")}, found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="run folders (the input axis on, then off)")
    p.add_argument("--annotations", default="docs/findings/annotations.yaml")
    a = p.parse_args()
    try:
        annotations = KnownIssues.load(a.annotations)
        rows = [row(r, annotations) for r in a.runs]
    except (OSError, ResultsError) as e:
        print(f"input_axis_study: {e}".splitlines()[0], file=sys.stderr)
        return 2
    print(markdown_table(pd.DataFrame([r for r, _ in rows])))
    for (r, found) in rows:
        listed = ", ".join(f"{k} ({n} runs)" for k, n in sorted(found.items())) or "none"
        print(f"\n{r['run']}: {listed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
