"""Integer inputs used as numbers at their dtype's corners: the extremes, -1, 0, half the largest (a sum
overflows), values over the whole range, and powers of two with their neighbours (127, 128, 129:
a sum, a product or an absolute value past a narrower type's range)."""
from __future__ import annotations

import math

import torch

from gapfuzz.workers.run.probes.base import ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS

INTEGER_CORNERS = ("max", "min", "zero", "minus-one", "overflow-sum", "random", "powers")


def powers(dtype: torch.dtype) -> list[int]:
    """Powers of two and their neighbours within ``dtype``, either sign where it has one, and the square
    root of its largest value and one past it (a square that fits, and one that overflows)."""
    info = torch.iinfo(dtype)
    root = math.isqrt(info.max)
    values = {v for k in range(info.bits) for v in (2 ** k - 1, 2 ** k, 2 ** k + 1)} | {root, root + 1}
    values |= {-v for v in values} if info.min < 0 else set()
    return sorted(v for v in values if info.min <= v <= info.max)


@PROBE_KINDS.register
class Integer(ProbeKind):
    """An integer input used as a number at its dtype's corners."""

    name = "integer"
    order = 30
    needs = "integer"
    counted = True
    params = {"corner": INTEGER_CORNERS}
    rounds = tuple(({"corner": c},) for c in ("max", "min", "overflow-sum", "minus-one", "zero", "random", "powers"))
    legacy = {"integer:max": 2, "integer:min": 7, "integer:overflow-sum": 12, "integer:minus-one": 16,
              "integer:zero": 20, "integer:random": 24}

    def make_one(self, t, params, g):
        corner, info = params["corner"], torch.iinfo(t.dtype)
        if corner == "random":
            return torch.randint(info.min, info.max, t.shape, generator=g, dtype=torch.int64).to(t.dtype)
        if corner == "powers":
            values = torch.tensor(powers(t.dtype), dtype=torch.int64)
            return values[torch.randint(len(values), t.shape, generator=g)].to(t.dtype)
        value = {"max": info.max, "min": info.min, "zero": 0, "minus-one": -1 if info.min < 0 else info.max,
                 "overflow-sum": info.max // 2 + 1}[corner]
        return torch.full_like(t, value)
