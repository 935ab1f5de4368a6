"""A test-only stack whose backward is wrong for one operator, loaded by
``tests.stacks.planted_backward:WrongTanhBackward``.

Forward is eager's, exactly. The gradient of ``tanh`` is ``grad * (1 - y)`` where it should be
``grad * (1 - y**2)``: a backward formula with a dropped square, the kind of slip a hand-written
backward kernel makes. Inference runs agree everywhere; only training runs can show it.
"""
from __future__ import annotations

import torch

from gapfuzz.workers.run.registry import Backend

from .numeric_backends import _retargeted

aten = torch.ops.aten


class _Tanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = aten.tanh.default(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (1 - y)


def _tanh(x):
    return _Tanh.apply(x)


class WrongTanhBackward(Backend):
    name = "wrong-tanh-backward"
    trains = True

    def prepare(self, gm, example_inputs, device):
        return _retargeted(gm, (aten.tanh.default,), _tanh)
