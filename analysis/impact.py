"""How much real code a cluster touches: the model seeds of a seed catalog that contain its operators.

A finding on an operator no real model uses is worth less than one on ``conv2d``. A cluster's
operators are the ops its runs diverged at first (``first_div_op``) or its failure names
(``failing_op``); a catalog (``gapfuzz seeds scan``, or the seeds the campaign itself built) lists
every model seed's ops. Overloads are one operator here (``aten.add.Tensor`` and ``aten.add.Scalar``
are ``aten.add``), a seed rebuilt at another size (``<id>@<n>``) is its model once, and operator
seeds (source ``ops``) are not real models. A cluster with no operator has no impact figure.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from gapfuzz.core.bugs import MISSING, Status
from gapfuzz.core.ids import SeedId


def op_base(op: str) -> str:
    """``aten.add.Tensor`` -> ``aten.add``; ``aten::add`` -> ``aten.add``."""
    parts = str(op).replace("::", ".").split(".")
    return ".".join(parts[:2])


def models_by_op(catalog: pd.DataFrame) -> dict[str, set]:
    """Operator -> the model seeds (sizes folded) of a catalog whose graph contains it."""
    if catalog is None or catalog.empty or "ops" not in catalog:
        return {}
    models = catalog[(catalog["source"] != "ops") & (catalog["status"] == Status.OK)]
    out: dict[str, set] = {}
    for seed, ops in zip(models["seed_id"].map(lambda s: SeedId.parse(s).base), models["ops"]):
        for op in set(map(op_base, list(ops) if isinstance(ops, (list, tuple, np.ndarray)) else [])):
            out.setdefault(op, set()).add(seed)
    return out


def cluster_ops(row) -> list[str]:
    """The operators a cluster row names: its divergent ops, or the op its failure names."""
    ops = list(row["ops"]) if isinstance(row.get("ops"), (list, np.ndarray)) else []
    for single in (row.get("first_div_op"), row.get("failing_op")):
        if isinstance(single, str) and single not in ("", MISSING) and single not in ops:
            ops.append(single)
    return ops


def impact(clusters: pd.DataFrame, catalog: pd.DataFrame | None) -> pd.Series:
    """Per cluster: how many model seeds of the catalog contain any of its operators (NaN: it names none,
    or there is no catalog)."""
    index = models_by_op(catalog)
    if not index:
        return pd.Series(np.nan, index=clusters.index, dtype=float)
    values = []
    for _, row in clusters.iterrows():
        ops = {op_base(op) for op in cluster_ops(row)}
        values.append(float(len(set().union(*(index.get(op, set()) for op in ops)))) if ops else np.nan)
    return pd.Series(values, index=clusters.index, dtype=float)


def catalog_models(catalog: pd.DataFrame | None) -> int:
    """How many model seeds a catalog holds (what an impact figure is out of)."""
    if catalog is None or catalog.empty:
        return 0
    models = catalog[(catalog["source"] != "ops") & (catalog["status"] == Status.OK)]
    return int(models["seed_id"].map(lambda s: SeedId.parse(s).base).nunique())
