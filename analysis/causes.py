"""What the records say about a divergence's cause beyond its own row, derived before runs are keyed.

Two facts need other rows: a run whose tier 2 the ledger skipped (``align_error: not run: ...``)
was located on another variant of the same seed with the same key, so it takes that run's first
divergent op and says so (``op_inherited``), and joins the located cluster instead of forming one
with no op; and a divergence that the same stack under another option set of the campaign does
not show (OpenVINO at its default precision diverges where ``openvino-f32`` agrees, on the same
variant and probe) is explained by the options (``core.bugs.Explanation.OPTIONS``) when no
hypothesis tested on eager explained it. Vectorised joins: a million records in seconds.
"""
from __future__ import annotations

import pandas as pd

from core.bugs import EXAMPLE_PROBE, Explanation, Verdict

CASE = ["seed_id", "backend", "verdict", "symptom", "output_dtype", "explanation"]  # a ledger case, less its op
NEEDED = ["variant_id", "seed_id", "backend", "stack", "probe", "verdict", "symptom", "output_dtype", "first_div_op",
          "align_error", "explanation"]


def _text(s: pd.Series) -> pd.Series:
    return s.astype(object).where(s.notna(), "-")


def inherit_locations(df: pd.DataFrame) -> pd.Series:
    """True where a run took its first divergent op from the located run of its case (``df`` is changed)."""
    op = df["first_div_op"]
    skipped = op.isna() & df["align_error"].astype("string").str.startswith("not run").fillna(False).astype(bool)
    if not skipped.any():
        return pd.Series(False, index=df.index)
    case = pd.DataFrame({c: _text(df[c]) for c in CASE}, index=df.index)
    located = case[op.notna()].assign(op=op[op.notna()])
    where = located.groupby(CASE, sort=False)["op"].agg(lambda s: s.mode().iloc[0]).rename("inherited")
    found = case[skipped].join(where, on=CASE)["inherited"]
    df.loc[found.index, "first_div_op"] = found
    return found.notna().reindex(df.index, fill_value=False)


def explain_by_options(df: pd.DataFrame) -> None:
    """Divergences that another label of the same stack does not show on the same variant and probe:
    explained by the options (``df``'s ``explanation`` is filled where it was empty)."""
    probe = df["probe"].astype(object).where(df["probe"].notna(), EXAMPLE_PROBE)
    agree = df["verdict"].astype("string").eq(str(Verdict.AGREE)).fillna(False).to_numpy()
    diverged = df["verdict"].astype("string").isin([str(Verdict.TARGET_DIVERGENT)]).fillna(False).to_numpy() & \
        df["explanation"].isna().to_numpy()
    if not agree.any() or not diverged.any():
        return
    where = pd.DataFrame({"variant_id": df["variant_id"], "probe": probe, "stack": df["stack"], "backend": df["backend"]})
    fine = where[agree].drop_duplicates()
    bad = where[diverged].reset_index()
    pairs = bad.merge(fine, on=["variant_id", "probe", "stack"], suffixes=("", "_other"))
    pairs = pairs[pairs["backend"] != pairs["backend_other"]]
    df.loc[pairs["index"].unique(), "explanation"] = str(Explanation.OPTIONS)


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """The records with inherited locations and option explanations filled in, and ``op_inherited``."""
    df = df.copy()
    for c in NEEDED:
        if c not in df.columns:
            df[c] = pd.Series(None, index=df.index, dtype=object)
    df["first_div_op"] = df["first_div_op"].astype(object)
    df["explanation"] = df["explanation"].astype(object)
    df["op_inherited"] = inherit_locations(df)
    explain_by_options(df)
    return df
