"""Crash, discrepancy and benign clusters: one row per category a person triages, with a stable id.

A cluster is one bug key (``core.bugs``, where what makes two runs the same bug is defined and
explained); its id is the key's hash, so the same category has the same id in every campaign
(``gapfuzz diff``). Before keying, runs take what other rows say of them (``analysis.causes``:
a location the ledger inherited, an explanation by another option set). The stack, not the
backend label, places a failure, so that one converter defect seen under two option sets
(OpenVINO bf16 and f32) is one cluster; the labels it was seen on are listed. An explained
divergence is a behaviour: one cluster per backend and explanation, listing its ops, seeds and
dtypes; an explanation that names no defect (reduction order, ill-conditioning, amplified rounding)
makes a ``benign`` cluster, which views leave out unless asked. ``vendor`` marks what to report to
a stack's vendor: a target's own error, crash, hang or oom at convert/compile/run, or an unexplained
``target-divergent`` verdict; not the crashes of a stack the campaign found unusable on its host
(``fuzzer.unusable``), a class of their own (level ``unusable here``) until seen on a second host
or release. Rows sort by severity, then unexplained first, then impact (how many model seeds of a
catalog hold the cluster's ops, ``analysis.impact``), then vendor findings, then size. Clusters
whose minimised reproducers are alike are folded together (``analysis.merge``). Where a campaign ran
a stack in several releases, each cluster says in which it shows (``analysis.releases``: a regression,
fixed, long-standing). Vectorised: a million records in seconds.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gapfuzz.core.bugs import (
    DEFAULT_ORACLE,
    DEFAULT_REFERENCE,
    DIVERGENCE_FIELDS,
    EXAMPLE_PROBE,
    FAILURE_FIELDS,
    GRAD_OUTPUT,
    GRADIENT_SYMPTOMS,
    KEY_COLUMNS,
    MISSING,
    VENDOR_STAGES,
    Kind,
    Status,
    Symptom,
    Verdict,
    bug_keys,
    error_band,
)
from gapfuzz.core.failures import UNUSABLE
from gapfuzz.core.modes import DEFAULT_MODE, MODE_NAMES

from .causes import derive, join_forward
from .impact import impact
from .merge import merge
from .option_cover import shared_options
from .releases import COLUMNS as RELEASE_COLUMNS
from .releases import mark

SEVERITY = {Status.CRASH: 6, Status.TIMEOUT: 5, Status.OOM: 5, Status.ERROR: 4, Symptom.TASK: 3, Symptom.STRUCTURE: 3,
            Symptom.SHAPE: 3, Symptom.DTYPE: 3, Symptom.NONFINITE: 3, Symptom.INTEGER: 3, Symptom.VALUE: 2,
            Symptom.NUMERIC: 2, Symptom.GRAD_NONFINITE: 3, Symptom.GRAD: 2, Symptom.MISSING_ERROR: 3,
            Symptom.STRICT: 1,
            Status.UNSUPPORTED: 1, Status.INVALID: 0}
LEVEL = {6: str(Status.CRASH), 5: "hang/oom", 4: str(Status.ERROR), 3: "wrong answer", 2: str(Symptom.NUMERIC),
         1: str(Status.UNSUPPORTED), 0: str(Status.INVALID)}
VENDOR_FAILURES = (Status.CRASH, Status.TIMEOUT, Status.OOM, Status.ERROR)
UNUSABLE_HERE = "unusable here"  # the level of a stack's crashes on the one host where it was marked unusable
USED = ["variant_id", "seed_id", "family", "backend", "stack", "device", "status", "stage", "error_type", "message",
        "cause", "verdict", "symptom", "first_div_op", "node_symptom", "output_dtype", "tol_ratio", "task_agree",
        "node_count", "mutations", "probe", "align_error", "explanation", "backend_options", "mode", "grad_ops",
        "culprit",
        "culprit_layer", "culprit_step", "culprit_info", "bisect_s", "bisect_error", "consensus", "numpy_agrees",
        "worst_output", "signature", "host", "backend_version"]
COLUMNS = ["cluster", "kind", "severity", "level", "vendor", "explanation", "impact", "count", "variants", "seeds",
           "seed_ids", "families", "backends", "probes", "modes", "ops", "grad_at", "grad_ops", "output_dtypes",
           "mutations", "unmutated", "inherited",
           "representative", "rep_backend", "rep_nodes", "status", "stage", "error_type", "failing_op", "template",
           "verdict", "symptom", "symptoms", "first_div_op", "output_dtype", "band", "max_tol_ratio", "message",
           "culprit", "culprit_layer", "culprit_steps", "bisected", "bisect_s", "bisect_max_s", "shared_options",
           "consensus", "numpy_agrees", "merged", "known", *RELEASE_COLUMNS]
LIST_COLUMNS = ("seed_ids", "families", "backends", "probes", "modes", "ops", "symptoms", "grad_at", "grad_ops",
                "output_dtypes",
                "mutations", "culprit_steps", "merged")
GRADIENTS = [str(s) for s in GRADIENT_SYMPTOMS]


def _col(df: pd.DataFrame, name: str, default=None) -> pd.Series:
    return df[name] if name in df.columns else pd.Series(default, index=df.index, dtype=object)


def _text(s: pd.Series) -> pd.Series:
    return s.astype("str").fillna("-").replace("", "-")


def list_array(s: pd.Series) -> pa.Array:
    """A list<string> column as one Arrow array (no copy for Arrow-backed columns but the chunk join)."""
    a = pa.array(s, type=pa.list_(pa.string()), from_pandas=True)
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def keys(df: pd.DataFrame) -> pd.DataFrame:
    """Every record's bug key (``core.bugs.bug_keys``) on the records' index: ``kind`` (missing for a run
    in no cluster), ``cluster`` and the key's parts."""
    table = pa.Table.from_pandas(df[[c for c in KEY_COLUMNS if c in df.columns]], preserve_index=False)
    return bug_keys(table).to_pandas().set_axis(df.index)


def prepared(df: pd.DataFrame) -> pd.DataFrame:
    """Only the columns clustering reads (row selections then copy no op lists or recipes), rows by position,
    with what other rows say of each (``analysis.causes.derive``); a frame already prepared is kept."""
    if "op_inherited" in df.columns:
        return df
    df = derive(df[[c for c in USED if c in df.columns]].reset_index(drop=True))
    join_forward(df)
    return df


def assign(df: pd.DataFrame) -> pd.Series:
    """The cluster id of every record (missing for runs in no cluster), on the records' index."""
    return keys(prepared(df))["cluster"].set_axis(df.index)


def _lists(cid: pd.Series, values: pd.Series) -> pd.Series:
    """Per cluster: its distinct values, most frequent first (one numpy split, no Python per group)."""
    counts = pd.DataFrame({"c": cid.to_numpy(), "v": values.to_numpy()}).dropna().value_counts(sort=False)
    t = counts.reset_index().sort_values(["c", "count", "v"], ascending=[True, False, True], kind="stable")
    c, v = t["c"].to_numpy(), t["v"].to_numpy(dtype=object)
    starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]]) if len(c) else np.array([], dtype=int)
    return pd.Series([list(x) for x in np.split(v, starts[1:])] if len(c) else [], index=c[starts], dtype=object)


def _mutations(df: pd.DataFrame, cid: pd.Series, column: str = "mutations") -> tuple[pd.Series, pd.Series]:
    """Per cluster: the distinct items of a list column (most frequent first), and how many runs have none."""
    muts = list_array(_col(df, column).loc[cid.index])
    flat, parent = pc.list_flatten(muts), pc.list_parent_indices(muts)
    cids = cid.to_numpy()
    listed = _lists(pd.Series(cids[parent.to_numpy()]), pd.Series(flat.to_numpy(zero_copy_only=False)))
    lengths = pc.fill_null(pc.list_value_length(muts), 0).to_numpy()
    unmutated = pd.Series(lengths == 0).groupby(cids).sum()
    return listed, unmutated


def _summarise(df: pd.DataFrame, keys: pd.DataFrame, kind: Kind, targets) -> pd.DataFrame:
    fields = FAILURE_FIELDS if kind == Kind.FAILURE else DIVERGENCE_FIELDS
    cid = keys["cluster"]
    uniq = keys.loc[~cid.duplicated(), ["cluster", *fields]]
    rows = df.loc[keys.index]
    status = _text(rows["status"])
    if kind == Kind.FAILURE:
        sev = status.map(SEVERITY).astype(int)
        vend = rows["backend"].isin(targets) & status.isin(VENDOR_FAILURES) & _col(rows, "stage").isin(VENDOR_STAGES)
    elif kind == Kind.BENIGN:
        sev = pd.Series(0, index=keys.index)
        vend = pd.Series(False, index=keys.index)
    else:
        sev = rows["symptom"].map(SEVERITY).where(_col(rows, "task_agree").astype(float).fillna(1.0) >= 1.0,
                                                  SEVERITY[Symptom.TASK]).fillna(2).astype(int)
        vend = (rows["verdict"] == Verdict.TARGET_DIVERGENT) & (keys["explanation"] == MISSING)
    nodes = pd.to_numeric(_col(rows, "node_count"), errors="coerce").fillna(np.inf)
    inherited = _col(rows, "op_inherited").fillna(False).astype(bool)  # a run that located itself is the better one
    # a run joined to a forward defect shows it in its gradients alone: a forward run represents it
    hidden = _col(rows, "symptom").isin(GRADIENTS) & ~keys["symptom"].isin(GRADIENTS)
    order = pd.DataFrame({"c": cid, "i": inherited, "h": hidden, "n": nodes, "v": _text(rows["variant_id"])})
    order = order.sort_values(["c", "i", "h", "n", "v"])
    rep = order.groupby("c", sort=False).head(1).set_index("c")
    g = pd.DataFrame({"c": cid, "sev": sev, "vend": vend, "seed": rows["seed_id"], "variant": rows["variant_id"],
                      "tol": pd.to_numeric(_col(rows, "tol_ratio"), errors="coerce")}).groupby("c", sort=False)
    out = uniq.set_index("cluster")
    out["kind"], out["severity"] = kind, g["sev"].max()
    out["vendor"], out["count"] = g["vend"].any(), g.size()
    out["variants"], out["seeds"] = g["variant"].nunique(), g["seed"].nunique()
    out["max_tol_ratio"] = g["tol"].max()
    out["families"] = _lists(cid, _col(rows, "family"))
    out["seed_ids"] = _lists(cid, rows["seed_id"])
    out["ops"] = _lists(cid, _col(rows, "first_div_op"))
    out["output_dtypes"] = _lists(cid, _col(rows, "output_dtype"))
    out["inherited"] = pd.Series(inherited.to_numpy()).groupby(cid.to_numpy()).sum()
    out["backends"] = _lists(cid, rows["backend"])
    out["probes"] = _lists(cid, _col(rows, "probe").fillna(EXAMPLE_PROBE))  # the input sets it showed on
    out["modes"] = _lists(cid, _col(rows, "mode").fillna(DEFAULT_MODE)).map(  # in the order runs take them
        lambda v: sorted(v, key=lambda m: MODE_NAMES.index(m) if m in MODE_NAMES else len(MODE_NAMES)))
    out["grad_ops"] = _mutations(df, cid, "grad_ops")[0]
    worst = _col(rows, "worst_output").astype(object)
    out["grad_at"] = _lists(cid, worst.where(worst.astype(str).str.startswith(GRAD_OUTPUT)))  # its wrong gradients
    out["mutations"], out["unmutated"] = _mutations(df, cid)
    out["representative"], out["rep_nodes"] = rep["v"], rep["n"].replace(np.inf, np.nan)
    first = order.groupby("c", sort=False).head(1).index
    out["rep_backend"] = pd.Series(rows.loc[first, "backend"].to_numpy(), index=order.loc[first, "c"].to_numpy())
    if kind != Kind.FAILURE:
        out["symptoms"], out["symptom"] = _symptoms(keys["symptom"], cid)
    if kind != Kind.FAILURE:  # a behaviour's key leaves these out: its representative's show what it is
        behaviour = out["explanation"] != MISSING
        for c in ("verdict", "symptom", "first_div_op", "output_dtype"):
            rep_value = pd.Series(_text(rows.loc[first, c]).to_numpy(), index=order.loc[first, "c"].to_numpy())
            out[c] = out[c].where(~behaviour, rep_value.reindex(out.index))
    out["message"] = pd.Series(_col(rows, "message").loc[first].to_numpy(), index=order.loc[first, "c"].to_numpy())
    _culprits(out, rows, cid)
    out["consensus"] = _lists(cid, _col(rows, "consensus")).map(lambda v: v[0] if v else None)
    agrees = pd.Series(_col(rows, "numpy_agrees").to_numpy(), index=cid.to_numpy(), dtype=object).dropna()
    out["numpy_agrees"] = agrees.astype(bool).groupby(level=0).all() if len(agrees) else None
    out["shared_options"] = shared_options(df, rows, cid)
    return out.reset_index()


def _symptoms(shown: pd.Series, cid: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Per cluster: the symptoms its runs showed at their node (most frequent first; a located node's
    defect is one cluster whatever it showed, ``core.folds``), and the one it is described by: the most
    severe, then the most frequent."""
    listed = _lists(cid, shown.where(shown != MISSING))
    t = pd.DataFrame({"c": cid.to_numpy(), "s": shown.to_numpy()})
    t = t[t["s"] != MISSING].value_counts().reset_index()
    t["sev"] = t["s"].map(SEVERITY).fillna(SEVERITY[Symptom.NUMERIC])
    worst = t.sort_values(["c", "sev", "count", "s"], ascending=[True, False, False, True], kind="stable")
    return listed, worst.drop_duplicates("c").set_index("c")["s"]


def _culprits(out: pd.DataFrame, rows: pd.DataFrame, cid: pd.Series) -> None:
    """What bisection said of a cluster (``workers.judge.culprit``): the layer its runs were attributed to
    (most frequent), the applications (``subsystem #step``) and the cost: runs bisected, median and
    worst seconds."""
    out["culprit_layer"] = _lists(cid, _col(rows, "culprit_layer")).map(lambda v: v[0] if v else None)
    step = pd.to_numeric(_col(rows, "culprit_step"), errors="coerce")
    where = _col(rows, "culprit_info").astype(object).where(step.notna())
    out["culprit_steps"] = _lists(cid, pd.Series([f"{w} #{int(s)}" if isinstance(w, str) else None
                                                  for w, s in zip(where, step)], index=rows.index, dtype=object))
    cost = pd.DataFrame({"c": cid, "s": pd.to_numeric(_col(rows, "bisect_s"), errors="coerce")}).dropna()
    g = cost.groupby("c")["s"]
    out["bisected"], out["bisect_s"], out["bisect_max_s"] = g.size(), g.median(), g.max()


def clusters(df: pd.DataFrame, reference: str = DEFAULT_REFERENCE, oracle: str = DEFAULT_ORACLE,
             catalog: pd.DataFrame | None = None, minimised: dict | None = None,
             backends: dict | None = None) -> pd.DataFrame:
    """Every cluster of a run's records (benign ones too: ``kind``), in triage order (``order``);
    ``catalog`` (a seed catalog's rows) gives each its impact; ``minimised`` (``analysis.merge``)
    folds clusters whose reproducers minimised alike; ``backends`` (run.json's) marks each across the
    releases of its stack's line (``analysis.releases``)."""
    df = prepared(df)
    targets = set(df["backend"].unique()) - {reference, oracle} if "backend" in df else set()
    k = keys(df)
    parts = [_summarise(df, k[k["kind"] == kind], kind, targets) for kind in Kind if (k["kind"] == kind).any()]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in COLUMNS})
    out = pd.concat(parts, ignore_index=True)
    out["level"] = out["severity"].map(LEVEL).where(out["kind"] != Kind.BENIGN, str(Kind.BENIGN))
    if "symptom" in out:  # a strict difference is a class of its own, below any past tolerance
        out.loc[out["symptom"] == Symptom.STRICT, "level"] = str(Symptom.STRICT)
    here = out["cluster"].isin(unusable_here(df, k))
    out.loc[here, "level"], out.loc[here, "vendor"] = UNUSABLE_HERE, False
    out = out.reindex(columns=COLUMNS)
    out["vendor"] = out["vendor"].astype(bool)
    for c in LIST_COLUMNS:
        out[c] = out[c].map(lambda v: [x for x in v if x not in (MISSING, None)] if isinstance(v, list) else [])
    for c in ("unmutated", "inherited", "bisected"):
        out[c] = out[c].fillna(0).astype(int)
    out["culprit"] = out["culprit"].where(out["culprit"].notna() & (out["culprit"] != MISSING), None)
    explanation = out["explanation"].astype(object)
    out["explanation"] = explanation.where(explanation.notna() & (explanation != MISSING), None)
    out = merge(order(out), minimised or {})
    out["band"] = error_band(pa.array(pd.to_numeric(out["max_tol_ratio"], errors="coerce"), pa.float64())).to_pylist()
    out["impact"] = impact(out, catalog)
    return order(mark(out, df, k["cluster"], backends))


def unusable_here(df: pd.DataFrame, k: pd.DataFrame) -> set[str]:
    """The crash clusters of stacks the campaign marked unusable on a host (``fuzzer.unusable``: a skipped
    record with the crash's backend, host and signature): every run of one at such a mark, all on one host,
    one backend label and one release. Seen on a second host or release, it is a finding again."""
    if not {"signature", "host"} <= set(df.columns):
        return set()
    marked = (df["status"] == Status.SKIPPED) & (_col(df, "error_type") == UNUSABLE)
    if not marked.any():
        return set()
    place = ["backend", "host", "signature"]
    marks = set(map(tuple, df.loc[marked, place].astype(str).to_numpy()))
    crash = k.index[(k["kind"] == Kind.FAILURE).to_numpy() & (df.loc[k.index, "status"] == Status.CRASH).to_numpy()]
    rows = df.loc[crash]
    where = rows["host"].astype(str) + "\x1f" + rows["backend"].astype(str) + "\x1f" + \
        _text(_col(rows, "backend_version"))
    g = pd.DataFrame({"on": [tuple(p) in marks for p in rows[place].astype(str).to_numpy()], "where": where.to_numpy(),
                      "c": k.loc[crash, "cluster"].to_numpy()}).groupby("c")
    ok = g["on"].all() & g["where"].nunique().eq(1)
    return set(ok[ok].index)


def order(c: pd.DataFrame) -> pd.DataFrame:
    """Triage order: most severe, then unexplained before explained, then the most real code touched
    (impact, unknown last), then vendor findings, then the largest."""
    explained = c["explanation"].notna().astype(int)
    ranked = c.assign(_explained=explained, _impact=c["impact"].fillna(-1.0))
    ranked = ranked.sort_values(["severity", "_explained", "_impact", "vendor", "count", "cluster"],
                                ascending=[False, True, False, False, False, True], ignore_index=True)
    return ranked.drop(columns=["_explained", "_impact"])
