"""First grouping of failures and divergences into clusters, and the campaign summary.

Works on a pandas DataFrame of records, so it needs no torch.
"""
from __future__ import annotations

import pandas as pd

from .signature import signature_id, template
from .table import format_table

SEVERITY = {"crash": 5, "oom": 4, "timeout": 4, "mismatch": 3, "error": 2, "unsupported": 1, "invalid": 0}
_KEY = ["backend", "status", "stage", "error_type", "template"]


def clusters(df: pd.DataFrame) -> pd.DataFrame:
    """One row per cluster of non-ok records: key, count, variants and seeds affected, an example."""
    bad = df[df["status"] != "ok"].copy()
    if bad.empty:
        return pd.DataFrame(columns=["cluster", *_KEY, "count", "seeds", "example"])
    mismatch = bad["status"] == "mismatch"
    bad["template"] = bad["message"].map(template)
    bad.loc[mismatch, "error_type"] = bad.loc[mismatch, "verdict"].fillna("-")
    bad.loc[mismatch, "template"] = ("symptom " + bad.loc[mismatch, "symptom"].fillna("-") + ", "
                                     + bad.loc[mismatch, "output_dtype"].fillna("-"))
    bad[_KEY] = bad[_KEY].fillna("-")
    grouped = bad.groupby(_KEY, dropna=False).agg(
        count=("variant_id", "size"), seeds=("seed_id", "nunique"), example=("variant_id", "first")).reset_index()
    grouped.insert(0, "cluster", [signature_id(*map(str, k)) for k in grouped[_KEY].itertuples(index=False)])
    grouped["severity"] = grouped["status"].map(SEVERITY).fillna(0)
    return grouped.sort_values(["severity", "count"], ascending=[False, False]).drop(columns="severity") \
        .reset_index(drop=True)


def status_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Runs per backend and status, with totals."""
    if df.empty:
        return pd.DataFrame()
    table = pd.crosstab(df["backend"], df["status"])
    table["total"] = table.sum(axis=1)
    return table


def render_summary(df: pd.DataFrame) -> str:
    t = status_summary(df)
    if t.empty:
        return "no records"
    headers = ["backend", *t.columns]
    return format_table(headers, [[b, *map(int, row)] for b, row in zip(t.index, t.values)])


def render_clusters(c: pd.DataFrame, limit: int = 50) -> str:
    if c.empty:
        return "no failures or divergences: nothing to triage"
    rows = [[r.cluster, r.count, r.seeds, r.backend, r.status, r.stage, r.error_type, r.template]
            for r in c.head(limit).itertuples()]
    return format_table(["cluster", "runs", "seeds", "backend", "status", "stage", "type", "signature"], rows,
                        max_width=70)
