"""Random values of one magnitude (tiny, unit, large, near overflow) in every floating input."""
from __future__ import annotations

import torch

from gapfuzz.workers.run.probes.base import ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS

MAGNITUDES = {"tiny": 1e-4, "unit": 1.0, "large": 1e4, "overflow": None}  # None: near the dtype's largest


@PROBE_KINDS.register
class Random(ProbeKind):
    """Normal random values at a scale, or a quarter to a half of the dtype's largest finite value."""

    name = "random"
    order = 20
    needs = "value"
    counted = True
    params = {"magnitude": tuple(MAGNITUDES)}
    rounds = (({"magnitude": "large"},), ({"magnitude": "tiny"},), (), ({"magnitude": "overflow"},), (),
              ({"magnitude": "unit"},))
    legacy = {"random:large": 1, "random:tiny": 6, "random:overflow": 15, "random:unit": 23}

    def make_one(self, t, params, g):
        real = t.real if t.is_complex() else t
        scale = MAGNITUDES[params["magnitude"]]
        if scale is None:  # near overflow: a quarter to a half of the largest finite value
            top = torch.finfo(real.dtype).max
            u = torch.rand(t.shape, generator=g, dtype=torch.float64)
            sign = torch.where(torch.rand(t.shape, generator=g) < 0.5, -1.0, 1.0).double()
            return (sign * top * (0.25 + 0.25 * u)).to(t.dtype)
        return (torch.randn(t.shape, generator=g, dtype=torch.float64) * scale).to(t.dtype)
