"""A test-only stack whose matrix products' forward is off, loaded by
``tests.stacks.forward_backends:ScaledMatmulForward``.

Every ``mm``, ``addmm``, ``bmm``, ``matmul`` and ``linear`` of the graph it is given returns its
result scaled by ``1 + SCALE``: a kernel that is wrong in its forward. It trains, and its gradients
are autograd's of that wrong forward, so a training run's gradients are off where its forward is:
one defect, seen forward and backward (``core.bugs``, ``analysis.clusters.join_forward``).
"""
from __future__ import annotations

import torch

from gapfuzz.workers.run.registry import Backend

from .numeric_backends import _retargeted

aten = torch.ops.aten
SCALE = 1e-2
MATMULS = (aten.mm.default, aten.addmm.default, aten.bmm.default, aten.matmul.default, aten.linear.default)


def _scaled(op):
    def run(*args, **kwargs):
        return aten.mul.Tensor(op(*args, **kwargs), 1.0 + SCALE)
    run.__name__ = run.__qualname__ = f"scaled_{op.__name__.replace('.', '_')}"
    return run


_SCALED = {op: _scaled(op) for op in MATMULS}


class ScaledMatmulForward(Backend):
    name = "scaled-matmul-forward"
    trains = True

    def prepare(self, gm, example_inputs, device):
        for op, fn in _SCALED.items():
            gm = _retargeted(gm, (op,), fn)
        return gm
