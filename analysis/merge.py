"""Clusters merged after minimising: the same operator sequence with the same symptom on the same stack.

Two clusters can differ in everything a key reads on the variant (its first divergent op, say,
``linear`` on one model and ``addmm`` on another) and still minimise to the same reproducer. What
``gapfuzz repro`` wrote for a cluster (``repros/<cluster>/shrink.json``: its minimised graph's
operators, the stack and the symptom) merges those: the first in triage order stays and lists the
others under ``merged``, its counts are the sums. Only reproducers that failed every time count.
The files are read as JSON, never run.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from gapfuzz.core.bugs import ReproStatus

SUMMED = ("count", "variants", "unmutated", "inherited")
JOINED = ("seed_ids", "families", "backends", "probes", "modes", "ops", "grad_at", "output_dtypes", "mutations")
HIGHEST = ("severity", "max_tol_ratio")


def minimised(repros: Path) -> dict[str, tuple]:
    """Cluster id -> (stack, kind, symptom, operator sequence) of each reproducible minimised cluster."""
    out = {}
    for f in sorted(Path(repros).glob("*/shrink.json")):
        try:  # a regular file reached by no link (a FIFO would hang the read), of a size gapfuzz writes
            if f.is_symlink() or f.parent.is_symlink() or not f.is_file() or f.stat().st_size > 1 << 20:
                continue
            r = json.loads(f.read_text())
        except (OSError, ValueError):
            continue  # a reproducer being written, or a folder of something else: not evidence
        if not (isinstance(r, dict) and r.get("status") == ReproStatus.REPRODUCIBLE and isinstance(r.get("ops"), list)
                and r.get("ops") and isinstance(r.get("stack"), str) and r["stack"]):
            continue
        kind, symptom = r.get("kind", ""), r.get("symptom", "")
        out[f.parent.name] = (r["stack"], kind if isinstance(kind, str) else str(kind),
                              symptom if isinstance(symptom, str) else str(symptom), tuple(map(str, r["ops"])))
    return out


def merge(clusters: pd.DataFrame, signatures: dict[str, tuple]) -> pd.DataFrame:
    """``clusters`` (in triage order) with those of one minimised signature folded into the first
    (band and impact are for the caller to compute on the result)."""
    clusters = clusters.copy()
    clusters["merged"] = [[] for _ in range(len(clusters))]
    sig = clusters["cluster"].map(signatures)
    groups = {}
    for i, s in sig.items():
        if isinstance(s, tuple):
            groups.setdefault(s, []).append(i)
    drop = []
    for rows in groups.values():
        if len(rows) < 2:
            continue
        keep, rest = rows[0], rows[1:]
        for c in SUMMED:
            clusters.at[keep, c] = clusters.loc[rows, c].sum()
        clusters.at[keep, "seeds"] = len({s for r in rows for s in clusters.at[r, "seed_ids"]}) or \
            clusters.loc[rows, "seeds"].max()
        for c in (c for c in JOINED if c in clusters):
            clusters.at[keep, c] = list(dict.fromkeys(x for r in rows for x in clusters.at[r, c]))
        clusters.at[keep, "vendor"] = bool(clusters.loc[rows, "vendor"].any())
        for c in (c for c in HIGHEST if c in clusters):
            clusters.at[keep, c] = clusters.loc[rows, c].max()
        if "level" in clusters:
            clusters.at[keep, "level"] = clusters.loc[clusters.loc[rows, "severity"].idxmax(), "level"]
        clusters.at[keep, "merged"] = list(clusters.loc[rest, "cluster"])
        drop += rest
    return clusters.drop(index=drop).reset_index(drop=True)
