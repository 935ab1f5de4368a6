"""Terminal views of a run: the status summary, the cluster list, and the diff of two campaigns.

Works on pandas DataFrames of records, so it needs no torch.
"""
from __future__ import annotations

import pandas as pd

from core.bugs import Kind, Stage

from .table import format_table


def clusters(df: pd.DataFrame, reference: str = "eager@cpu", oracle: str = "eager-fp64@cpu") -> pd.DataFrame:
    """Crash and discrepancy clusters of a records frame (see ``analysis.clusters``)."""
    from .clusters import clusters as build

    return build(df, reference, oracle)


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


def describe(row) -> str:
    """One line that says what a cluster is: the error and its template, or the divergence."""
    if row.kind == Kind.CRASH:
        return f"{str(row.error_type).rsplit('.', 1)[-1]}: {row.template}"
    where = f" at {row.first_div_op}" if row.first_div_op not in (None, "-") else ""
    band = "" if row.band in (None, "-") else f", tol_ratio {row.band}"
    return f"{row.symptom} {row.verdict}{where} ({row.output_dtype}{band})"


def _where(row) -> str:
    return row.stage if row.kind == Kind.CRASH else Stage.COMPARE


def _backends(row, width: int = 36) -> str:
    text = ",".join(row.backends)
    return text if len(text) <= width else f"{row.backends[0]} +{len(row.backends) - 1}"


def render_clusters(c: pd.DataFrame, limit: int = 50) -> str:
    if c.empty:
        return "no failures or divergences: nothing to triage"
    rows = [[r.cluster, r.level, "yes" if r.vendor else "", r.count, r.seeds, _backends(r), _where(r), describe(r)]
            for r in c.head(limit).itertuples()]
    table = format_table(["cluster", "severity", "vendor", "runs", "seeds", "backends", "stage", "what"], rows,
                         max_width=90)
    more = f"\n... {len(c) - limit} more clusters (--limit)" if len(c) > limit else ""
    return f"{table}{more}\n{len(c)} clusters: {int(c['vendor'].sum())} vendor findings, " \
           f"{int((c['kind'] == Kind.CRASH).sum())} failure and {int((c['kind'] != Kind.CRASH).sum())} discrepancy " \
           f"clusters"


def diff(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Clusters by stable id: ``new`` (only after), ``gone`` (only before), ``still`` (both), with counts."""
    a = before.set_index("cluster")
    b = after.set_index("cluster")
    ids = b.index.union(a.index, sort=False)
    info = pd.concat([b, a[~a.index.isin(b.index)]]).loc[ids]
    state = pd.Series("still", index=ids)
    state[~ids.isin(a.index)] = "new"
    state[~ids.isin(b.index)] = "gone"
    out = info.assign(state=state, count_before=a["count"].reindex(ids).fillna(0).astype(int),
                      count_after=b["count"].reindex(ids).fillna(0).astype(int)).reset_index()
    order = {"new": 0, "gone": 1, "still": 2}
    return out.sort_values(["state", "severity", "count_after", "count_before"], ascending=[True, False, False, False],
                           key=lambda s: s.map(order) if s.name == "state" else s, ignore_index=True)


def render_diff(d: pd.DataFrame, limit: int = 50) -> str:
    counts = d["state"].value_counts() if len(d) else pd.Series(dtype=int)
    head = f"{int(counts.get('new', 0))} new, {int(counts.get('gone', 0))} gone, " \
           f"{int(counts.get('still', 0))} still there"
    if d.empty:
        return f"{head}: neither run has clusters"
    rows = [[r.state, r.cluster, r.level, "yes" if r.vendor else "", r.count_before, r.count_after, _backends(r),
             describe(r)] for r in d.head(limit).itertuples()]
    return format_table(["state", "cluster", "severity", "vendor", "before", "after", "backends", "what"], rows,
                        max_width=90) + f"\n{head}"
