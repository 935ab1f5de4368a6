"""Summaries of a seed catalog: export coverage per source and the top failure causes."""
from __future__ import annotations

import re

import pandas as pd

from gapfuzz.core.bugs import Stage, Status
from gapfuzz.core.ids import SeedId
from gapfuzz.core.templates import template

from .table import format_table, markdown_table

STAGES = ["built", "within cap", "captured", "ran"]


def _sources(df: pd.DataFrame) -> pd.Series:
    return df["source"].where(df["source"] != "", df["seed_id"].map(lambda s: SeedId.parse(s).source))


def coverage(df: pd.DataFrame, listed: dict[str, int] | None = None, by: str = "source") -> pd.DataFrame:
    """Per source (or family): listed, scanned, built, within the cap, captured, ran, and the rates that
    matter."""
    rows = []
    keys = _sources(df) if by == "source" else df[by].replace("", "-")
    for key, g in df.groupby(keys):
        built = g[~((g["status"] != Status.SKIPPED) & (g["stage"] == Stage.BUILD))]
        within = built[built["status"] != Status.SKIPPED]
        captured = within[within["stage"] != Stage.CAPTURE]
        ran = g[g["status"] == Status.OK]
        rows.append({by: key, **({"listed": (listed or {}).get(key)} if by == "source" else {}), "scanned": len(g),
                     "built": len(built), "within cap": len(within), "captured": len(captured), "ran": len(ran),
                     "captured / within cap": len(captured) / len(within) if len(within) else float("nan"),
                     "ran / within cap": len(ran) / len(within) if len(within) else float("nan")})
    return pd.DataFrame(rows)


def family_coverage(df: pd.DataFrame, most: int = 12, min_seeds: int = 3) -> dict[str, pd.DataFrame]:
    """Per model source: the families (of at least ``min_seeds`` seeds) that run least, worst first."""
    out = {}
    for source, g in df.groupby(_sources(df)):
        if source == "ops":
            continue
        fam = coverage(g, by="family")
        fam = fam[fam["scanned"] >= min_seeds].sort_values(["ran / within cap", "scanned"], ascending=[True, False])
        out[source] = fam.head(most).reset_index(drop=True)
    return out


def top_failures(df: pd.DataFrame, n: int = 8) -> pd.DataFrame:
    bad = df[~df["status"].isin([Status.OK, Status.SKIPPED])].copy()
    if bad.empty:
        return pd.DataFrame(columns=["source", "stage", "error_type", "cause", "seeds", "example"])
    bad["source"] = _sources(bad)  # a row made from a worker's fault (oom) knows its seed id alone
    bad["cause"] = bad["message"].map(lambda m: template(m)[:120])
    bad["error_type"] = bad["error_type"].fillna("-").map(_short_type)
    g = bad.groupby(["source", "stage", "error_type", "cause"]).agg(seeds=("seed_id", "size"),
                                                                     example=("seed_id", "first")).reset_index()
    return g.sort_values("seeds", ascending=False).groupby("source").head(n).reset_index(drop=True)


def _short_type(error_type: str) -> str:
    """An exception's class name without its module; a limit (``limit:memory 5.0GiB``) as it is."""
    return error_type.rsplit(".", 1)[-1] if re.fullmatch(r"[\w.]+", error_type) else error_type


def render_scan_summary(df: pd.DataFrame) -> str:
    cov = coverage(df)
    rows = [[r["source"], r["scanned"], r["built"], r["within cap"], r["captured"], r["ran"],
             f"{r['ran / within cap']:.0%}"] for r in cov.to_dict("records")]
    return format_table(["source", "scanned", "built", "within cap", "captured", "ran", "ran/within cap"], rows)


def _families(df: pd.DataFrame) -> dict[str, int]:
    models = df[_sources(df) != "ops"]
    return models.groupby(_sources(models))["family"].nunique().to_dict()


def render_seed_doc(df: pd.DataFrame, listed: dict[str, int], header: str) -> str:
    """docs/seeds.md: coverage per source and the top failure causes, from a catalog."""
    cov = coverage(df, listed)
    fails = top_failures(df)
    slow = df[df["status"] == Status.OK].assign(total_s=lambda d: d["build_s"].fillna(0) + d["capture_s"].fillna(0)
                                           + d["run_s"].fillna(0))
    parts = [header, "## Coverage by source", "",
             "`built`: the constructor ran; `within cap`: at most the parameter cap; `captured`: "
             "`torch.export` succeeded; `ran`: the captured graph ran on eager. The rate that matters "
             "is `ran / within cap`.", "", markdown_table(cov, percent=lambda c: c.endswith('cap')), "",
             "## Coverage by family", "",
             f"Per model source, the families of three or more seeds that run least (worst first; "
             f"{', '.join(f'{n} {s} families' for s, n in _families(df).items())} scanned in all).", ""]
    for source, fam in family_coverage(df).items():
        parts += [f"### {source}", "", markdown_table(fam, percent=lambda c: c.endswith("cap")), ""]
    parts += ["## Time per seed (built, captured and ran)", "",
             markdown_table(slow.groupby("source")["total_s"].describe(percentiles=[0.5, 0.9])[
                 ["count", "mean", "50%", "90%", "max"]].round(2).reset_index()), "",
             "## Top failure causes", "",
             "Messages are templates: numbers, shapes, names and paths masked.", ""]
    parts.append(markdown_table(fails) if not fails.empty else "No failures.")
    return "\n".join(parts) + "\n"
