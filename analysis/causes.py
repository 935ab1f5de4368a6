"""What the records say about a divergence's cause beyond its own row, derived before runs are keyed.

Five facts need other rows: a run whose tier 2 the ledger skipped (``align_error: not run: ...``)
was located on another variant of the same seed with the same key, so it takes that run's first
divergent op (``op_inherited``) and joins the located cluster instead of forming one with no op
(records written before the ledger handed locations on say only where), and likewise takes the
culprit of a case whose bisection was still running elsewhere; and a divergence that the
same stack on the same device under another *precision* option of the campaign does not show
(OpenVINO at its default precision diverges where ``openvino-f32`` agrees, on the same variant
and probe) is explained by the options (``core.bugs.Explanation.OPTIONS``) when no hypothesis
tested on eager explained it; and a located op's dtype is identity only where the same stack passes
that op at another dtype (``dtype_specific``); and a lone divergence of a stack at an op where it
agreed with another stack against eager elsewhere is that reference-suspect behaviour. Labels that
differ in other options (an autotuning flag, say) explain nothing: a divergence one of them shows is
that option's bug. Vectorised joins: a million records in seconds.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from gapfuzz.core.bugs import EXAMPLE_PROBE, GRADIENT_SYMPTOMS, Explanation, Symptom, Verdict, kernel_op

from .option_cover import options_of

CASE = ["seed_id", "backend", "symptom", "output_dtype", "explanation"]  # a ledger case, less its op and verdict
NEEDED = ["variant_id", "seed_id", "backend", "stack", "device", "probe", "verdict", "symptom", "output_dtype",
          "first_div_op", "node_symptom", "align_error", "explanation", "backend_options", "culprit", "culprit_layer",
          "bisect_error", "consensus"]
GRADIENTS = [str(s) for s in GRADIENT_SYMPTOMS]
FORWARD_ANY_PROBE = (Symptom.NUMERIC, Symptom.VALUE)  # forward defects that show on any input reaching them
PRECISION_OPTION = re.compile(r"precision|dtype|b?f(?:loat)?16|fp16|f(?:loat)?32|fp32|half|tf32", re.I)


def _text(s: pd.Series) -> pd.Series:
    return s.astype(object).where(s.notna(), "-")


def inherit_locations(df: pd.DataFrame) -> pd.Series:
    """True where a run took its first divergent op from the located runs of its case (the op most of
    them name; ``df`` is changed)."""
    op = df["first_div_op"]
    skipped = op.isna() & df["align_error"].astype("string").str.startswith("not run").fillna(False).astype(bool)
    if not skipped.any():
        return pd.Series(False, index=df.index)
    case = pd.DataFrame({c: _text(df[c]) for c in CASE}, index=df.index)
    located = case[op.notna()].assign(op=op[op.notna()], ns=_text(df.loc[op.notna(), "node_symptom"]))
    counts = located.value_counts([*CASE, "op", "ns"]).reset_index()
    where = counts.sort_values(["count", "op", "ns"], ascending=[False, True, True],
                               kind="stable").drop_duplicates(CASE)
    rows = case[skipped].assign(_row=np.flatnonzero(skipped.to_numpy()))
    found = rows.merge(where[[*CASE, "op", "ns"]], on=CASE, how="inner")
    df.iloc[found["_row"].to_numpy(), df.columns.get_loc("first_div_op")] = found["op"].to_numpy()
    symptom = found["ns"].where(found["ns"] != "-", None).to_numpy()
    df.iloc[found["_row"].to_numpy(), df.columns.get_loc("node_symptom")] = symptom
    inherited = np.zeros(len(df), dtype=bool)
    inherited[found["_row"].to_numpy()] = True
    return pd.Series(inherited, index=df.index)


def inherit_culprits(df: pd.DataFrame) -> None:
    """A run whose bisection the ledger left to a run of its case still being bisected takes the culprit
    (and layer) that the case's bisected runs at its op name most (``df`` is changed)."""
    waiting = df["culprit"].isna() & df["bisect_error"].astype("string").str.startswith(
        "not run: being bisected").fillna(False).astype(bool)
    if not waiting.any():
        return
    keys = [*CASE, "first_div_op"]
    case = pd.DataFrame({c: _text(df[c]) for c in keys}, index=df.index)
    named = df["culprit"].notna()
    known = case[named].assign(culprit=df.loc[named, "culprit"], layer=df.loc[named, "culprit_layer"])
    counts = known.value_counts([*keys, "culprit", "layer"], dropna=False).reset_index()
    best = counts.sort_values(["count", "culprit"], ascending=[False, True], kind="stable").drop_duplicates(keys)
    rows = case[waiting].assign(_row=np.flatnonzero(waiting.to_numpy()))
    found = rows.merge(best[[*keys, "culprit", "layer"]], on=keys, how="inner")
    df.iloc[found["_row"].to_numpy(), df.columns.get_loc("culprit")] = found["culprit"].to_numpy()
    df.iloc[found["_row"].to_numpy(), df.columns.get_loc("culprit_layer")] = found["layer"].to_numpy()


def culprits_at_nodes(df: pd.DataFrame) -> pd.Series:
    """A located finding whose bisection did not conclude (over its budget, failed, or left to a run still
    being bisected: an error and neither culprit nor layer) takes the culprit that its stack's concluded
    runs at the same node (the op's kernel, forward or backward: ``core.folds``) name, where they name
    that pass alone: one located node's defect is one cluster. Where they name two passes, or the
    kernel itself (bisected, no pass), it keeps none. True where a run took one (``df`` is changed)."""
    out = pd.Series(False, index=df.index)
    finding = (df["verdict"].astype("string").eq(str(Verdict.TARGET_DIVERGENT)).fillna(False)
               & df["explanation"].isna() & df["first_div_op"].notna()).to_numpy()
    concluded = (df["culprit"].notna() | df["culprit_layer"].notna()).to_numpy()
    open_ = finding & ~concluded & df["bisect_error"].notna().to_numpy()
    if not open_.any() or not (finding & concluded).any():
        return out
    shown = df["node_symptom"].astype(object).where(df["node_symptom"].notna(), df["symptom"].astype(object))
    node = pd.DataFrame({"stack": _text(df["stack"]), "device": _text(df["device"]),
                         "op": df["first_div_op"].astype(object).map(kernel_op, na_action="ignore"),
                         "side": shown.isin(GRADIENTS).to_numpy(), "row": np.arange(len(df))})
    place = ["stack", "device", "op", "side"]
    said = node[finding & concluded].assign(culprit=df["culprit"].to_numpy()[finding & concluded],
                                            layer=df["culprit_layer"].to_numpy()[finding & concluded])
    said["outcome"] = said["culprit"].where(said["culprit"].notna(), "layer:" + said["layer"].astype(str))
    alone = said.groupby(place)["outcome"].nunique()
    alone = alone[alone == 1].index
    named = said[said["culprit"].notna()].set_index(place)
    named = named[named.index.isin(alone)].reset_index().drop_duplicates(place)[[*place, "culprit", "layer"]]
    found = node[open_].merge(named, on=place)
    if len(found):
        rows = found["row"].to_numpy()
        df.iloc[rows, df.columns.get_loc("culprit")] = found["culprit"].to_numpy()
        df.iloc[rows, df.columns.get_loc("culprit_layer")] = found["layer"].to_numpy()
        out.iloc[rows] = True
    return out


def dtype_specific(df: pd.DataFrame) -> pd.Series:
    """True on the located divergences of an (op, stack, device) that the same stack passes at another
    output dtype, as exact or more (``_as_exact``), on the same seed and probe: a dtype-specific
    kernel, whose dtype is part of its key.
    Elsewhere the dtype is not identity: the cluster lists the dtypes it was seen at."""
    out = pd.Series(False, index=df.index)
    verdict = df["verdict"].astype("string")
    located = (df["first_div_op"].notna() & verdict.isin([str(Verdict.TARGET_DIVERGENT),
                                                          str(Verdict.REFERENCE_SUSPECT)]).fillna(False)).to_numpy()
    passed = verdict.eq(str(Verdict.AGREE)).fillna(False).to_numpy()
    if not located.any() or not passed.any():
        return out
    probe = df["probe"].astype(object).where(df["probe"].notna(), EXAMPLE_PROBE)
    where = pd.DataFrame({"stack": _text(df["stack"]), "device": _text(df["device"]), "seed_id": _text(df["seed_id"]),
                          "probe": probe, "dtype": _text(df["output_dtype"]), "op": _text(df["first_div_op"]),
                          "row": np.arange(len(df))})
    place = ["stack", "device", "seed_id", "probe"]
    fine = where.loc[passed, [*place, "dtype"]].drop_duplicates()
    pairs = where[located].merge(fine, on=place, suffixes=("", "_ok"))
    group = ["stack", "device", "op"]
    seen = where.loc[located, [*group, "dtype"]].drop_duplicates().assign(_diverges=True)  # where the op diverges
    pairs = pairs.merge(seen.rename(columns={"dtype": "dtype_ok"}), on=[*group, "dtype_ok"], how="left")
    finer = [_as_exact(ok, bad) for ok, bad in zip(pairs["dtype_ok"], pairs["dtype"])]
    specific = pairs.loc[pairs["_diverges"].isna().to_numpy() & np.array(finer, dtype=bool), group].drop_duplicates()
    if specific.empty:
        return out
    rows = where[located].merge(specific, on=["stack", "device", "op"])["row"].to_numpy()
    out.iloc[rows] = True
    return out


FLOAT_RANK = {"float64": 0, "float32": 1, "float16": 2, "bfloat16": 3}  # most exact first


def _as_exact(passed: str, diverged: str) -> bool:
    """Whether passing at ``passed`` says the op is wrong at ``diverged`` alone: a float dtype at least as
    exact (passing at bfloat16 only says its tolerance is looser), or another integer dtype."""
    if passed in FLOAT_RANK and diverged in FLOAT_RANK:
        return FLOAT_RANK[passed] <= FLOAT_RANK[diverged]
    return passed not in FLOAT_RANK and diverged not in FLOAT_RANK and "int" in passed and "int" in diverged


def extend_consensus(df: pd.DataFrame) -> None:
    """A stack's lone divergence at an op and node symptom where, elsewhere in the campaign, it agreed
    with another stack against eager (``reference-suspect``, ``workers.judge.consensus``) is the same
    PyTorch behaviour (ONNX Runtime refusing float16 ``sign`` leaves OpenVINO alone there): it is
    reference-suspect too, with that consensus (``df`` is changed)."""
    verdict = df["verdict"].astype("string")
    suspect = verdict.eq(str(Verdict.REFERENCE_SUSPECT)).fillna(False).to_numpy()
    lone = (verdict.eq(str(Verdict.TARGET_DIVERGENT)).fillna(False) & df["first_div_op"].notna()).to_numpy()
    if not suspect.any() or not lone.any():
        return
    place = pd.DataFrame({"op": _text(df["first_div_op"]), "ns": _text(df["node_symptom"]), "stack": _text(df["stack"]),
                          "consensus": df["consensus"].astype(object), "row": np.arange(len(df))})
    known = place[suspect].assign(stack=place.loc[suspect, "consensus"].astype(str).str.split(",")).explode("stack")
    known = known.drop_duplicates(["op", "ns", "stack"])[["op", "ns", "stack", "consensus"]]
    found = place[lone].drop(columns="consensus").merge(known, on=["op", "ns", "stack"])
    if len(found):
        rows = found["row"].to_numpy()
        df.iloc[rows, df.columns.get_loc("verdict")] = str(Verdict.REFERENCE_SUSPECT)
        df.iloc[rows, df.columns.get_loc("consensus")] = found["consensus"].to_numpy()


def _precision_only(options: pd.Series) -> dict[tuple[str, str], bool]:
    """For each pair of backend labels: whether their options differ in precision settings alone."""
    parsed = {backend: options_of(value) for backend, value in options.items()}
    out = {}
    for a, oa in parsed.items():
        for b, ob in parsed.items():
            differ = [k for k in set(oa) | set(ob) if oa.get(k) != ob.get(k)]
            out[(a, b)] = bool(differ) and all(PRECISION_OPTION.search(f"{k}={oa.get(k)}={ob.get(k)}") for k in differ)
    return out


def explain_by_options(df: pd.DataFrame) -> None:
    """Divergences that another label of the same stack and device, differing from it in precision
    options alone, does not show on the same variant and probe: explained by the options (``df``'s
    ``explanation`` is filled where it was empty)."""
    verdict = df["verdict"].astype("string")
    agree = verdict.eq(str(Verdict.AGREE)).fillna(False).to_numpy()
    diverged = verdict.eq(str(Verdict.TARGET_DIVERGENT)).fillna(False).to_numpy() & df["explanation"].isna().to_numpy()
    if not agree.any() or not diverged.any():
        return
    probe = df["probe"].astype(object).where(df["probe"].notna(), EXAMPLE_PROBE)
    where = pd.DataFrame({"variant_id": df["variant_id"].to_numpy(), "probe": probe.to_numpy(),
                          "stack": df["stack"].to_numpy(), "device": df["device"].to_numpy(),
                          "backend": df["backend"].to_numpy(), "row": np.arange(len(df))})
    fine = where[agree].drop(columns="row").drop_duplicates()
    pairs = where[diverged].merge(fine, on=["variant_id", "probe", "stack", "device"], suffixes=("", "_other"))
    pairs = pairs[pairs["backend"] != pairs["backend_other"]]
    if pairs.empty:
        return
    options = df.drop_duplicates("backend").set_index("backend")["backend_options"]
    precision_only = _precision_only(options)
    pairs = pairs[[precision_only.get((a, b), False) for a, b in zip(pairs["backend"], pairs["backend_other"])]]
    column = df.columns.get_loc("explanation")
    df.iloc[pairs["row"].unique(), column] = str(Explanation.OPTIONS)


def derive(df: pd.DataFrame) -> pd.DataFrame:
    """The records with inherited locations and option explanations filled in, and ``op_inherited``."""
    df = df.copy()
    for c in NEEDED:
        if c not in df.columns:
            df[c] = pd.Series(None, index=df.index, dtype=object)
    df["first_div_op"] = df["first_div_op"].astype(object)
    df["explanation"] = df["explanation"].astype(object)
    df["op_inherited"] = inherit_locations(df)
    for c in ("culprit", "culprit_layer"):
        df[c] = df[c].astype(object)
    inherit_culprits(df)
    df["culprit_inherited"] = culprits_at_nodes(df)
    explain_by_options(df)
    df["verdict"], df["consensus"] = df["verdict"].astype(object), df["consensus"].astype(object)
    extend_consensus(df)
    df["dtype_specific"] = dtype_specific(df)
    return df


def join_forward(df: pd.DataFrame) -> None:
    """A training run's gradient divergence, located at a node whose forward value its own check found
    right, takes the node symptom of the stack's forward divergences at that op (its kernel,
    ``core.bugs.kernel_op``) on the same seed: on the same probe first, else on any probe where the
    forward is off in value (``FORWARD_ANY_PROBE``), which a probe hides from the forward alone
    (a NaN that fills the node's output, values under the absolute tolerance) but not from its
    gradients. Keyed then as that forward defect (``core.bugs``): one cluster. ``df`` is changed."""
    if "symptom" not in df.columns:
        return
    blamed = df["verdict"].astype("string").eq(str(Verdict.TARGET_DIVERGENT)).fillna(False)
    blamed = (blamed & df["explanation"].isna() & df["first_div_op"].notna()).to_numpy()
    at_node = df["node_symptom"].astype(object).where(df["node_symptom"].notna(), df["symptom"].astype(object))
    gradient = at_node.isin(GRADIENTS).to_numpy()
    wanting, forward = blamed & gradient, blamed & ~gradient & at_node.notna().to_numpy()
    if not wanting.any() or not forward.any():
        return
    rows = np.flatnonzero(wanting | forward)  # only these: a million records are mostly neither
    sub = df.iloc[rows]
    stack = sub["stack"].astype(object).where(sub["stack"].notna() & (sub["stack"] != ""), sub["backend"])
    where = pd.DataFrame({"seed": _text(sub["seed_id"]), "stack": stack.astype(str), "device": _text(sub["device"]),
                          "op": sub["first_div_op"].astype(object).map(kernel_op),
                          "probe": sub["probe"].astype(object).where(sub["probe"].notna(), EXAMPLE_PROBE),
                          "ns": at_node.iloc[rows], "row": rows})
    wanting, forward = wanting[rows], forward[rows]
    place = ["seed", "stack", "device", "op"]
    seen = where[forward]

    def most(runs, on):  # the node symptom most of them show, per place
        counts = runs.value_counts([*on, "ns"]).reset_index().sort_values(["count", "ns"], ascending=[False, True],
                                                                          kind="stable")
        return counts.drop_duplicates(on)[[*on, "ns"]]

    same = most(seen, [*place, "probe"])
    anywhere = most(seen[seen["ns"].isin([str(s) for s in FORWARD_ANY_PROBE])], place)
    found = where[wanting].drop(columns="ns").merge(same, on=[*place, "probe"], how="left")
    found = found.merge(anywhere.rename(columns={"ns": "ns_any"}), on=place, how="left")
    ns = found["ns"].fillna(found["ns_any"])
    joined = ns.notna().to_numpy()
    df.iloc[found["row"].to_numpy()[joined], df.columns.get_loc("node_symptom")] = ns[joined].to_numpy()
