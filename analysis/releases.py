"""Release lines: one stack run in several releases, and what each cluster does across them.

A campaign can run a stack in several releases side by side (``onnxruntime-1.31.1@cpu`` beside the
installed ``onnxruntime@cpu``): each is a backend of its own in the records, and run.json names the
line each belongs to and its release (``"line"``, the name without the release, and ``"release"``,
{distribution: version}). The bug key places a defect by stack and device, not by backend label
(``core.bugs``), so one defect seen in two releases is one cluster; what this module adds is in which
of its line's releases it shows, which is what a vendor asks first ("since when?").

A release is *tried* for a cluster when its backend ran one of the cluster's variants to the end (ok or
mismatch: a skipped record, or a run that failed otherwise first, says nothing of this bug); it *shows* the
cluster when one of its runs is in it. Releases are ordered by
version (``packaging``; as text where one does not parse). Over the releases tried, oldest first, a
cluster is a ``regression`` (shown in the newest, not in some earlier one; it names the first release
that shows it after the last that does not: where to bisect), ``fixed`` (shown in an earlier one, not
in the newest) or ``long-standing`` (shown in every one, at least two). A cluster with no line, or
one release tried, has no mark. A cluster on several lines (a stack under two labels, each run in
releases) takes the most telling mark of its lines, in the order of ``Mark``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from packaging.version import InvalidVersion, Version

from gapfuzz.core.bugs import Kind, Status, StrEnum


class Mark(StrEnum):
    """What a cluster does across the releases of its line, the most telling first."""

    REGRESSION = "regression"
    FIXED = "fixed"
    LONG_STANDING = "long-standing"


COLUMNS = ["release_mark", "first_release", "releases", "release_note"]  # what ``mark`` adds to a clusters table
PRESENT, ABSENT = "present", "absent"


@dataclass(frozen=True)
class Release:
    """One backend of a line: its name in the records and its release, (distribution, version) pairs."""

    backend: str
    release: tuple[tuple[str, str], ...]

    def label(self, named: bool = True) -> str:
        return " + ".join(f"{d} {v}" if named else v for d, v in self.release)


def lines(backends: dict | None) -> dict[str, list[Release]]:
    """line -> its releases, oldest first: the lines of run.json's ``backends`` with two releases or more."""
    found: dict[str, list[Release]] = {}
    for name, e in (backends or {}).items():
        if isinstance(e, dict) and isinstance(e.get("line"), str) and isinstance(e.get("release"), dict) \
                and e["release"]:
            release = tuple(sorted((str(d), str(v)) for d, v in e["release"].items()))
            found.setdefault(e["line"], []).append(Release(str(name), release))
    return {line: ordered(rs) for line, rs in sorted(found.items()) if len(rs) >= 2}


def ordered(releases: list[Release]) -> list[Release]:
    """Oldest first: by version, distributions in name order; as text where a version does not parse."""
    dists = sorted({d for r in releases for d, _ in r.release})
    values = {r: [dict(r.release).get(d, "") for d in dists] for r in releases}
    try:
        key = {r: tuple(Version(v or "0") for v in vs) for r, vs in values.items()}
    except InvalidVersion:
        key = {r: tuple(vs) for r, vs in values.items()}
    return sorted(releases, key=lambda r: (key[r], r.backend))


def judge(tried: list[Release], shown: set[str], kind: str = Kind.DISCREPANCY) -> dict | None:
    """A cluster's ``COLUMNS`` on one line: ``tried``, oldest first; ``shown``, the backends in it."""
    if len(tried) < 2:
        return None
    present = [r.backend in shown for r in tried]
    one = len({r.release[0][0] for r in tried}) == 1 and all(len(r.release) == 1 for r in tried)

    def short(r: Release) -> str:  # a second mention of the same distribution: its version alone
        return r.label(named=not one)
    states = [f"{tried[0].label()}: {PRESENT if present[0] else ABSENT}",
              *(f"{short(r)}: {PRESENT if p else ABSENT}" for r, p in zip(tried[1:], present[1:]))]
    if all(present):
        mark, first = Mark.LONG_STANDING, tried[0]
        note = f"long-standing ({tried[0].label()}, {', '.join(short(r) for r in tried[1:])})"
    elif present[-1]:
        last = max(i for i, p in enumerate(present) if not p)
        mark, first = Mark.REGRESSION, tried[last + 1]
        verb = {Kind.FAILURE: "fails", Kind.BENIGN: "differs"}.get(kind, "wrong")
        note = f"regression: worked in {tried[last].label()}, {verb} in {short(first)}"
    elif any(present):
        mark, first = Mark.FIXED, tried[max(i for i, p in enumerate(present) if p) + 1]
        note = f"fixed in {first.label()}"
    else:
        return None
    return {"release_mark": str(mark), "first_release": first.label(), "releases": ", ".join(states),
            "release_note": note}


def mark(clusters: pd.DataFrame, df: pd.DataFrame, ids: pd.Series, backends: dict | None) -> pd.DataFrame:
    """``clusters`` (with ``cluster``, ``kind`` and ``merged``) with ``COLUMNS``: each cluster's mark across
    its line's releases; ``df``: the records (variant_id, backend, status), ``ids``: their cluster ids
    (``analysis.clusters.keys``), ``backends``: run.json's. None where there is no mark."""
    out = clusters.copy()
    for c in COLUMNS:
        out[c] = pd.Series(None, index=out.index, dtype=object)
    found = lines(backends)
    if out.empty or not found or not {"variant_id", "backend", "status"} <= set(df.columns):
        return out
    line_of = {r.backend: line for line, rs in found.items() for r in rs}
    merged = out["merged"] if "merged" in out else pd.Series([[]] * len(out), index=out.index)
    owner = {cid: c for c, m in zip(out["cluster"], merged) for cid in [c, *(m if isinstance(m, list) else [])]}
    own = ids.map(owner).to_numpy(dtype=object)  # each record's row of ``clusters``
    backend, variant = df["backend"].to_numpy(dtype=object), df["variant_id"].to_numpy(dtype=object)
    in_line = df["backend"].isin(line_of).to_numpy() & pd.notna(own)
    shown = pd.DataFrame({"c": own[in_line], "b": backend[in_line]}).drop_duplicates()
    if shown.empty:
        return out
    mine = pd.Series(own).isin(set(shown["c"])).to_numpy()  # the runs of clusters a release of a line shows
    variants = pd.DataFrame({"c": own[mine], "v": variant[mine]}).drop_duplicates()
    # a release ran a variant when its run got to the end (ok or mismatch): one that failed before (another
    # error, a compile that did not finish) cannot say the cluster is absent there
    ran = df["backend"].isin(line_of).to_numpy() & df["status"].isin([Status.OK, Status.MISMATCH]).to_numpy()
    runs = pd.DataFrame({"v": variant[ran], "b": backend[ran]}).drop_duplicates()
    tried = variants.merge(runs, on="v")[["c", "b"]].drop_duplicates().groupby("c")["b"].agg(set)
    kinds = dict(zip(out["cluster"], out["kind"]))
    marks = {}
    for c, group in shown.groupby("c", sort=False):
        mine_shown = set(group["b"])
        ran_here = tried.get(c, set()) | mine_shown
        per_line = {line: judge([r for r in found[line] if r.backend in ran_here], mine_shown, kinds.get(c))
                    for line in sorted({line_of[b] for b in mine_shown})}
        per_line = {line: m for line, m in per_line.items() if m is not None}
        if not per_line:
            continue
        best = min(per_line.values(), key=lambda m: list(Mark).index(m["release_mark"]))
        text = "; ".join(f"{line}: {m['releases']}" if len(per_line) > 1 else m["releases"]
                         for line, m in per_line.items())
        marks[c] = {**best, "releases": text}
    rows = out["cluster"].map(marks)
    for col in COLUMNS:
        out[col] = np.array([m[col] if isinstance(m, dict) else None for m in rows], dtype=object)
    return out


def counts(clusters: pd.DataFrame) -> str:
    """``2 regressions, 1 fixed`` of a clusters table's marks; empty without any."""
    if "release_mark" not in clusters:
        return ""
    n = clusters["release_mark"].value_counts()
    words = {Mark.REGRESSION: ("regression", "regressions"), Mark.FIXED: ("fixed", "fixed"),
             Mark.LONG_STANDING: ("long-standing", "long-standing")}
    return ", ".join(f"{int(n[m])} {words[m][int(n[m]) != 1]}" for m in Mark if n.get(m, 0))
