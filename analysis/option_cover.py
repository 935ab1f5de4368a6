"""Which option values, and which pairs of them, a target's runs had: read from the records.

A target with an ``option_space`` runs each variant with one option set (``core.covering``: a row of
a pairwise covering array, or a random draw). What counts is what ran, so coverage is counted from
the records' ``backend_options`` (a space option absent from them ran at its null value, the stack's
default), never from the plan. Records a worker did not run (a seed that failed to build, a variant
no mutator changed) carry no option set and are left out. No torch here.
"""
from __future__ import annotations

import json
from itertools import combinations, product

import pandas as pd

from gapfuzz.core.modes import DEFAULT_MODE
from gapfuzz.results.columns import backend_options_of, texts

COLUMNS = ["backend", "seed_id", "mode", "backend_options", "backend_version"]


def options_of(value) -> dict:
    """A record's ``backend_options`` (a mapping, its nested column, or the JSON text of an older folder);
    anything else, as a foreign or torn record may hold, is no options rather than an error that stops the
    whole triage."""
    try:
        return backend_options_of(value)
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}


def text(value) -> str:
    """An option value as the JSON text records and tables compare."""
    return json.dumps(value, sort_keys=True, default=str)


def space_pairs(space: dict) -> set:
    """Every pair of values of two options of ``space``: ``((option, value), (option, value))``, values as
    JSON text, options in name order."""
    names = sorted(space)
    return {((a, text(x)), (b, text(y))) for a, b in combinations(names, 2) for x, y in product(space[a], space[b])}


def values_in(options: dict, space: dict) -> dict:
    """The value (JSON text) each option of ``space`` had in a run with ``options``: an absent one, or one
    outside the space where the space has null, had the null value; one outside it otherwise is left out."""
    out = {}
    for name, values in space.items():
        known = {text(v) for v in values}
        value = text(options.get(name))
        if value not in known and text(None) in known:
            value = text(None)
        if value in known:
            out[name] = value
    return out


def pairs_of(values: dict) -> set:
    """The pairs of option values one run had (``values_in``)."""
    return {((a, values[a]), (b, values[b])) for a, b in combinations(sorted(values), 2)}


def _ran(df: pd.DataFrame, spaces: dict) -> pd.DataFrame:
    """The records of targets with a space that a worker ran (they hold the stack's version)."""
    ran = df["backend"].isin(list(spaces)) & df["backend_version"].fillna("").astype(bool)
    out = df.loc[ran, ["backend", "seed_id", "mode", "backend_options"]].copy()
    out["backend_options"] = texts("backend_options", out["backend_options"])  # hashable: JSON text
    out["mode"] = out["mode"].astype(object).where(out["mode"].notna(), DEFAULT_MODE)
    return out.drop_duplicates()


def pair_coverage(df: pd.DataFrame, spaces: dict, by=("seed_id", "mode")) -> pd.DataFrame:
    """Per target with an option space (``spaces``: backend -> space) and per ``by`` (seed and mode by
    default; ``("mode",)`` for the whole run per mode): ``sets`` (distinct option sets run), ``pairs``
    (pairs of values run), ``of`` (pairs in the space), ``share``, and ``values`` (option values run)
    out of ``of_values`` (values in the space)."""
    by = list(by)
    rows = []
    for keys, g in _ran(df, spaces).groupby(["backend", *by], sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        space = spaces[keys[0]]
        sets = [values_in(options_of(s), space) for s in g["backend_options"].unique()]
        every = space_pairs(space)
        pairs = set().union(*map(pairs_of, sets)) & every
        values = {(k, v) for s in sets for k, v in s.items()}
        rows.append((*keys, len({text(s) for s in sets}), len(pairs), len(every),
                     len(pairs) / len(every) if every else 1.0, len(values),
                     len({(k, text(v)) for k, vs in space.items() for v in vs})))
    return pd.DataFrame(rows, columns=["backend", *by, "sets", "pairs", "of", "share", "values", "of_values"])


def values_run(df: pd.DataFrame, spaces: dict) -> pd.DataFrame:
    """Per target, mode and option: the values its runs had and those of the space they never had."""
    rows = []
    for (backend, mode), g in _ran(df, spaces).groupby(["backend", "mode"], sort=True):
        space = spaces[backend]
        had: dict[str, set] = {}
        for s in g["backend_options"].unique():
            for name, value in values_in(options_of(s), space).items():
                had.setdefault(name, set()).add(value)
        for name in sorted(space):
            texts = [text(v) for v in space[name]]
            rows.append((backend, mode, name, [t for t in texts if t in had.get(name, ())],
                         [t for t in texts if t not in had.get(name, ())]))
    return pd.DataFrame(rows, columns=["backend", "mode", "option", "values", "missing"])


def shared_options(df: pd.DataFrame, rows: pd.DataFrame, cid: pd.Series) -> pd.Series:
    """Per cluster, the options (``k=v``) that every one of its runs had, of those its backend ran with more
    than one value of in the campaign (a target's ``option_space``): what a configuration-only defect needs."""
    if "backend_options" not in df.columns:
        return pd.Series(None, index=cid.unique(), dtype=object)
    text = pd.Series(texts("backend_options", df["backend_options"]), index=df.index, dtype=object)  # hashable
    drawn = text.groupby(df["backend"]).nunique()
    drawn = set(drawn[drawn > 1].index)
    if not drawn:
        return pd.Series(None, index=cid.unique(), dtype=object)
    mine = pd.Series(texts("backend_options", rows["backend_options"]), index=rows.index, dtype=object)
    parsed = {s: options_of(s) for s in mine.dropna().unique()}
    varying: dict[str, set] = {}
    for backend in drawn:
        sets = [options_of(s) for s in text[df["backend"] == backend].dropna().unique()]
        varying[backend] = {k for k in set().union(*sets) if len({json.dumps(o.get(k)) for o in sets}) > 1}
    out = {}
    for c, group in rows.assign(backend_options=mine.to_numpy()).groupby(cid, sort=False):
        common = None
        for backend, opts in zip(group["backend"], group["backend_options"]):
            items = {(k, json.dumps(v)) for k, v in parsed.get(opts, {}).items() if k in varying.get(backend, ())}
            common = items if common is None else common & items
        out[c] = ", ".join(f"{k}={v}" for k, v in sorted(common)) if common else None
    return pd.Series(out, dtype=object)
