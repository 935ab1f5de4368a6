"""A test-only stack wrong where the dtype is the meaning, loaded by ``tests.edge_backends:WideNextafter``:
its ``nextafter`` steps in float64 and rounds back, so a float32 input comes back unchanged (one float64
ulp is far below float32's). Eager is right; a float64 oracle, which answers the float64 question, would
side with this stack and blame eager."""
from __future__ import annotations

import torch

from workers.registry import Backend

from .numeric_backends import _retargeted

aten = torch.ops.aten


def _wide_nextafter(x, other):
    return aten.nextafter.default(x.double(), other.double()).to(x.dtype)


class WideNextafter(Backend):
    name = "wide-nextafter"

    def prepare(self, gm, example_inputs, device):
        return _retargeted(gm, (aten.nextafter.default,), _wide_nextafter)
