"""One self-contained HTML report of a run: tables and plots, nothing fetched from anywhere.

Plots are matplotlib (Agg) PNGs inlined as base64, the CSS is inline, so the file can be
mailed or attached to a bug report and opens offline. The page is written by Jinja2 templates
(``templates/``) with autoescaping on: every text from a run is escaped where it lands, and this
module gives them data, not markup. Every section has exactly one plot;
a section without data shows a plot that says so, so a missing plot is always a defect. Above
the sections, the campaign's settings and the stack versions its records report (tables only).
The tables are built in ``analysis.report_tables`` from what triage reads: a backend's vendor
rate counts the runs of triage's vendor clusters, and the runs triage explains are shown apart.
Each cluster links to its reproducer (``repros/<id>/``) where ``gapfuzz repro`` made one; where the
campaign ran a stack in several releases, each says in which it shows, in triage's words.
"""
from __future__ import annotations

import base64
import datetime as dt
import io
import os
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.patches
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from jinja2 import Environment, PackageLoader, StrictUndefined

from gapfuzz.core.bugs import Status, Verdict

from . import report_tables as tables
from .api import Run
from .clusters import LEVEL
from .triage import culprit_text, describe, release_note

MAX_OPS = 60
MAX_CLUSTERS = 100
PAGES = Environment(loader=PackageLoader("gapfuzz.analysis", "templates"), autoescape=True, trim_blocks=True,
                    lstrip_blocks=True, undefined=StrictUndefined)


@dataclass(frozen=True)
class Plot:
    alt: str
    png: str  # base64


@dataclass(frozen=True)
class Shown:
    """What a section shows under its plot: a table, and the arguments of its note in
    templates/notes.html.j2 (None: the section has no note here)."""

    plot: Plot
    table: pd.DataFrame | None
    note: dict | None = None
    empty: str = "nothing to show"  # what stands for a table without rows


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


# Labels are a run's names (backends, operators, patterns): plain text, never mathtext, or a name holding
# ``$\undefinedmacro$`` stops the report with matplotlib's parse error
PLAIN_TEXT = {"text.parse_math": False, "text.usetex": False}


def _figure(title: str, draw, has_data: bool, size=(8, 3.5)) -> Plot:
    with plt.rc_context(PLAIN_TEXT):  # drawn and saved in it: mathtext is parsed when the figure is drawn
        fig, ax = plt.subplots(figsize=size)
        if has_data:
            draw(fig, ax)
        else:
            ax.axis("off")
            ax.text(0.5, 0.5, f"no data for this plot in this run\n({title})", ha="center", va="center",
                    fontsize=12, color="#666", transform=ax.transAxes)
        ax.set_title(title)
        return Plot(title if has_data else f"{title}: no data", _png(fig))


STATUS_COLORS = {Status.OK: "#4dac26", Status.MISMATCH: "#f1a340", Status.ERROR: "#d7191c",
                 Status.UNSUPPORTED: "#999999", Status.CRASH: "#67001f", Status.TIMEOUT: "#762a83",
                 Status.OOM: "#8c510a", Status.INVALID: "#dddddd"}
SEVERITY_COLORS = {6: "#67001f", 5: "#b2182b", 4: "#d6604d", 3: "#f4a582", 2: "#4393c3", 1: "#bbbbbb", 0: "#dddddd"}


def _status(run: Run, out_dir=None) -> Shown:
    t = run.status_summary().rename_axis(columns=None)
    parts = t.drop(columns="total", errors="ignore")

    def draw(fig, ax):
        parts.plot.barh(stacked=True, ax=ax, color=[STATUS_COLORS.get(c, "#444444") for c in parts.columns])
        ax.set_xlabel("runs")
        ax.legend(fontsize=8, loc="lower right")
    return Shown(_figure("runs per backend and status", draw, not parts.empty), t.reset_index())


def _support(run: Run, out_dir=None) -> Shown:
    m = run.support_matrix()
    shown = m.assign(_min=m.min(axis=1)).sort_values(["_min"]).drop(columns="_min").head(MAX_OPS).sort_index() \
        if not m.empty else m

    def draw(fig, ax):
        fig.set_size_inches(2 + 0.9 * shown.shape[1], 1.5 + 0.2 * len(shown))
        data = np.ma.masked_invalid(shown.to_numpy(dtype=float))
        cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#dddddd")
        im = ax.imshow(data, aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
        ax.set_xticks(range(shown.shape[1]), shown.columns, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(shown)), shown.index, fontsize=7)
        fig.colorbar(im, ax=ax, label="share of attempts that completed", shrink=0.6)
    note = {"shown": len(shown), "total": len(m)} if len(m) else None
    return Shown(_figure("operator support per backend", draw, not m.empty), run.portability(), note)


def _divergence(run: Run, out_dir=None) -> Shown:
    d = tables.divergence(run)
    shown = d[d["completed"] > 0]

    def draw(fig, ax):
        x = np.arange(len(shown))
        for i, (col, label, color) in enumerate((
                ("mismatch_rate", str(Status.MISMATCH), "#f1a340"),
                ("vendor_rate", "vendor findings (triage's vendor clusters)", "#b2182b"),
                ("explained_rate", "explained (precision, options: no finding)", "#92c5de"))):
            ax.bar(x + (i - 1) * 0.27, shown[col], 0.27, label=label, color=color)
        ax.set_xticks(x, shown["backend"], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("share of completed runs")
        ax.legend(fontsize=8)
    return Shown(_figure("divergence rate per backend", draw, not shown.empty), d,
                 {"reference_suspect": str(Verdict.REFERENCE_SUSPECT)})


def _tolerance(run: Run, out_dir=None) -> Shown:
    t = run.tolerance_curve()

    def draw(fig, ax):
        for backend, g in t.groupby("backend"):
            ax.semilogx(g["tolerance"], g["pass_rate"], marker=".", label=backend)
        ax.set_xlabel("atol = rtol")
        ax.set_ylabel("pass rate")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
    table = t.pivot(index="backend", columns="tolerance", values="pass_rate").reset_index() if len(t) else t
    if len(t):
        table.columns = [c if isinstance(c, str) else f"{c:.0e}" for c in table.columns]
    return Shown(_figure("pass rate against tolerance", draw, not t.empty), table.iloc[:, ::2] if len(t) else t)


def _slowdown(run: Run, out_dir=None) -> Shown:
    s, summary, left_out = tables.slowdowns(run)

    def draw(fig, ax):
        groups = [(b, g["slowdown"].to_numpy()) for b, g in s.groupby("backend")]
        ax.boxplot([v for _, v in groups], showfliers=False)
        ax.set_xticks(range(1, len(groups) + 1), [b for b, _ in groups], rotation=30, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.axhline(1, color="#888", lw=0.8)
        ax.set_ylabel(f"latency / {run.reference}")
    return Shown(_figure(f"slowdown against {run.reference}", draw, not s.empty), summary,
                 {"reference": run.reference, "oracle": run.oracle, "left_out": left_out})


def _clusters(run: Run, out_dir=None) -> Shown:
    c = run.clusters()
    top = c.head(20).iloc[::-1]

    def draw(fig, ax):
        ax.barh(top["cluster"], top["count"], color=top["severity"].map(SEVERITY_COLORS).fillna("#bbbbbb"))
        ax.tick_params(axis="y", labelsize=7)
        levels = sorted(set(top["severity"]), reverse=True)
        ax.legend(handles=[matplotlib.patches.Patch(color=SEVERITY_COLORS[v], label=LEVEL[v]) for v in levels],
                  fontsize=7, loc="lower right")
        ax.set_xlabel("runs")
        fig.set_size_inches(8, 1 + 0.25 * len(top))
    shown = c.head(MAX_CLUSTERS)
    rows = pd.DataFrame({
        "cluster": shown["cluster"],
        "reproducer": pd.Series([tables.reproducer_links(run, r, out_dir) for r in shown.itertuples()],
                                index=shown.index, dtype=object),  # object: the links stay Raw
        "severity": shown["level"], "vendor": shown["vendor"].map({True: "yes", False: ""}),
        "runs": shown["count"], "seeds": shown["seeds"],
        "impact": shown["impact"].map(lambda v: "" if v != v else int(v)), "known": shown["known"].fillna(""),
        "what": [describe(r) for r in shown.itertuples()],
        **({"across releases": [release_note(r) for r in shown.itertuples()],
            "releases tried": shown["releases"].fillna("")} if shown["release_note"].notna().any() else {}),
        "why": pd.Series([tables.why_command(run, cid) for cid in shown["cluster"]], index=shown.index, dtype=object),
        "where in the compiler": [culprit_text(r) for r in shown.itertuples()],
        "shared options": shown["shared_options"].fillna(""),
        "backends": shown["backends"].map(", ".join), "probes": shown["probes"].map(lambda v: ", ".join(v[:4])),
        "modes": shown["modes"].map(", ".join), "gradients": shown["grad_at"].map(lambda v: ", ".join(v[:4])),
        "families": shown["families"].map(lambda v: ", ".join(v[:5])),
        "mutations": shown["mutations"].map(lambda v: ", ".join(v[:5])), "representative": shown["representative"],
    }) if len(c) else c
    return Shown(_figure("largest clusters (top 20)", draw, not c.empty), rows, {} if len(c) else None,
                 "no failures or divergences")


def _coverage(run: Run, out_dir=None) -> Shown:
    """Pass coverage: the Inductor passes each compiler target ran and the pattern-matcher patterns it
    fired, by how many variants did (the rare ones are what coverage guidance rewards)."""
    cols = ["variant_id", "backend", "compiler_passes", "compiler_patterns"]
    r = run.records(cols)
    r = r[r["compiler_passes"].map(lambda v: v is not None and len(v) > 0)]
    parts = []
    for column, kind in (("compiler_passes", "pass"), ("compiler_patterns", "pattern")):
        e = r[["variant_id", "backend", column]].explode(column).dropna().drop_duplicates()
        if len(e):
            parts.append(e.groupby(["backend", column]).size().rename("variants").reset_index()
                         .rename(columns={column: "name"}).assign(kind=kind))
    t = pd.concat(parts, ignore_index=True).sort_values(["kind", "variants"], ascending=[True, False]) if parts \
        else pd.DataFrame(columns=["backend", "name", "variants", "kind"])
    patterns = t[t["kind"] == "pattern"].head(25).iloc[::-1]

    def draw(fig, ax):
        ax.barh(patterns["name"].str.slice(0, 48), patterns["variants"], color="#4c72b0")
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlabel("variants that fired it")
        fig.set_size_inches(8, 1 + 0.25 * len(patterns))
    return Shown(_figure("pattern-matcher patterns fired (top 25)", draw, not patterns.empty),
                 t[["kind", "backend", "name", "variants"]], empty="no Inductor compile recorded its passes")


SECTIONS = [("status", "Status summary", _status), ("support", "Operator and seed support", _support),
            ("divergence", "Divergence rate", _divergence), ("tolerance", "Tolerance curves", _tolerance),
            ("slowdown", "Slowdown distributions", _slowdown), ("clusters", "Clusters", _clusters),
            ("coverage", "Compiler pass coverage", _coverage)]


def render(run: Run, out_dir: str | Path | None = None) -> str:
    """The report as one HTML string; ``out_dir``: the folder it will be written to (the run folder when
    not given), which links to reproducers are relative to. Above the sections, the campaign's settings
    and the stacks it ran, with their versions (tables only: no plot, so no section)."""
    out_dir = Path(out_dir) if out_dir is not None else run.path
    sections = []
    for key, title, build in SECTIONS:
        shown = build(run, out_dir)
        sections.append({"key": key, "title": title, "plot": shown.plot, "table": tables.cells(shown.table),
                         "note": shown.note, "empty": shown.empty})
    settings, backends = tables.settings(run)
    return PAGES.get_template("report.html.j2").render(
        run=run, records=len(run), generated=f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M}",
        settings=tables.cells(settings), backends=tables.cells(backends), sections=sections)


def write_report(run: Run, out: str | Path | None = None) -> Path:
    """Write the report (default ``RUN_DIR/report.html``) and return its path."""
    path = Path(out) if out else (run.path or Path(run.name)) / "report.html"  # a run on an object store: here
    text = render(run, path.parent)  # before anything is written: a run that cannot be rendered leaves no file
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    finally:  # a full disk, a folder where the file should be: no hidden half file outlives the command
        if tmp.exists() or tmp.is_symlink():
            tmp.unlink()
    return path
