"""Portability tables: which operators and seeds work on which backend, how fast, how close.

Definitions:

- A run *completed* when its status is ``ok`` or ``mismatch``: the backend converted, compiled
  and ran the graph (closeness is the tolerance tables' business). A run *failed on the
  backend* when it ended ``error``, ``unsupported``, ``crash``, ``timeout`` or ``oom`` at stage
  convert, compile or run. Other runs (invalid variants, failures before a backend was
  involved) are not attempts.
- An operator is *supported* on a backend when at least one attempted run of a graph that
  contains it completed there; ``share`` is the completed fraction of those attempts. Single-
  operator seeds (``seed_source == "ops"``) give the sharpest evidence.
- A seed *works* on a backend when it has attempted runs there and every one of them completed.
  ``share`` divides by every seed of the campaign (those that failed to build or capture too),
  ``relative`` by the seeds that work on the reference; ``op_*`` are the same for single-operator
  seeds, and ``op_fail_share`` is 1 - ``op_relative``: the share of functions that fail there.
- Slowdown: a completed run's ``latency_ms`` over the reference's for the same variant.
- Pass rate at tolerance t: share of compared runs with ``tol_needed <= t`` (atol = rtol = t).

Every table takes ``by`` (e.g. ``"family"`` or ``"seed_source"``) to split it further.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from gapfuzz.core.bugs import COMPLETED, DEFAULT_REFERENCE, VENDOR_STAGES, Status, Verdict

BACKEND_FAILURES = (Status.ERROR, Status.UNSUPPORTED, Status.CRASH, Status.TIMEOUT, Status.OOM)
DEFAULT_TOLERANCES = tuple(float(t) for t in np.logspace(-8, 0, 17))


def attempts(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(attempted, completed) masks, per the module's definitions."""
    status = df["status"].to_numpy(dtype=object)
    completed = np.isin(status, COMPLETED)
    stage = df["stage"].to_numpy(dtype=object) if "stage" in df else np.full(len(df), None)
    failed = np.isin(status, BACKEND_FAILURES) & np.isin(stage, VENDOR_STAGES)
    return completed | failed, completed


def _groups(df: pd.DataFrame, by: str | None) -> list[str]:
    return ["backend"] if by is None else [by, "backend"]


def _op_codes(ops) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row of each op occurrence, op code, op names) from a list column, chunk by chunk. Elements read
    dictionary-encoded from Parquet are used as they are: no string is hashed twice."""
    if not isinstance(ops, (pa.Array, pa.ChunkedArray)):
        ops = pa.array(ops, type=pa.list_(pa.string()), from_pandas=True)
    chunks = ops.chunks if isinstance(ops, pa.ChunkedArray) else [ops]
    names: dict[str, int] = {}
    parents, codes, base = [np.zeros(0, np.int64)], [np.zeros(0, np.int32)], 0
    for ch in chunks:
        parents.append(pc.list_parent_indices(ch).to_numpy() + base)
        base += len(ch)
        values = pc.list_flatten(ch)
        if not pa.types.is_dictionary(values.type):
            values = pc.dictionary_encode(values)
        local = np.array([names.setdefault(n, len(names)) for n in values.dictionary.to_pylist()] or [0], np.int32)
        codes.append(local[values.indices.to_numpy(zero_copy_only=False)])
    return np.concatenate(parents), np.concatenate(codes), np.array(list(names), dtype=object)


def _count(codes: list[np.ndarray], sizes: list[int], weights: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Occurrences (and weighted sums) of each combination of codes: (combination codes..., n, sum)."""
    key = codes[0].astype(np.int64)
    for c, n in zip(codes[1:], sizes[1:]):
        key *= n
        key += c
    span = int(np.prod(sizes, dtype=float))
    if span <= 1 << 24:  # a dense count is a single pass; np.unique would sort
        n = np.bincount(key, minlength=span)
        uniq = np.flatnonzero(n)
        total = None if weights is None else np.bincount(key, weights, minlength=span)[uniq]
        n = n[uniq]
    else:
        uniq, inverse = np.unique(key, return_inverse=True)
        n = np.bincount(inverse, minlength=len(uniq))
        total = None if weights is None else np.bincount(inverse, weights, minlength=len(uniq))
    parts = []
    for size in reversed(sizes):
        parts.append(uniq % size)
        uniq = uniq // size
    return (*reversed(parts), n, total)


def support(df: pd.DataFrame, by: str | None = None, ops=None) -> pd.DataFrame:
    """Long table: op, backend (and ``by``), runs attempted, completed, share, supported. ``ops``: the op
    lists as an Arrow column aligned with ``df`` (default ``df["ops"]``)."""
    tried, done = attempts(df)
    parent, op, names = _op_codes(df["ops"] if ops is None else ops)
    cols = _groups(df, by)
    factors = [pd.factorize(df[c].fillna("-")) for c in cols]
    row = np.zeros(len(df), dtype=np.int64)
    for codes, uniq in factors:
        row = row * len(uniq) + codes
    row = row * 3 + np.where(done, 2, np.where(tried, 1, 0))  # 0 no attempt, 1 failed, 2 completed
    *codes, n, _ = _count([row[parent], op], [3 * int(np.prod([len(u) for _, u in factors])), max(len(names), 1)])
    group, state = codes[0] // 3, codes[0] % 3
    t = pd.DataFrame({"g": group, "op": codes[1], "runs": np.where(state > 0, n, 0),
                      "completed": np.where(state == 2, n, 0)})
    t = t.groupby(["g", "op"], sort=False).sum().reset_index()
    t = t[t["runs"] > 0]
    g = t["g"].to_numpy()
    for c, (_, uniq) in reversed(list(zip(cols, factors))):
        t[c] = np.asarray(uniq, dtype=object)[g % len(uniq)]
        g = g // len(uniq)
    t["op"] = names[t["op"].to_numpy()] if len(names) else t["op"].astype(object)
    t = t[["op", *cols, "runs", "completed"]]
    t["share"] = t["completed"] / t["runs"]
    t["supported"] = t["completed"] > 0
    return t.sort_values([*([by] if by else []), "op", "backend"], ignore_index=True)


def support_matrix(t: pd.DataFrame, value: str = "share") -> pd.DataFrame:
    """Operator x backend from a ``support`` table: ``share`` (or ``supported``, ``runs``); NaN: never tried."""
    if t.empty:
        return pd.DataFrame()
    return t.pivot(index="op", columns="backend", values=value).sort_index()


def seeds(df: pd.DataFrame, reference: str = DEFAULT_REFERENCE, by: str | None = None,
          support_table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per backend: seeds and operator seeds that work, their share, relative to the reference, and
    operators supported (count and relative to the reference)."""
    tried, done = attempts(df)
    seed, seed_names = pd.factorize(df["seed_id"])
    backend, backends = pd.factorize(df["backend"])
    s, b, runs, completed = _count([seed[tried], backend[tried]], [len(seed_names), len(backends)],
                                   done[tried].astype(float))
    is_op = np.asarray(pd.Index(seed_names).str.startswith("ops/"), dtype=bool)
    group = np.zeros(len(seed_names), dtype=object)
    if by:
        group[seed[::-1]] = df[by].fillna("-").to_numpy(dtype=object)[::-1]  # the seed's first row's value
    per = pd.DataFrame({"g": group[s], "backend": np.asarray(backends, dtype=object)[b], "works": completed == runs,
                        "op": is_op[s]})
    per["op_works"] = per["works"] & per["op"]
    out = per.groupby(["g", "backend"]).agg(seeds_ran=("works", "size"), works=("works", "sum"),
                                            op_works=("op_works", "sum")).reset_index()
    totals = pd.DataFrame({"g": group, "op": is_op}).groupby("g").agg(seeds=("op", "size"), op_seeds=("op", "sum"))
    out = out.join(totals, on="g")
    sup = support(df, by) if support_table is None else support_table
    keys = _groups(df, by)
    ops = sup[sup["supported"]].groupby(keys).size().rename("ops_supported").reset_index()
    out = out.rename(columns={"g": by}) if by else out.drop(columns="g")
    out = out.merge(ops, on=keys, how="left").fillna({"ops_supported": 0})
    out["share"] = out["works"] / out["seeds"]
    out["op_share"] = (out["op_works"] / out["op_seeds"]).where(out["op_seeds"] > 0)
    ref = out[out["backend"] == reference]
    for col, rel in (("works", "relative"), ("op_works", "op_relative"), ("ops_supported", "ops_relative")):
        base = out[by].map(ref.set_index(by)[col]) if by else \
            pd.Series(ref[col].iloc[0] if len(ref) else np.nan, index=out.index)
        out[rel] = (out[col] / base).where(base > 0)
    out["op_fail_share"] = 1 - out["op_relative"]
    out = out.astype({"ops_supported": int})
    cols = [*keys, "seeds", "seeds_ran", "works", "share", "relative", "op_seeds", "op_works", "op_share",
            "op_relative", "op_fail_share", "ops_supported", "ops_relative"]
    return out[cols].sort_values(keys, ignore_index=True)


def slowdowns(df: pd.DataFrame, reference: str = DEFAULT_REFERENCE) -> pd.DataFrame:
    """One row per completed non-reference run with both latencies: its slowdown against the reference."""
    df = df[[c for c in ("variant_id", "seed_id", "seed_source", "family", "backend", "status", "stage",
                         "latency_ms") if c in df]]
    _, done = attempts(df)
    lat = pd.to_numeric(df["latency_ms"], errors="coerce")
    ok = done & (lat > 0).to_numpy()
    ref = df["backend"] == reference
    base = pd.Series(lat[ok & ref].to_numpy(), index=df.loc[ok & ref, "variant_id"].to_numpy())
    base = base[~base.index.duplicated()]
    rows = df[ok & ~ref]
    cols = [c for c in ("variant_id", "seed_id", "seed_source", "family", "backend") if c in rows]
    out = rows[cols].assign(latency_ms=lat[rows.index], ref_latency_ms=rows["variant_id"].map(base).to_numpy())
    out = out.dropna(subset=["ref_latency_ms"])
    out["slowdown"] = out["latency_ms"] / out["ref_latency_ms"]
    return out.reset_index(drop=True)


def slowdown_summary(df: pd.DataFrame, reference: str = DEFAULT_REFERENCE, by: str | None = None) -> pd.DataFrame:
    """Per backend: runs, geometric mean, median, 10th and 90th percentile and max slowdown."""
    s = slowdowns(df, reference)
    keys = _groups(s, by)
    if s.empty:
        return pd.DataFrame(columns=[*keys, "runs", "geomean", "median", "p10", "p90", "max"])
    g = s.assign(_log=np.log(s["slowdown"])).groupby(keys)
    out = pd.DataFrame({"runs": g.size(), "geomean": np.exp(g["_log"].mean()), "median": g["slowdown"].median(),
                        "p10": g["slowdown"].quantile(0.1), "p90": g["slowdown"].quantile(0.9),
                        "max": g["slowdown"].max()})
    return out.reset_index()


def tolerance_curve(df: pd.DataFrame, tolerances=None, by: str | None = None) -> pd.DataFrame:
    """Per backend and tolerance t: compared runs, how many pass allclose(atol=rtol=t), the pass rate."""
    tols = np.sort(np.asarray(tolerances if tolerances is not None else DEFAULT_TOLERANCES, dtype=float))
    need = pd.to_numeric(df["tol_needed"], errors="coerce")
    d = df.loc[need.notna(), _groups(df, by)].assign(tol_needed=need[need.notna()])
    parts = []
    for key, grp in d.groupby(_groups(d, by), sort=True):
        values = np.sort(grp["tol_needed"].to_numpy())
        passed = np.searchsorted(values, tols, side="right")
        key = key if isinstance(key, tuple) else (key,)
        parts.append(pd.DataFrame({**dict(zip(_groups(d, by), key)), "tolerance": tols, "runs": len(values),
                                   "passed": passed, "pass_rate": passed / len(values)}))
    if not parts:
        return pd.DataFrame(columns=[*_groups(d, by), "tolerance", "runs", "passed", "pass_rate"])
    return pd.concat(parts, ignore_index=True)


def divergence(df: pd.DataFrame, reference: str = DEFAULT_REFERENCE, by: str | None = None) -> pd.DataFrame:
    """Per non-reference backend: completed runs, mismatches, vendor findings (target-divergent), rates."""
    _, done = attempts(df)
    d = df[[*_groups(df, by), "status", "verdict"]][done & (df["backend"] != reference).to_numpy()]
    d = d.assign(_mismatch=d["status"] == Status.MISMATCH, _vendor=d["verdict"] == Verdict.TARGET_DIVERGENT)
    out = d.groupby(_groups(d, by)).agg(completed=("status", "size"), mismatches=("_mismatch", "sum"),
                                        vendor=("_vendor", "sum")).reset_index()
    out["mismatch_rate"] = out["mismatches"] / out["completed"]
    out["vendor_rate"] = out["vendor"] / out["completed"]
    return out
