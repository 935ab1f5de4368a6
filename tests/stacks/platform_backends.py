"""Test-only stacks for the platform's comparisons (``workers.judge.comparisons``, ``workers.run.platform``).

``Tf32Rounding`` is a GPU's TF32 on the CPU: with the platform's TF32 on (``tf32: true``), every matrix
product and convolution rounds its two operands to TF32's 10 mantissa bits, as TF32 kernels do; off,
it is eager. ``HostEager`` runs as the reference on ``cpu`` and as the platform on a fake ``npu`` whose
matrix products always round so (a platform that differs from the host); ``NpuCompiler`` calls the
very same kernels there, and ``FaultyNpuCompiler`` does too but also sums wrong (a compiler's own
defect: each sum scaled by ``1 + tests.stacks.forward_backends.SCALE``).
"""
from __future__ import annotations

import torch

from gapfuzz.workers.run.registry import Backend

from .forward_backends import _scaled
from .numeric_backends import _retargeted

aten = torch.ops.aten
# op -> the positions of the operands whose products are summed
OPERANDS = {aten.mm.default: (0, 1), aten.bmm.default: (0, 1), aten.addmm.default: (1, 2),
            aten.baddbmm.default: (1, 2), aten.matmul.default: (0, 1), aten.linear.default: (0, 1),
            aten.convolution.default: (0, 1), aten.conv1d.default: (0, 1), aten.conv2d.default: (0, 1)}
SUMS = (aten.sum.default, aten.sum.dim_IntList)


def to_tf32(t):
    """float32 rounded to nearest on 10 explicit mantissa bits (the 13 low bits cleared)."""
    if not isinstance(t, torch.Tensor) or t.dtype != torch.float32:
        return t
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def _rounding(op, positions):
    def run(*args, **kwargs):
        args = [to_tf32(a) if i in positions else a for i, a in enumerate(args)]
        return op(*args, **kwargs)
    run.__name__ = run.__qualname__ = f"tf32_{op.__name__.replace('.', '_')}"
    return run


_ROUNDING = {op: _rounding(op, positions) for op, positions in OPERANDS.items()}


_WRONG_SUMS = {op: _scaled(op) for op in SUMS}


def rounded(gm):
    """``gm`` with TF32's operand rounding at each matrix product and convolution."""
    for op, fn in _ROUNDING.items():
        gm = _retargeted(gm, (op,), fn)
    return gm


class Tf32Rounding(Backend):
    name = "tf32-rounding"

    def prepare(self, gm, example_inputs, device):
        on = torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32  # set by the executor
        return rounded(gm) if on else gm


class OnHost(Backend):
    """A stack on the fake ``npu`` computed on the host CPU."""

    input_device = "cpu"

    @classmethod
    def unavailable_reason(cls, device):
        return None if device in cls.devices else f"{cls.name} does not run on {device}"


class HostEager(OnHost):
    name = "host-eager"
    devices = ("cpu", "npu")

    def prepare(self, gm, example_inputs, device):
        return rounded(gm) if device == "npu" else gm


class NpuCompiler(OnHost):
    name = "npu-compiler"
    devices = ("npu",)

    def prepare(self, gm, example_inputs, device):
        return rounded(gm)


class FaultyNpuCompiler(NpuCompiler):
    name = "faulty-npu-compiler"

    def prepare(self, gm, example_inputs, device):
        gm = rounded(gm)
        for op, fn in _WRONG_SUMS.items():
            gm = _retargeted(gm, (op,), fn)
        return gm
