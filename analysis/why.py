"""Why the runs of one cluster are one defect (``gapfuzz triage RUN --why CLUSTER``).

A cluster is one bug key (``core.bugs``). This says, for one: the key's fields as its id has them;
what the key folded together (the symptoms its located node showed, one class whatever they were;
strict bits that joined a divergence past tolerance; the ops keyed as one kernel; gradients joined
to their node's forward defect; locations and culprits taken from other runs of the same case or
node); what its runs differ in and the key leaves out (seeds, probes, dtypes, labels); and the
clusters at the same node or failing op that the key keeps apart, with the fields that do it
(another stack, verdict, side, pass or template): the guards that stop two defects merging.
"""
from __future__ import annotations

import pandas as pd

from gapfuzz.core.bugs import DIVERGENCE_FIELDS, FAILURE_FIELDS, GRADIENT_SYMPTOMS, MISSING, Kind, Symptom, kernel_op

WHY_DIMENSIONS = (  # what a cluster's runs may differ in and still be one bug: (column, what it is)
    ("output_dtype", "output dtypes (identity only where the op passes at another dtype)"),
    ("symptom", "what the model's output showed (severity)"), ("task_agree", "task agreement (severity)"),
    ("probe", "input sets"), ("backend", "backend labels"), ("seed_id", "seeds"), ("mode", "modes"),
    ("first_div_op", "operators (keyed by their kernel, or by the culprit pass)"),
    ("consensus", "stacks that agree"), ("numpy_agrees", "numpy gives their answer"),
)
GRADIENTS = {str(s) for s in GRADIENT_SYMPTOMS}
MOST = 8  # values listed per line


def _counts(values: pd.Series) -> str:
    counts = values.astype(object).where(values.notna(), MISSING).astype(str).value_counts()
    more = f" +{len(counts) - MOST}" if len(counts) > MOST else ""
    return ", ".join(f"{v} ({n})" for v, n in counts.head(MOST).items()) + more


def _short(value, most: int = 60) -> str:
    text = str(value)
    return text if len(text) <= most else text[:most - 1] + "…"


def _identity(keys: pd.DataFrame, kind: str) -> list[str]:
    """The columns of a key table its id hashes, by field: a divergence's symptom as its class."""
    fields = FAILURE_FIELDS if kind == Kind.FAILURE else DIVERGENCE_FIELDS
    return ["symptom_class" if f == "symptom" and "symptom_class" in keys else f for f in fields]


def key_lines(cluster, parts) -> list[str]:
    """The key's fields as the id has them; a folded symptom says so."""
    fields = FAILURE_FIELDS if cluster["kind"] == Kind.FAILURE else DIVERGENCE_FIELDS
    lines = ["the key (what every run of it shares):"]
    for f in fields:
        value = parts.get("symptom_class", parts.get(f)) if f == "symptom" else parts.get(f, MISSING)
        if value is None or value != value or value == MISSING:
            value = "- (not part of this key)"
        elif f == "symptom" and list(cluster.get("symptoms") or ()) not in ([], [value]):
            value = f"{value} (the class of what the node showed: {', '.join(cluster['symptoms'])})"
        lines.append(f"  {f:<14} {value}")
    return lines


def folded_lines(keys: pd.DataFrame, prepared: pd.DataFrame) -> list[str]:
    """What the key folded together in these runs (``keys`` and ``prepared``: the cluster's rows of each)."""
    lines = []
    shown = keys["symptom"].astype(object).where(keys["symptom"] != MISSING)
    if shown.nunique() > 1:
        lines.append(f"  symptoms at the node, one defect whatever it showed: {_counts(shown.dropna())}")
    if (shown == Symptom.STRICT).any() and (shown.notna() & (shown != Symptom.STRICT)).any():
        lines.append(f"  strict runs joined the divergence past tolerance at the same node: "
                     f"{int((shown == Symptom.STRICT).sum())}")
    ops = prepared["first_div_op"].dropna().astype(str)
    kernels = ops.map(kernel_op)
    for kernel in sorted(set(kernels)):
        names = sorted(set(ops[kernels == kernel]))
        if names != [kernel]:
            lines.append(f"  ops keyed as one kernel, {kernel}: {', '.join(names)}")
    own = prepared["symptom"].astype(object)
    joined = own.isin(GRADIENTS).to_numpy() & ~shown.isin(GRADIENTS).to_numpy()
    if joined.any():
        lines.append(f"  gradient runs joined to their node's forward defect: {int(joined.sum())}")
    for column, what in (("op_inherited", "runs located by another run of their case"),
                         ("culprit_inherited", "runs that took the pass their node's bisected runs name")):
        if column in prepared and prepared[column].fillna(False).astype(bool).any():
            lines.append(f"  {what}: {int(prepared[column].fillna(False).astype(bool).sum())}")
    return lines or ["  nothing: every run has the key as it is"]


def apart_lines(cid: str, kind: str, keys: pd.DataFrame, prepared: pd.DataFrame) -> list[str]:
    """The other clusters at this cluster's node (its kernels) or failing op, and the key fields that keep
    them apart."""
    ids = keys["cluster"]
    mine = (ids == cid).to_numpy()
    if kind == Kind.FAILURE:
        where = keys["failing_op"].astype(object).where(keys["failing_op"] != MISSING)
    else:
        where = prepared["first_div_op"].astype(object).map(kernel_op, na_action="ignore")
    at = set(where[mine].dropna())
    near = ids.notna().to_numpy() & ~mine & where.isin(at).to_numpy() & (keys["kind"] == kind).to_numpy()
    if not at or not near.any():
        return []
    columns = _identity(keys, kind)
    own = keys[mine].iloc[0]
    lines = ["", "kept apart at the same node or failing op (the key fields that differ):"]
    for other, row in keys[near].drop_duplicates("cluster").head(MOST).iterrows():
        differ = [f"{c.replace('symptom_class', 'symptom')} {_short(row[c])} (here {_short(own[c])})"
                  for c in columns if row[c] != own[c]]
        lines.append(f"  {row['cluster']}: {'; '.join(differ)}")
    return lines


def render_why(cluster, rows: pd.DataFrame, keys: pd.DataFrame | None = None,
               prepared: pd.DataFrame | None = None) -> str:
    """Why the runs of one cluster are one bug: the key's fields, what it folded, what its runs differ in,
    and what it keeps apart. ``rows``: the cluster's records; ``keys`` and ``prepared``: the run's whole key
    table and prepared records (``analysis.clusters``), on one index; without them, the key of the row."""
    from .triage import describe

    cid, kind = cluster["cluster"], cluster["kind"]
    mine = (keys["cluster"] == cid).to_numpy() if keys is not None else None
    parts = keys[mine].iloc[0] if mine is not None and mine.any() else cluster  # a merged cluster: the row's own
    lines = [f"cluster {cid}: {describe(pd.Series(cluster).to_frame().T.itertuples().__next__())}",
             f"{cluster['count']} runs, {cluster['variants']} variants, {cluster['seeds']} seeds"]
    if isinstance(cluster.get("release_note"), str):
        lines.append(f"{cluster['release_note']} ({cluster['releases']})")
    lines += ["", *key_lines(cluster, parts)]
    if mine is not None and mine.any() and kind != Kind.FAILURE:
        lines += ["", "folded into it:", *folded_lines(keys[mine], prepared[mine])]
    lines += ["", "what its runs differ in (not part of the key):"]
    for column, what in WHY_DIMENSIONS:
        if column in rows.columns:
            values = rows[column].astype(object).where(rows[column].notna(), MISSING).astype(str)
            if values.nunique() > 1 or column in ("output_dtype", "probe"):
                lines.append(f"  {what}: {_counts(values)}")
    merged = cluster.get("merged")
    if merged is not None and len(merged):
        lines.append(f"  folded in (alike minimised reproducers): {', '.join(merged)}")
    if mine is not None:
        lines += apart_lines(cid, kind, keys, prepared)
    return "\n".join(lines)
