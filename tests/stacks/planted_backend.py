"""A test-only stack with one planted fault per operator, each a different failure mode, and one
benign difference; loaded by ``tests.stacks.planted_backend:PlantedFaults``.

- ``silu``: refuses the graph, naming the FX node and its users (a list as long as the graph makes it);
- ``tanh``: 2 % too large everywhere (a numeric defect as large as bfloat16 at its worst element);
- ``relu``: NaN becomes 0 (a special-value defect: only the probes show it);
- ``add`` on int32: saturates instead of wrapping (an integer defect: only overflowing probes show it);
- ``sum``: adds in the reverse order, exact in real arithmetic: no defect at all.

Triage must make one cluster of each fault and none of the reordered sum.
"""
from __future__ import annotations

import torch

from gapfuzz.workers.run.registry import Backend

from .numeric_backends import _retargeted, _saturating_add

aten = torch.ops.aten


def _tanh_too_large(x):
    return aten.tanh.default(x) * 1.02


def _relu_drops_nan(x):
    return torch.nan_to_num(aten.relu.default(x), nan=0.0)


def _reversed_sum(x, dim=None, keepdim=False, dtype=None):
    dims = list(range(x.dim())) if not dim else list(dim)
    flipped = x.flip(dims) if x.dim() else x
    if dim is None:
        return aten.sum.default(flipped, dtype=dtype)
    return aten.sum.dim_IntList(flipped, dim, keepdim, dtype=dtype)


class PlantedFaults(Backend):
    name = "planted"

    def prepare(self, gm, example_inputs, device):
        for n in gm.graph.nodes:
            if n.op == "call_function" and n.target is aten.silu.default:
                users = ", ".join(f"%{u.name}" for u in n.users)
                raise RuntimeError(f"planted fault: cannot lower %{n.name} (its users: [{users}])")
        gm = _retargeted(gm, (aten.tanh.default,), _tanh_too_large)
        gm = _retargeted(gm, (aten.relu.default,), _relu_drops_nan)
        gm = _retargeted(gm, (aten.add.Tensor,), _saturating_add)
        return _retargeted(gm, (aten.sum.default, aten.sum.dim_IntList), _reversed_sum)
