"""The report's tables: what each section shows, as DataFrames, and their cells as the page's
template (templates/parts.html.j2) writes them.

Every figure here is read from what triage reads (``Run.clusters``, the run's manifest, its records)
so that the report and ``gapfuzz triage`` cannot disagree: a backend's vendor runs are the runs of
the clusters triage flags ``vendor``, and a run triage explains is counted as explained, not as a
finding. The template escapes every cell; only ``Raw`` cells (links and commands built here with
``Raw.format``, which escapes what it is given) go into the page as they are.
"""
from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd
from markupsafe import Markup

from gapfuzz.core.bugs import EXAMPLE_PROBE, Kind, Verdict
from gapfuzz.core.modes import DEFAULT_MODE
from gapfuzz.results.columns import texts, versions_of

from . import option_cover as _cover
from . import portability as _port
from .api import Run

# what triage makes of a cluster's runs, in the order the divergence table shows them
VENDOR_DIVERGENT, VENDOR_FAILURES = "vendor divergent", "vendor failures"
EXPLAINED, BENIGN, PYTORCH, OTHER = "explained", "benign", "pytorch", "other"
CLASSES = (VENDOR_DIVERGENT, VENDOR_FAILURES, EXPLAINED, BENIGN, PYTORCH, OTHER)
REPRO_FILES = ("report.md", "repro.py")
TIMING_COLUMNS = ["variant_id", "seed_id", "seed_source", "family", "backend", "status", "stage", "latency_ms",
                  "probe", "mode"]


class Raw(Markup):
    """A cell that is HTML already: built with ``Raw(...).format(...)``, which escapes its arguments."""


@dataclass(frozen=True)
class Cells:
    """A table as the template writes it: header texts and rows of cell texts (or ``Raw``)."""

    columns: list[str]
    rows: list[list[str]]


def _cell(v) -> str:
    if isinstance(v, Markup):
        return v
    if v is None or v is pd.NA or v is pd.NaT:
        return ""
    if isinstance(v, (float, np.floating)):
        return "" if v != v else f"{v:.3g}"
    if isinstance(v, (list, tuple, np.ndarray)):
        v = ", ".join(map(str, v))
    return str(v)


def cells(df: pd.DataFrame | None) -> Cells:
    """A DataFrame's cells (no index) as text; an empty or missing frame has no rows."""
    if df is None or df.empty:
        return Cells([], [])
    return Cells([str(c) for c in df.columns],
                 [[_cell(v) for v in row] for row in df.itertuples(index=False, name=None)])


# -- what triage makes of each run
def cluster_class(row) -> str:
    """The class triage gives a cluster's runs: a vendor finding (divergence or failure), an explained
    behaviour (OpenVINO's bfloat16 default, say), benign, PyTorch's own (reference-suspect), or other
    (the reference's divergences, failures outside a stack's own stages)."""
    if row.kind == Kind.BENIGN:
        return BENIGN
    if row.vendor:
        return VENDOR_FAILURES if row.kind == Kind.FAILURE else VENDOR_DIVERGENT
    if isinstance(row.explanation, str) and row.explanation:
        return EXPLAINED
    if row.verdict == Verdict.REFERENCE_SUSPECT:
        return PYTORCH
    return OTHER


def cluster_runs(run: Run) -> pd.DataFrame:
    """One row per (cluster, backend): the runs it holds there and its class (``cluster_class``). The
    counts are triage's: a cluster seen on one backend label is its ``count``; one seen on several (a
    stack under two option sets, a reference-suspect cluster) is split by its records."""
    rows = []
    for r in run.clusters(benign=True).itertuples():
        kind = cluster_class(r)
        if len(r.backends) == 1:
            counts = {r.backends[0]: r.count}
        else:
            counts = run.cluster(r.cluster, ["backend"])["backend"].value_counts().to_dict()
        rows += [(r.cluster, backend, int(n), kind) for backend, n in counts.items()]
    return pd.DataFrame(rows, columns=["cluster", "backend", "runs", "class"])


def divergence(run: Run) -> pd.DataFrame:
    """Per target: completed runs and mismatches (records), then the runs of triage's clusters by class;
    ``vendor_rate`` is the runs of vendor discrepancy clusters over completed runs, ``explained_rate``
    likewise. The reference and the oracle are not targets and have no row."""
    d = run.divergence().set_index("backend")[["completed", "mismatches"]]
    runs = cluster_runs(run)
    by_class = runs.pivot_table(index="backend", columns="class", values="runs", aggfunc="sum") if len(runs) \
        else pd.DataFrame()
    backends = sorted((set(d.index) | set(by_class.index)) - {run.reference, run.oracle})
    out = pd.DataFrame(index=pd.Index(backends, name="backend"))
    out["completed"] = d["completed"].reindex(backends).fillna(0).astype(int)
    out["mismatches"] = d["mismatches"].reindex(backends).fillna(0).astype(int)
    for c in CLASSES:
        out[c] = (by_class[c] if c in by_class else pd.Series(dtype=float)).reindex(backends).fillna(0).astype(int)
    completed = out["completed"].where(out["completed"] > 0)
    out["mismatch_rate"] = out["mismatches"] / completed
    out["vendor_rate"] = out[VENDOR_DIVERGENT] / completed
    out["explained_rate"] = out[EXPLAINED] / completed
    return out.reset_index()


# -- timing
def slowdowns(run: Run) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """(slowdowns, summary, probe runs left out): latency against the reference on the example inputs
    only, per mode; the oracle is left out (float64 is no speed anyone deploys), and so is every other
    input set: a probe run is timed once, not as a median, and a layout probe on a stack that compiles
    again for new strides (Inductor) times that compile."""
    df = run.records(TIMING_COLUMNS)
    example = (df["probe"].isna() | (df["probe"] == EXAMPLE_PROBE)).to_numpy()
    left_out = int((~example & (df["backend"] != run.oracle).to_numpy() & df["latency_ms"].notna().to_numpy()).sum())
    df = df[example & (df["backend"] != run.oracle).to_numpy()]
    mode = df["mode"].astype(object).where(df["mode"].notna(), DEFAULT_MODE)
    parts, summaries = [], []
    for m, g in df.groupby(mode, sort=True):
        parts.append(_port.slowdowns(g, run.reference).assign(mode=m))
        summaries.append(_port.slowdown_summary(g, run.reference).assign(mode=m))
    if not parts:
        return _port.slowdowns(df, run.reference), _port.slowdown_summary(df, run.reference), left_out
    summary = pd.concat(summaries, ignore_index=True)
    summary = summary[["mode", *summary.columns.drop("mode")]] if len(summaries) > 1 else summary.drop(columns="mode")
    return pd.concat(parts, ignore_index=True), summary, left_out


# -- the campaign: settings and stack versions
def _json(v) -> str:
    return json.dumps(v, sort_keys=True, separators=(", ", ": "), default=str) if v not in (None, {}, []) else ""


def _versions_of(value) -> dict:
    """A record's ``versions``; a torn one is none."""
    try:
        return versions_of(value)
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}


def _versions(run: Run) -> pd.DataFrame:
    """Per backend: the stack's version, torch, python and OS its workers reported (distinct values)."""
    r = run.records(["backend", "backend_version", "torch_version", "versions"])
    parsed = [_versions_of(v) for v in r["versions"]]
    v = pd.DataFrame({"backend": r["backend"].to_numpy(), "version": r["backend_version"].to_numpy(),
                      "torch": r["torch_version"].to_numpy(), "python": [p.get("python") for p in parsed],
                      "os": [p.get("os") for p in parsed]})

    def distinct(s: pd.Series) -> str:
        return ", ".join(sorted({str(x) for x in s if isinstance(x, str) and x}))
    return v.groupby("backend").agg(distinct)


def settings(run: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the campaign's settings as name/value rows, one row per backend: role, stack, device, options,
    option space, modes and the versions its records report). From ``run.json`` as the driver resolved
    it; a folder written before run.json gives its campaign file's ``compare`` and its records' options."""
    m = run.manifest
    roles = {run.reference: "reference", **({run.oracle: "oracle"} if run.oracle else {})}
    versions = _versions(run)
    if m is not None:
        compare = m.compare
        rows = [("campaign", m.campaign), ("reference", m.reference), ("oracle", m.oracle or "none"),
                ("targets", ", ".join(m.targets)), ("modes", ", ".join(m.modes))]
        entries = m.backends
    else:
        compare = run.campaign.get("compare") if isinstance(run.campaign.get("compare"), dict) else {}
        rows = [("campaign", run.name), ("reference", run.reference), ("oracle", run.oracle or "none"),
                ("settings", "from campaign.yaml (this folder has no run.json)")]
        opts = run.records(["backend", "stack", "device", "backend_options"])
        opts = opts.assign(backend_options=texts("backend_options", opts["backend_options"])).drop_duplicates()
        entries = {b: {"stack": g["stack"].iloc[0], "device": g["device"].iloc[0],
                       "options": ", ".join(sorted(set(g["backend_options"].dropna()) - {"{}"}))}
                   for b, g in opts.groupby("backend")}
    tolerances = compare.get("tolerances")
    if isinstance(tolerances, dict):
        rows.append(("tolerances (rtol, atol)", "; ".join(
            f"{dtype}: {', '.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
            for dtype, v in sorted(tolerances.items()))))
    rows += [(k, _json(v) if isinstance(v, (dict, list)) else str(v)) for k, v in sorted(compare.items())
             if k != "tolerances"]
    table = []
    ran = option_runs(run)
    for name in sorted(set(entries) | set(versions.index), key=lambda b: (b not in roles, roles.get(b, ""), b)):
        e = entries.get(name, {}) if isinstance(entries.get(name), dict) else {}
        v = versions.loc[name] if name in versions.index else {}
        opts = e.get("options")
        cover = e.get("option_cover")
        table.append({"backend": name, "role": roles.get(name, "target"), "stack": e.get("stack", ""),
                      "device": e.get("device", ""), "options": opts if isinstance(opts, str) else _json(opts),
                      "option space": _json(e.get("option_space")),
                      "option cover": cover if isinstance(cover, str) else _json(cover),
                      **ran.get(name, {"values run": "", "pairs run": ""}), "modes": ", ".join(e.get("modes") or []),
                      **{k: v.get(k, "") for k in ("version", "torch", "python", "os")}})
    return pd.DataFrame(rows, columns=["setting", "value"]), pd.DataFrame(table)


def option_runs(run: Run) -> dict:
    """Per target with an option space, from its records: ``values run`` (each option's values, and any
    value a mode never ran) and ``pairs run`` (per mode, the pairs of values run over the campaign out of
    the pairs in the space, and the fewest and most one seed ran)."""
    spaces = run.option_spaces()
    if not spaces:
        return {}
    df = run.records(_cover.COLUMNS)
    whole = _cover.pair_coverage(df, spaces, ("mode",))
    seeds = _cover.pair_coverage(df, spaces, ("seed_id", "mode"))
    values = _cover.values_run(df, spaces)
    out = {}
    for backend in spaces:
        pairs = []
        for r in whole[whole["backend"] == backend].itertuples():
            per_seed = seeds.loc[(seeds["backend"] == backend) & (seeds["mode"] == r.mode), "pairs"]
            pairs.append(f"{r.mode}: {r.pairs}/{r.of} (a seed: {per_seed.min()} to {per_seed.max()})")
        mine = values[values["backend"] == backend]
        texts = []
        for option, g in mine.groupby("option", sort=True):
            ran_any = {v for vs in g["values"] for v in vs}
            had = [v for v in dict.fromkeys(_cover.text(x) for x in spaces[backend][option]) if v in ran_any]
            gaps = [f"{m}: no {', '.join(miss)}" for m, miss in zip(g["mode"], g["missing"]) if len(miss)]
            texts.append(f"{option}: {', '.join(had)}" + (f" ({'; '.join(gaps)})" if gaps else ""))
        out[backend] = {"values run": "; ".join(texts), "pairs run": "; ".join(pairs)}
    return out


# -- reproducers
def reproducer_links(run: Run, cluster, out_dir: Path | None) -> Raw:
    """Links to the cluster's ``repros/<id>/report.md`` and ``repro.py`` (its own, else a folded-in
    cluster's), relative to the folder the report is written to; empty when none was made."""
    if run.path is None:
        return Raw("")
    for cid in (cluster.cluster, *(cluster.merged if isinstance(cluster.merged, list) else [])):
        folder = Path(run.path) / "repros" / cid
        found = [f for f in REPRO_FILES if (folder / f).is_file()]
        if found:
            return Raw(" ").join(Raw('<a href="{}">{}</a>').format(_href(folder / f, out_dir), f) for f in found)
    return Raw("")


def _href(target: Path, out_dir: Path | None) -> str:
    base = Path(out_dir) if out_dir is not None else None
    if base is None:
        return target.resolve().as_uri()
    try:
        rel = os.path.relpath(target.resolve(), base.resolve())
    except ValueError:  # another drive
        return target.resolve().as_uri()
    return quote(Path(rel).as_posix())


def why_command(run: Run, cluster_id: str) -> Raw:
    command = f"gapfuzz triage {shlex.quote(str(run.folder))} --why {shlex.quote(cluster_id)}"
    return Raw("<code>{}</code>").format(command)
