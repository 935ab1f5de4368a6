"""A test-only stack whose matrix-product kernel drops the contraction's tail (``TailGemm``).

Like a GEMM library behind a ``torch.compile`` backend that tiles the contraction in 32-element
steps past 2048 and forgets the elements after the last full tile: every matrix product it runs
(``mm``, ``bmm``, ``baddbmm``, ``addmm``, ``mv``, ``dot`` and what ``matmul``, ``einsum``,
``tensordot`` and ``linear`` decompose into) leaves them out when its contraction is longer than 2048
and not a multiple of 32. Right at every contraction up to 2048 and at 2048, 4096 and every other
multiple of 32, so only a seed whose contraction is rebuilt past 2048 with a tail shows it: a product
resized on one operand alone does not run, and one given 2048 or 4096 has no tail.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gapfuzz.workers.run.registry import Backend

aten = torch.ops.aten
WIDE, TILE = 2048, 32


def _cut(k: int) -> int:
    """How many of ``k`` contracted elements the kernel leaves out."""
    return k % TILE if k > WIDE else 0


def _dropped(func, args: tuple) -> tuple | None:
    """``args`` with the contraction's tail cut from both operands, or None when nothing is cut."""
    if func in (aten.mm.default, aten.bmm.default, aten.mv.default, aten.dot.default, aten.vdot.default):
        (a, b), rest, head = args[:2], args[2:], ()
    elif func in (aten.addmm.default, aten.baddbmm.default, aten.addbmm.default, aten.addmv.default):
        (a, b), rest, head = args[1:3], args[3:], args[:1]
    else:
        return None
    cut = _cut(a.shape[-1])
    if not cut:
        return None
    right = b[..., :-cut] if b.dim() == 1 else b[..., :-cut, :]
    return (*head, a[..., :-cut], right, *rest)


class _DropTails(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        cut = _dropped(func, args)
        return func(*(cut if cut is not None else args), **(kwargs or {}))


class TailGemm(Backend):
    name = "tail-gemm"

    def prepare(self, gm, example_inputs, device):
        def run(*inputs):
            with _DropTails():
                return gm(*inputs)

        return run
