"""docs/findings.md from a run folder: the study's tables, its clusters with what each one is, and
the campaign's own performance.

Everything is computed from the records and the run's stats files, so the document regenerates
from the folder; the only hand-written part is a known-issues file (``analysis.known``: cluster
ids, issues matched on cluster columns, message rules, each with a class and a note), kept apart
so that regenerating never loses it. A cluster no entry matches but an explanation does
(``core.bugs.Explanation``) is classed ``explained`` with no hand note.
"""
from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from gapfuzz.core.bugs import FAILED, Kind

from .api import Run
from .known import CLASSES, KnownIssues
from .table import markdown_table
from .triage import describe, release_note

TOLERANCES = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1]


def _pct(column: str) -> bool:
    return column.endswith(("share", "rate")) or column.startswith(("share", "tol ")) or column == "disagree"


def _kind(df: pd.DataFrame) -> pd.Series:
    """Operator or model seed; by the id where a seed that failed to build has no source column."""
    ops = (df["seed_source"] == "ops") | df["seed_id"].astype(str).str.startswith("ops/")
    return np.where(ops, "operator seeds", "model seeds")


def overview(run: Run) -> pd.DataFrame:
    df = run.records(["seed_id", "seed_source", "variant_id", "backend", "status"])
    g = df.assign(kind=_kind(df)).groupby("kind")
    return pd.DataFrame({"seeds": g["seed_id"].nunique(), "variants": g["variant_id"].nunique(),
                         "runs": g.size()}).reset_index()


def failures_by_stage(run: Run) -> pd.DataFrame:
    """Per backend, stage and kind of seed: the share of seeds with at least one failed run there."""
    df = run.records(["seed_id", "seed_source", "backend", "status", "stage"])
    df = df.assign(kind=_kind(df))
    tried = df.groupby(["backend", "kind"])["seed_id"].nunique()
    bad = df[df["status"].isin(FAILED) & df["stage"].notna()]
    if bad.empty:
        return pd.DataFrame(columns=["backend", "kind", "stage", "seeds failing", "share of seeds"])
    out = bad.groupby(["backend", "kind", "stage"])["seed_id"].nunique().rename("seeds failing").reset_index()
    out["share of seeds"] = out["seeds failing"] / [tried[(b, k)] for b, k in zip(out["backend"], out["kind"])]
    return out.sort_values(["backend", "kind", "stage"], ignore_index=True)


def support_matrix(run: Run) -> pd.DataFrame:
    """Operator x stack from single-operator seeds: ok, fails, or the share that worked."""
    m = run.support_matrix("share", ops_only=True)
    if m.empty:
        return m
    m = m[[c for c in m.columns if c not in (run.reference, run.oracle)]]

    def cell(v):
        return "" if v != v else "ok" if v == 1 else "FAIL" if v == 0 else f"{v:.0%}"
    return m.apply(lambda col: col.map(cell)).reset_index()


def tolerance_table(run: Run) -> pd.DataFrame:
    """Per backend: the share of compared runs that diverge at each allclose tolerance."""
    t = run.tolerance_curve(TOLERANCES)
    if t.empty:
        return t
    t = t[~t["backend"].isin([run.reference])]
    wide = t.pivot(index="backend", columns="tolerance", values="pass_rate")
    wide = 1 - wide
    wide.columns = [f"tol {c:g}" for c in wide.columns]
    runs = t.groupby("backend")["runs"].first()
    return wide.assign(compared=runs).reset_index()[["backend", "compared", *wide.columns]]


def task_disagreement(run: Run) -> pd.DataFrame:
    df = run.records(["backend", "task_metric", "task_agree"])
    df = df[df["task_metric"].notna() & (df["backend"] != run.reference)]
    if df.empty:
        return pd.DataFrame(columns=["backend", "task_metric", "runs", "disagree", "mean agreement"])
    a = pd.to_numeric(df["task_agree"], errors="coerce")
    g = df.assign(_d=a < 1, _a=a).groupby(["backend", "task_metric"])
    return pd.DataFrame({"runs": g.size(), "disagree": g["_d"].mean(), "mean agreement": g["_a"].mean()}).reset_index()


def slowdowns(run: Run) -> pd.DataFrame:
    s = run.slowdown_summary()
    prep = run.records(["backend", "prepare_s"])
    med = (pd.to_numeric(prep["prepare_s"], errors="coerce").groupby(prep["backend"]).median()
           .rename("prepare s (median)"))
    return s.join(med, on="backend")


def _in_sessions(times: pd.Series, paths: list[Path], sessions: list[dict]) -> pd.Series:
    """Which records were written while a session whose figures were kept ran: its start (UTC,
    or the stamp in its file name) to its end, plus a minute for the last flush."""
    t = pd.to_datetime(times, utc=True)
    inside = pd.Series(False, index=times.index)
    for p, s in zip(paths, sessions):
        try:
            start = pd.Timestamp(s["started"]) if "started" in s else \
                pd.Timestamp(datetime.strptime(p.stem.removeprefix("session-"), "%Y%m%dT%H%M%S"), tz="UTC")
        except ValueError:  # a session of unknown start: every record may be its
            return pd.Series(True, index=times.index)
        inside |= (t >= start) & (t <= start + pd.Timedelta(seconds=s.get("wall_s", 0) + 60))
    return inside


def performance(run: Run) -> tuple[pd.DataFrame, dict]:
    """Where the campaign's worker time went, and the throughput figures, from records and stats.
    With session figures, only the records those sessions wrote count, so that the shares are of
    one and the same worker time."""
    paths = [p for p in run.folder.files("stats", suffix=".json") if p.rsplit("/", 1)[-1].startswith("session-")]
    sessions = [json.loads(run.folder.fs.open_input_stream(p).read()) for p in paths]
    builds = [b for s in sessions for b in s.get("builds", [])]
    busy = sum(w.get("busy_s", 0) for s in sessions for w in s.get("workers", []))
    # a stopped session's last worker figures can be minutes old: its workers' wall time is the measure
    capacity = sum(s.get("wall_s", 0) * len(s.get("workers", [])) for s in sessions)
    wall = sum(s.get("wall_s", 0) for s in sessions)
    df = run.records(["backend", "prepare_s", "run_s", "align_s", "variant_id", "worker_s", "time"])
    total_variants = df["variant_id"].nunique()
    if capacity:
        df = df[_in_sessions(df["time"], paths, sessions)]
    else:  # no session figures (killed before they were kept): the runs' own wall times
        busy = capacity = float(pd.to_numeric(df["worker_s"], errors="coerce").sum())
    capture = sum(b.get("capture_s") or 0 for b in builds)
    mutation = sum((b.get("build_s") or 0) - (b.get("capture_s") or 0) for b in builds)
    rows = [("capture (torch.export)", capture), ("mutation and validation", mutation)]
    num = df.assign(prepare_s=pd.to_numeric(df["prepare_s"], errors="coerce").fillna(0),
                    run_s=pd.to_numeric(df["run_s"], errors="coerce").fillna(0))
    for backend, g in num.groupby("backend"):
        rows.append((f"prepare: {backend}", float(g["prepare_s"].sum())))
    rows.append(("timed runs (all backends)", float(num["run_s"].sum())))
    rows.append(("tier 2: locating the first divergent node",
                 float(pd.to_numeric(df["align_s"], errors="coerce").sum())))
    accounted = sum(v for _, v in rows)
    rows.append(("the rest: transport, load, compare, bookkeeping, idle", max(0.0, capacity - accounted)))
    table = pd.DataFrame(rows, columns=["where", "seconds"])
    table["share of worker time"] = table["seconds"] / capacity if capacity else np.nan
    writes = sum(s.get("write_s", 0) for s in sessions)
    variants = df["variant_id"].nunique()
    figures = {"sessions": len(sessions), "wall_h": wall / 3600, "variants": variants,
               "all_variants": total_variants, "busy_s": busy,
               "per_hour": variants / (wall / 3600) if wall else float("nan"),
               "utilisation": max(busy, accounted) / capacity if capacity else float("nan"), "write_s": writes}
    return table, figures


def classify(clusters: pd.DataFrame, known: KnownIssues) -> dict:
    """Each cluster's class and note: the known issue that matches it (its own id, a ``_known`` entry,
    then a ``_by_message`` rule: nobody read that cluster's reproducer, only a message that leaves
    no doubt, and the table says so), else what its explanation says (``explained``, or ``benign``)."""
    notes = {}
    for r, name in zip(clusters.itertuples(), known.match(clusters)):
        if name is not None:
            issue = known[name]
            how = {} if issue.by_id else {"rule": name} if issue.message is not None else {"issue": name}
            notes[r.cluster] = {"class": issue.klass, "note": issue.note, "same_as": issue.same_as,
                                "reproducer": issue.reproducer, **how}
        elif isinstance(r.explanation, str):
            notes[r.cluster] = {"class": "benign" if r.kind == Kind.BENIGN else "explained",
                                "derived": r.explanation}
    return notes


def _reproducer(r, note: dict, repro_root: Path) -> str:
    for folder in [note.get("reproducer"), r.cluster, *(r.merged or [])]:
        if folder and (repro_root / folder / "repro.py").exists():
            return f"[{folder}](findings/{folder}/)"
    return ""


def cluster_table(run: Run, known: KnownIssues, repro_root: Path, limit: int = 60) -> pd.DataFrame:
    c = run.clusters()
    if c.empty:
        return c
    notes = classify(c, known)
    shown = (np.arange(len(c)) < limit) | c["cluster"].isin([k for k, v in notes.items()
                                                             if "rule" not in v and "issue" not in v])
    rows = []
    for r in c[shown].itertuples():  # the first ``limit``, and every one with a note of its own
        note = notes.get(r.cluster) or {}
        label = CLASSES.get(note.get("class"), "") + (f" (rule {note['rule']})" if "rule" in note else
                                                      f" ({note['issue']})" if "issue" in note else "")
        if "derived" in note:
            label = f"explained: {note['derived']}" if note["class"] == "explained" else f"benign: {note['derived']}"
        impact = "" if r.impact != r.impact else int(r.impact)
        rows.append({"cluster": r.cluster, "level": r.level, "vendor": "yes" if r.vendor else "",
                     "runs": r.count, "seeds": r.seeds, "impact": impact, "backends": ", ".join(r.backends),
                     "what": describe(r)[:140], "across releases": release_note(r), "class": label,
                     "reproducer": _reproducer(r, note, repro_root)})
    out = pd.DataFrame(rows)
    return out if out["across releases"].astype(bool).any() else out.drop(columns="across releases")


def rule_notes(run: Run, known: KnownIssues) -> list[str]:
    """One line per matched issue that is not a cluster id: what it covers, in clusters and runs, and its note."""
    c = run.clusters()
    if c.empty:
        return []
    notes = classify(c, known)
    lines = []
    for issue in known.issues:
        hit = c[c["cluster"].map(lambda cid: issue.name in ((notes.get(cid) or {}).get("rule"),
                                                            (notes.get(cid) or {}).get("issue")))]
        if len(hit) and not issue.by_id:
            how, what = ("matched by message", "rule") if issue.message is not None else \
                ("matched on cluster columns", "issue")
            url = f" ({issue.url})" if issue.url else ""
            lines.append(f"- **{what} {issue.name}** ({CLASSES[issue.klass]}; {len(hit)} clusters, "
                         f"{int(hit['count'].sum())} runs, {how}): {issue.note}{url}")
    return lines


def render(run: Run, known: KnownIssues, repro_root: Path, command: str,
           annotations_file: str = "docs/findings/annotations.yaml") -> str:
    perf, fig = performance(run)
    notes = known.text.get("_summary", "")
    sections = [
        f"# {known.text.get('_title', 'Findings: one model zoo, five CPU stacks')}", "",
        f"Generated by `{command}` from the run folder `{run.folder}` (campaign `{run.name}`); the class and "
        f"note of each finding come from `{annotations_file}`. Do not edit by hand; re-run the script.",
        "", notes, "",
        "## What ran", "", markdown_table(overview(run)), "",
        "## Findings", "",
        "Clusters, most severe and largest first. `vendor`: a target's own failure or a target-divergent "
        "result, the kind to report. Each reproducer folder holds `repro.py` (plain PyTorch and the one "
        "stack's package) and `report.md`.", "",
        markdown_table(cluster_table(run, known, repro_root)), "",
    ]
    shown = run.clusters(benign=True)
    present = set(shown["cluster"]) | {m for ms in shown["merged"] for m in ms}
    for issue in known.issues:
        if issue.by_id and issue.note and issue.name in present:
            sections += [f"- **{issue.name}** ({CLASSES.get(issue.klass, issue.klass)}): {issue.note}"]
    rules = rule_notes(run, known)
    if rules:
        sections += ["", "Clusters without a note of their own are classed by the first of these known issues "
                     "that matches them (`_known`: on cluster columns; `_by_message`: on the message):", "", *rules]
    explained = run.clusters()
    explained = explained[explained["explanation"].notna() & explained["known"].isna()]
    if len(explained):
        sections += ["", f"{len(explained)} clusters are explained with no note by hand: eager, made to compute "
                     "the way the hypothesis says, is as far off as the stack (`workers/judge/explain.py`)."]
    sections += ["", "## Failures per stack and stage", "",
                 "The share of seeds with at least one failed run at that stage (models and single operators apart).",
                 "", markdown_table(failures_by_stage(run), _pct), "",
                 "## Divergence at each tolerance", "",
                 "The share of compared runs (both sides completed) that fail `allclose(atol=rtol=t)` "
                 "against eager.", "", markdown_table(tolerance_table(run), _pct), "",
                 "Mismatches after the per-dtype tolerances and the float64 oracle's verdict:", "",
                 markdown_table(run.divergence(), _pct), "",
                 "## Task-level disagreement", "",
                 "Top-1 class, argmax token, pixel argmax or matched detections against eager.", "",
                 markdown_table(task_disagreement(run), _pct), "",
                 "## Slowdowns against eager", "",
                 "Median latency ratio per run (warm, median of the timed calls); prepare time is convert or compile.",
                 "", markdown_table(slowdowns(run)), "",
                 "## Operator support matrix (single-operator seeds)", "",
                 "`ok`: every run of that operator completed; `FAIL`: none did; a share otherwise.", "",
                 markdown_table(support_matrix(run)), "",
                 "## The campaign's own performance", "",
                 (f"{fig['variants']} variants (of the {fig['all_variants']} in the folder; the rest ran in sessions "
                  f"stopped before their figures were kept) in {fig['wall_h']:.2f} h of wall time over "
                  f"{fig['sessions']} session(s): {fig['per_hour']:.0f} variants an hour; workers busy "
                  f"{fig['utilisation']:.0%} of the time they were up; writing records took {fig['write_s']:.1f} s "
                  "in the driver."
                  if fig["sessions"] else
                  f"{fig['variants']} variants; no session figures in this folder (its sessions were stopped before "
                  f"they were kept), so the shares below are of the runs' own worker time ({fig['busy_s']:.0f} s) "
                  "and the build rows are empty."), "",
                 markdown_table(perf, _pct), ""]
    return "\n".join(sections)
