"""Terminal views of a run: the status summary, the cluster list, and the diff of two campaigns.

Works on pandas DataFrames of records, so it needs no torch. Where a campaign ran a stack in several
releases, the cluster list has a column that says, in words, in which releases each cluster shows
(``analysis.releases``): a person reads "regression: worked in onnxruntime 1.31.1, wrong in 1.32.0",
not a mark to look up.
"""
from __future__ import annotations

from dataclasses import astuple

import pandas as pd

from gapfuzz.core.bugs import DEFAULT_ORACLE, DEFAULT_REFERENCE, Kind, Stage, Symptom
from gapfuzz.core.ids import CulpritName, SeedId
from gapfuzz.core.modes import modes_label

from .releases import counts as release_counts
from .table import format_table


def clusters(df: pd.DataFrame, reference: str = DEFAULT_REFERENCE, oracle: str = DEFAULT_ORACLE,
             backends: dict | None = None) -> pd.DataFrame:
    """Crash and discrepancy clusters of a records frame (see ``analysis.clusters``); ``backends``:
    run.json's, which mark each across the releases of its stack."""
    from .clusters import clusters as build

    return build(df, reference, oracle, backends=backends)


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


def seed_dtype(seed_id: str) -> str:
    """An operator seed's dtype (``ops/<op>/<dtype>/<k>``); "model" for a model seed."""
    parts = SeedId.parse(seed_id).base.split("/")
    return parts[2] if parts[0] == "ops" and len(parts) == 4 else "model"


def unmutated_by_dtype(df: pd.DataFrame) -> pd.DataFrame:
    """Per seed dtype: the variants meant to carry a mutation, and how many carried none (skipped at the
    mutate stage). Needs the columns variant_id, seed_id, status, stage and mutations."""
    if df.empty:
        return pd.DataFrame(columns=["meant", "none", "share"])
    per = df.drop_duplicates("variant_id")
    none = (per["status"] == "skipped") & (per["stage"] == Stage.MUTATE)
    meant = none | per["mutations"].map(lambda m: m is not None and len(m) > 0)
    t = pd.DataFrame({"dtype": per["seed_id"].map(seed_dtype), "meant": meant, "none": none})
    t = t.groupby("dtype")[["meant", "none"]].sum()
    t = t[t["meant"] > 0]
    return t.assign(share=t["none"] / t["meant"])


def render_unmutated(df: pd.DataFrame) -> str:
    """One line: per dtype, how many variants meant to be mutated carried no mutation."""
    t = unmutated_by_dtype(df)
    if t.empty:
        return ""
    parts = [f"{d} {int(r.none)}/{int(r.meant)}" for d, r in t.iterrows()]
    return "variants that carried no mutation (skipped), per dtype: " + ", ".join(parts)


def _given(v) -> bool:
    return v is not None and v == v and v not in ("", "-")


def _items(values, most: int = 3) -> str:
    values = list(values if values is not None else [])
    return ", ".join(map(str, values[:most])) + (f" +{len(values) - most}" if len(values) > most else "")


def describe(row) -> str:
    """One line that says what a cluster is: the error, its operator and template; the divergence; or the
    behaviour an explanation names, with its ops and dtypes."""
    if row.kind == Kind.FAILURE:
        at = f" at {row.failing_op}" if _given(getattr(row, "failing_op", None)) else ""
        return f"{_caused(row)}{str(row.error_type).rsplit('.', 1)[-1]}{at}: {row.template}"
    if str(row.symptom).startswith(Symptom.MISSING_ERROR):  # the key's symptom names the check
        at = f" at {row.first_div_op}" if _given(row.first_div_op) else ""
        raised = str(row.symptom).partition(": ")[2] or "an error"
        return f"missing check{at}: eager raises {raised}; this stack returns a result"
    if row.symptom == Symptom.STRICT:
        ops = getattr(row, "ops", None)
        on = f" at {_items(ops)}" if ops is not None and len(ops) else ""
        return (f"strict{on}: within tolerance, but bits that are exact by contract differ (a NaN's sign or "
                f"payload, a zero's sign)")
    explanation = getattr(row, "explanation", None)
    if _given(explanation):
        ops = getattr(row, "ops", None)
        on = f" at {_items(ops)}" if ops is not None and len(ops) else ""
        return f"explained: {explanation}{on} ({_items(getattr(row, 'output_dtypes', None) or [row.output_dtype])})"
    ops = getattr(row, "ops", None)
    where = f" at {row.first_div_op}" if _given(row.first_div_op) else \
        f" at {_items(ops)}" if _given(getattr(row, "culprit", None)) and ops is not None and len(ops) else ""
    grad_ops = getattr(row, "grad_ops", None)
    if str(row.symptom).startswith("grad") and grad_ops is not None and len(grad_ops):
        where += f" (backward: {_items(grad_ops)})"
    band = "" if row.band in (None, "-") else f", tol_ratio up to {row.band}"
    dtype = row.output_dtype if _given(row.output_dtype) and row.output_dtype != "-" else \
        _items(getattr(row, "output_dtypes", None) or ["-"])
    modes = list(getattr(row, "modes", None) if getattr(row, "modes", None) is not None else [])
    mode = modes_label(modes)
    grads = getattr(row, "grad_at", None)
    seen = f"; gradients: {_items(grads)}" if grads is not None and len(grads) else ""  # the wrong gradients
    if seen and not str(row.symptom).startswith("grad") and grad_ops is not None and len(grad_ops):
        seen += f" (backward: {_items(grad_ops)})"  # a forward defect's gradients: the backward ops they took
    suspect = ""
    if row.verdict == "reference-suspect":
        numpy = getattr(row, "numpy_agrees", None)
        suspect = f"; PyTorch's: {getattr(row, 'consensus', None) or 'the targets'} agree" + \
            (", numpy too" if numpy is True else "")
    return f"{_caused(row)}{mode}{row.symptom} {row.verdict}{where} ({dtype}{band}){seen}{suspect}"


def culprit_text(row) -> str:
    """What bisection named, in words: ``post_grad_passes: post_grad_custom_post_pass (inductor,
    optimiser)``; an AOTAutograd or decomposition finding says so; empty when nothing was named."""
    culprit, layer = getattr(row, "culprit", None), getattr(row, "culprit_layer", None)
    if not _given(culprit):
        return f"{layer} (bisected, no pass named)" if _given(layer) else ""
    backend, subsystem, name = astuple(CulpritName.parse(culprit))
    if backend.startswith("aot_eager") or backend == "eager":
        whose = {"eager": "Dynamo", "aot_eager": "AOTAutograd"}.get(backend, "a decomposition or the partitioner")
        return f"{subsystem}{': ' + name if name else ''} ({backend}: {whose}, before Inductor)"
    return f"{subsystem}{': ' + name if name else ''} ({backend}{', ' + layer if _given(layer) else ''})"


def _caused(row) -> str:
    """The pass first, where one was named: it is what tells two compiler clusters apart."""
    culprit = getattr(row, "culprit", None)
    return f"[{CulpritName.parse(culprit).last}] " if _given(culprit) else ""


def _where(row) -> str:
    return row.stage if row.kind == Kind.FAILURE else Stage.COMPARE


def _backends(row, width: int = 36) -> str:
    text = ",".join(row.backends)
    return text if len(text) <= width else f"{row.backends[0]} +{len(row.backends) - 1}"


def _impact(v) -> str:
    return "" if v is None or v != v else str(int(v))


def _known(r) -> str:
    known = getattr(r, "known", None)
    return known if isinstance(known, str) else ""


def release_note(r) -> str:
    """What a cluster does across its stack's releases, in words (``analysis.releases``); empty without."""
    note = getattr(r, "release_note", None)
    return note if isinstance(note, str) else ""


def render_clusters(c: pd.DataFrame, limit: int = 50, benign_runs: int = 0, benign_shown: bool = False,
                    models: int | None = None) -> str:
    benign = "" if benign_shown or not benign_runs else \
        f"\n{benign_runs} runs differ without a defect (reduction order, ill-conditioned, amplified): " \
        "--benign lists them"
    if c.empty:
        return "no failures or divergences: nothing to triage" + benign
    releases = "release_note" in c and c["release_note"].notna().any()  # a column only where a stack ran in releases
    rows = [[r.cluster, r.level, "yes" if r.vendor else "", r.count, r.seeds, _impact(r.impact), _backends(r),
             _where(r), _known(r), *([release_note(r)] if releases else []), describe(r)]
            for r in c.head(limit).itertuples()]
    table = format_table(["cluster", "severity", "vendor", "runs", "seeds", "impact", "backends", "stage", "known",
                          *(["releases"] if releases else []), "what"], rows, max_width=90)
    more = f"\n... {len(c) - limit} more clusters (--limit)" if len(c) > limit else ""
    explained = int(((c["kind"] == Kind.DISCREPANCY) & c["explanation"].notna()).sum()) if "explanation" in c else 0
    shown_benign = int((c["kind"] == Kind.BENIGN).sum())
    out_of = f" (of {models})" if models else ""
    marks = release_counts(c)
    return f"{table}{more}\n{len(c)} clusters: {int(c['vendor'].sum())} vendor findings, " \
           f"{int((c['kind'] == Kind.FAILURE).sum())} failure and {int((c['kind'] == Kind.DISCREPANCY).sum())} " \
           f"discrepancy clusters ({explained} explained)" + (f", {shown_benign} benign" if shown_benign else "") + \
           (f"; across releases: {marks}" if marks else "") + \
           f"; impact: model seeds of the catalog{out_of} holding the cluster's ops" + benign


def no_regressions(lines: dict) -> str:
    """What ``gapfuzz triage --regressions`` says when no cluster is one; ``lines``: ``Run.release_lines()``."""
    if not lines:
        return "no regressions: this run ran no stack in several releases (its run.json names no release line)"
    return f"no regressions: no cluster shows in the newest release of {', '.join(lines)} and not in an earlier one"


def diff(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Clusters by stable id: ``new`` (only after), ``known`` (only after, but a known issue matches it),
    ``gone`` (only before), ``still`` (both), with counts. A before cluster that ``after`` merged into one
    of its own (the same minimised reproducer) is not gone: it is in that one."""
    merged_away = {m for ms in after.get("merged", pd.Series(dtype=object)).dropna() for m in ms}
    a = before[~before["cluster"].isin(merged_away)].set_index("cluster")  # folded into an after cluster: still
    b = after.set_index("cluster")
    ids = b.index.union(a.index, sort=False)
    info = pd.concat([b, a[~a.index.isin(b.index)]]).loc[ids]
    state = pd.Series("still", index=ids)
    state[~ids.isin(a.index)] = "new"
    state[~ids.isin(b.index)] = "gone"
    if "known" in info:
        state[(state == "new") & info["known"].reindex(ids).notna().to_numpy()] = "known"
    out = info.assign(state=state, count_before=a["count"].reindex(ids).fillna(0).astype(int),
                      count_after=b["count"].reindex(ids).fillna(0).astype(int)).reset_index()
    order = {"new": 0, "known": 1, "gone": 2, "still": 3}
    return out.sort_values(["state", "severity", "count_after", "count_before"], ascending=[True, False, False, False],
                           key=lambda s: s.map(order) if s.name == "state" else s, ignore_index=True)


def render_diff(d: pd.DataFrame, limit: int = 50) -> str:
    counts = d["state"].value_counts() if len(d) else pd.Series(dtype=int)
    known = int(counts.get("known", 0))
    head = f"{int(counts.get('new', 0))} new, {int(counts.get('gone', 0))} gone, " \
           f"{int(counts.get('still', 0))} still there" + (f", {known} new but known" if known else "")
    if d.empty:
        return f"{head}: neither run has clusters"
    rows = [[r.state, r.cluster, r.level, "yes" if r.vendor else "", r.count_before, r.count_after, _backends(r),
             _known(r), describe(r)] for r in d.head(limit).itertuples()]
    return format_table(["state", "cluster", "severity", "vendor", "before", "after", "backends", "known", "what"],
                        rows, max_width=90) + f"\n{head}"
