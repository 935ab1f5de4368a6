"""A test-only stack wrong where the dtype is the meaning, loaded by ``tests.stacks.edge_backends:WideNextafter``:
its ``nextafter`` steps in float64 and rounds back, so a float32 input comes back unchanged (one float64
ulp is far below float32's). Eager is right; a float64 oracle, which answers the float64 question, would
side with this stack and blame eager."""
from __future__ import annotations

import torch

from gapfuzz.workers.run.registry import Backend

from .numeric_backends import _retargeted

aten = torch.ops.aten


def _wide_nextafter(x, other):
    return aten.nextafter.default(x.double(), other.double()).to(x.dtype)


class WideNextafter(Backend):
    name = "wide-nextafter"

    def prepare(self, gm, example_inputs, device):
        return _retargeted(gm, (aten.nextafter.default,), _wide_nextafter)


class CanonicalBits(Backend):
    """Returns every NaN as the positive quiet NaN and every zero as +0.0: within any tolerance, and wrong
    bit for bit where the bits are exact by contract (``flip``, ``neg``, a copy)."""

    name = "canonical-bits"

    def prepare(self, gm, example_inputs, device):
        def call(*inputs):
            out = gm(*inputs)
            return tuple(torch.where(o.isnan(), torch.full_like(o, float("nan")), o) + 0.0
                         if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out)
        return call


def _entr_scaled(x):
    """entr with its product scaled by 1.01 before it is scaled back: the intermediate overflows for results
    within 1 % of the dtype's largest finite value, where eager's is still finite."""
    y = x * (torch.log(x) * 1.01)
    return torch.where(x > 0, -y / 1.01, aten.special_entr.default(x))


class EarlyOverflowEntr(Backend):
    """``special.entr`` whose intermediate overflows early: right everywhere but in a band a few ulps wide
    in input around 3.8e36 (float32), far from the dtype's largest value, its square root and its log."""

    name = "early-overflow-entr"

    def prepare(self, gm, example_inputs, device):
        return _retargeted(gm, (aten.special_entr.default,), _entr_scaled)
