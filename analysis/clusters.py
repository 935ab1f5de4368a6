"""Crash and discrepancy clusters: one row per category a person triages, with a stable id.

Crash cluster key: ``stack@device, status, stage, error_type, template``. The stack, not the
backend label, so that one converter defect seen under two option sets (OpenVINO bf16 and f32)
is one cluster; the labels it was seen on are listed. Discrepancy cluster key: ``backend,
verdict, symptom, first divergent op, output dtype, error band`` (log10 bucket of
``tol_ratio``); the backend label stays, because options such as the precision change the
numbers. A cluster id is a hash of its key, so the same category has the same id in every
campaign (``gapfuzz diff``). ``vendor`` marks what to report to a stack's vendor: a target's own
error, crash, hang or oom at convert/compile/run, or a ``target-divergent`` verdict (never an
ill-conditioned, amplified or reference-divergent one). Vectorised: a million records in seconds.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .signature import signature_id
from .templates import template_unique

FAILED = ("crash", "timeout", "oom", "error", "unsupported", "invalid")
DIVERGENT_VERDICTS = ("target-divergent", "reference-divergent", "ill-conditioned", "amplified")
SEVERITY = {"crash": 6, "timeout": 5, "oom": 5, "error": 4, "task": 3, "structure": 3, "shape": 3, "dtype": 3,
            "nonfinite": 3, "integer": 3, "value": 2, "numeric": 2, "unsupported": 1, "invalid": 0}
LEVEL = {6: "crash", 5: "hang/oom", 4: "error", 3: "wrong answer", 2: "numeric", 1: "unsupported", 0: "invalid"}
CRASH_KEY = ["stack_device", "status", "stage", "error_type", "template"]
DIV_KEY = ["backend", "verdict", "symptom", "first_div_op", "output_dtype", "band"]
VENDOR_STAGES = ("convert", "compile", "run")
USED = ["variant_id", "seed_id", "family", "backend", "stack", "device", "status", "stage", "error_type", "message",
        "cause", "verdict", "symptom", "first_div_op", "output_dtype", "tol_ratio", "task_agree", "node_count",
        "mutations"]
COLUMNS = ["cluster", "kind", "severity", "level", "vendor", "count", "variants", "seeds", "families", "backends",
           "mutations", "unmutated", "representative", "rep_backend", "rep_nodes", "status", "stage", "error_type",
           "template", "verdict", "symptom", "first_div_op", "output_dtype", "band", "max_tol_ratio", "message"]


def _col(df: pd.DataFrame, name: str, default=None) -> pd.Series:
    return df[name] if name in df.columns else pd.Series(default, index=df.index, dtype=object)


def _text(s: pd.Series) -> pd.Series:
    return s.astype("str").fillna("-").replace("", "-")


def list_array(s: pd.Series) -> pa.Array:
    """A list<string> column as one Arrow array (no copy for Arrow-backed columns but the chunk join)."""
    a = pa.array(s, type=pa.list_(pa.string()), from_pandas=True)
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def error_band(tol_ratio: pd.Series) -> pd.Series:
    """``<1``, ``1e0`` .. ``1e5`` (the decade of tol_ratio), ``1e6+``; ``-`` when unknown."""
    r = pd.to_numeric(tol_ratio, errors="coerce").to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.floor(np.log10(np.where(r > 0, r, np.nan)))
    labels = np.array(["<1", *[f"1e{i}" for i in range(6)], "1e6+", "-"], dtype=object)
    idx = np.where(np.isnan(r), 8, np.where(r < 1, 0, np.clip(np.nan_to_num(k, nan=0), 0, 6) + 1)).astype(int)
    return pd.Series(labels[idx], index=tol_ratio.index, dtype="str")


def crash_keys(df: pd.DataFrame) -> pd.DataFrame:
    """The crash-cluster key of every failed record (a run that raised, died, hung or ran out of memory)."""
    bad = df[_col(df, "status").isin(FAILED)]
    stack = _text(_col(bad, "stack"))
    stack_device = (stack + "@" + _text(_col(bad, "device"))).where(stack != "-", _text(_col(bad, "backend")))
    status = _text(bad["status"])
    msg = pa.array(_col(bad, "message").astype("str"), pa.large_string())
    tpl = pd.Series(template_unique(msg).to_numpy(zero_copy_only=False), index=bad.index, dtype="str")
    cause = _col(bad, "cause").astype("str")
    limit = status.isin(["timeout", "oom"]) & cause.str.startswith("limit:").fillna(False)
    limit |= (tpl == "") & cause.notna()  # a process that died silently: its signal or exit status
    if limit.any():  # a limit's printed tail is incidental; the limit is the category
        tpl[limit] = template_unique(pa.array(cause[limit], pa.large_string())).to_numpy(zero_copy_only=False)
    return pd.DataFrame({"stack_device": stack_device, "status": status, "stage": _text(_col(bad, "stage")),
                         "error_type": _text(_col(bad, "error_type")), "template": tpl.replace("", "-")})[CRASH_KEY]


def discrepancy_keys(df: pd.DataFrame) -> pd.DataFrame:
    """The discrepancy-cluster key of every completed run that diverged (tensors or task level)."""
    status, verdict = _col(df, "status"), _col(df, "verdict")
    task = pd.to_numeric(_col(df, "task_agree"), errors="coerce") < 1
    div = status.isin(["ok", "mismatch"]) & ((status == "mismatch") | verdict.isin(DIVERGENT_VERDICTS) | task)
    d = df[div]
    symptom = _text(_col(d, "symptom")).where(~task[div], "task").replace("-", "numeric")
    return pd.DataFrame({"backend": _text(d["backend"]), "verdict": _text(_col(d, "verdict")), "symptom": symptom,
                         "first_div_op": _text(_col(d, "first_div_op")),
                         "output_dtype": _text(_col(d, "output_dtype")),
                         "band": error_band(_col(d, "tol_ratio"))})[DIV_KEY]


def _ids(keys: pd.DataFrame, kind: str) -> tuple[pd.Series, pd.DataFrame]:
    """Per-row cluster id and the distinct keys (one hash per distinct key, not per row)."""
    cols = list(keys.columns)
    group = keys.groupby(cols, sort=False, dropna=False).ngroup()
    uniq = keys.loc[~group.duplicated()].set_axis(group[~group.duplicated()].to_numpy())
    uniq = uniq.sort_index()
    uniq.insert(0, "cluster", [f"{kind[0]}-{signature_id(kind, *map(str, k))}" for k in uniq.itertuples(index=False)])
    return pd.Series(uniq["cluster"].to_numpy()[group.to_numpy()], index=keys.index, dtype="str"), uniq


def _narrow(df: pd.DataFrame) -> pd.DataFrame:
    """Only the columns clustering reads (row selections then copy no op lists or recipes), rows by position."""
    return df[[c for c in USED if c in df.columns]].reset_index(drop=True)


def assign(df: pd.DataFrame) -> pd.Series:
    """The cluster id of every record (missing for runs in no cluster), on the records' index."""
    narrow = _narrow(df)
    ids = pd.Series(pd.NA, index=narrow.index, dtype="str")
    for kind, keys in (("crash", crash_keys(narrow)), ("discrepancy", discrepancy_keys(narrow))):
        if len(keys):
            ids.loc[keys.index] = _ids(keys, kind)[0]
    return ids.set_axis(df.index)


def _lists(cid: pd.Series, values: pd.Series) -> pd.Series:
    """Per cluster: its distinct values, most frequent first (one numpy split, no Python per group)."""
    counts = pd.DataFrame({"c": cid.to_numpy(), "v": values.to_numpy()}).dropna().value_counts(sort=False)
    t = counts.reset_index().sort_values(["c", "count", "v"], ascending=[True, False, True], kind="stable")
    c, v = t["c"].to_numpy(), t["v"].to_numpy(dtype=object)
    starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]]) if len(c) else np.array([], dtype=int)
    return pd.Series([list(x) for x in np.split(v, starts[1:])] if len(c) else [], index=c[starts], dtype=object)


def _mutations(df: pd.DataFrame, cid: pd.Series) -> tuple[pd.Series, pd.Series]:
    muts = list_array(_col(df, "mutations").loc[cid.index])
    flat, parent = pc.list_flatten(muts), pc.list_parent_indices(muts)
    cids = cid.to_numpy()
    listed = _lists(pd.Series(cids[parent.to_numpy()]), pd.Series(flat.to_numpy(zero_copy_only=False)))
    lengths = pc.fill_null(pc.list_value_length(muts), 0).to_numpy()
    unmutated = pd.Series(lengths == 0).groupby(cids).sum()
    return listed, unmutated


def _summarise(df: pd.DataFrame, keys: pd.DataFrame, kind: str, targets) -> pd.DataFrame:
    cid, uniq = _ids(keys, kind)
    rows = df.loc[keys.index]
    status = _text(rows["status"])
    if kind == "crash":
        sev = status.map(SEVERITY).astype(int)
        vend = rows["backend"].isin(targets) & status.isin(["crash", "timeout", "oom", "error"]) \
            & _col(rows, "stage").isin(VENDOR_STAGES)
    else:
        sev = keys["symptom"].map(SEVERITY).fillna(2).astype(int)
        vend = keys["verdict"] == "target-divergent"
    nodes = pd.to_numeric(_col(rows, "node_count"), errors="coerce").fillna(np.inf)
    order = pd.DataFrame({"c": cid, "n": nodes, "v": _text(rows["variant_id"])}).sort_values(["c", "n", "v"])
    rep = order.groupby("c", sort=False).head(1).set_index("c")
    g = pd.DataFrame({"c": cid, "sev": sev, "vend": vend, "seed": rows["seed_id"], "variant": rows["variant_id"],
                      "tol": pd.to_numeric(_col(rows, "tol_ratio"), errors="coerce")}).groupby("c", sort=False)
    out = uniq.set_index("cluster")
    out["kind"], out["severity"] = kind, g["sev"].max()
    out["vendor"], out["count"] = g["vend"].any(), g.size()
    out["variants"], out["seeds"] = g["variant"].nunique(), g["seed"].nunique()
    out["max_tol_ratio"] = g["tol"].max()
    out["families"] = _lists(cid, _col(rows, "family"))
    out["backends"] = _lists(cid, rows["backend"])
    out["mutations"], out["unmutated"] = _mutations(df, cid)
    out["representative"], out["rep_nodes"] = rep["v"], rep["n"].replace(np.inf, np.nan)
    first = order.groupby("c", sort=False).head(1).index
    out["rep_backend"] = pd.Series(rows.loc[first, "backend"].to_numpy(), index=order.loc[first, "c"].to_numpy())
    out["message"] = pd.Series(_col(rows, "message").loc[first].to_numpy(), index=order.loc[first, "c"].to_numpy())
    return out.reset_index()


def clusters(df: pd.DataFrame, reference: str = "eager@cpu", oracle: str = "eager-fp64@cpu") -> pd.DataFrame:
    """Every cluster of a run's records, most severe, then vendor findings, then largest first."""
    df = _narrow(df)
    targets = set(df["backend"].unique()) - {reference, oracle} if "backend" in df else set()
    parts = [_summarise(df, keys, kind, targets)
             for kind, keys in (("crash", crash_keys(df)), ("discrepancy", discrepancy_keys(df))) if len(keys)]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})
    out = pd.concat(parts, ignore_index=True)
    out["level"] = out["severity"].map(LEVEL)
    out = out.reindex(columns=COLUMNS)
    out["vendor"] = out["vendor"].astype(bool)
    for c in ("families", "backends", "mutations"):
        out[c] = out[c].map(lambda v: v if isinstance(v, list) else [])
    out["unmutated"] = out["unmutated"].fillna(0).astype(int)
    return out.sort_values(["severity", "vendor", "count", "cluster"], ascending=[False, False, False, True],
                           ignore_index=True)
