"""Amplified rounding: a step function of its inputs turns their rounding-level difference into a whole one.

Two stacks that sum a long dot product in different orders land a few ulps apart; where ``round``,
``floor``, a comparison, argmax or a float-to-integer cast follows, a value near a step lands on
either side of it and the difference becomes 1, or True against False. Tier 2 (``workers.judge.align``)
calls that *amplified* when the node is one of these, its inputs are computed no worse by the target
than by the reference, and its output differs only where its inputs do (``amplifies``).
"""
from __future__ import annotations

import torch

from gapfuzz.workers.judge.interpret import Evaluator

aten = torch.ops.aten
DISCONTINUOUS = {
    aten.floor.default, aten.ceil.default, aten.round.default, aten.round.decimals, aten.trunc.default,
    aten.sign.default, aten.eq.Tensor, aten.eq.Scalar, aten.ne.Tensor, aten.ne.Scalar, aten.lt.Tensor,
    aten.lt.Scalar, aten.le.Tensor, aten.le.Scalar, aten.gt.Tensor, aten.gt.Scalar, aten.ge.Tensor,
    aten.ge.Scalar, aten.argmax.default, aten.argmin.default, aten.sort.default, aten.sort.stable,
    aten.topk.default, aten.max.dim, aten.min.dim, aten.remainder.Tensor, aten.remainder.Scalar,
    aten.fmod.Tensor, aten.fmod.Scalar, aten.floor_divide.default, aten.div.Tensor_mode,
    aten.bucketize.Tensor, aten.searchsorted.Tensor, aten.argsort.default, aten.argsort.stable,
}


def is_discontinuous(node, value, inputs: list) -> bool:
    """A step function of its inputs: rounding, comparison, selection, or a float-to-integer cast."""
    if node.target in DISCONTINUOUS:
        return True
    floats_in = any(v.is_floating_point() for v in inputs if isinstance(v, torch.Tensor))
    return isinstance(value, torch.Tensor) and not value.is_floating_point() and floats_in


def all_values(gm, inputs: tuple, widen: bool = False) -> dict:
    """Every node's value on eager on the host, placeholders and weights too; float64 when ``widen``."""
    out = {}

    def record(n, value, reused):
        out[n.name] = value.detach() if isinstance(value, torch.Tensor) else value

    with torch.no_grad():
        Evaluator(gm, "cpu", widen, on_value=record).run(*inputs)
    return out


def amplifies(target: list, reference: list) -> bool:
    """Whether a discontinuous node's divergence comes from its inputs: they differ somewhere, and, for a
    node that keeps its input's shape (round, a comparison, a cast), the output differs only where an input
    does. Inputs that are the same bits with a different output are the node's own doing."""
    out, ins = target[0], target[1:]
    differs = [not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                    and torch.equal(a.nan_to_num(), b.nan_to_num())) for a, b in zip(ins, reference[1:])]
    if not any(differs):
        return False
    ref = reference[0]
    same_shape = [(a, b) for a, b in zip(ins, reference[1:]) if isinstance(a, torch.Tensor) and
                  isinstance(b, torch.Tensor) and a.shape == b.shape and isinstance(out, torch.Tensor)
                  and a.shape == out.shape]
    if not same_shape or not isinstance(ref, torch.Tensor) or ref.shape != out.shape:
        return True
    moved = torch.zeros(out.shape, dtype=torch.bool)
    for a, b in same_shape:
        moved |= a.cpu().double().nan_to_num() != b.cpu().double().nan_to_num()
    wrong = out.cpu().double().nan_to_num() != ref.cpu().double().nan_to_num()
    return bool((wrong & ~moved).sum() == 0)


