"""Eager made to compute a variant the way an explanation hypothesis says a stack does.

``Emulator`` is the one node loop of ``workers.judge.interpret.Evaluator`` with each call rewritten:
every float op in bfloat16 or float16 (inputs rounded, the result rounded and returned in the
dtype the op gives); matmul and convolution operands (not their bias) rounded to TF32's 10
mantissa bits; a float16 or bfloat16 graph in float32 throughout, rounded only at its outputs;
or each reduction's operands reversed along the reduced axis (the same value in exact arithmetic,
another float32 rounding). ``workers.judge.explain`` compares what it gives with the reference.
"""
from __future__ import annotations

import functools

import torch
from torch.utils._pytree import tree_leaves, tree_map

from gapfuzz.core.bugs import Explanation
from gapfuzz.workers.judge.interpret import Evaluator

aten = torch.ops.aten
# hypothesis -> (the dtype it computes in, the dtypes it narrows to that)
PRECISIONS = {Explanation.BFLOAT16: (torch.bfloat16, (torch.float32, torch.float16, torch.float64)),
              Explanation.FLOAT16: (torch.float16, (torch.float32, torch.float64))}
HALF = (torch.float16, torch.bfloat16)  # what FLOAT32 computes in float32 throughout
# op -> the positions of the two operands whose products are summed (TF32 rounds these, not a bias)
MATMULS = {aten.mm.default: (0, 1), aten.bmm.default: (0, 1), aten.matmul.default: (0, 1),
           aten.addmm.default: (1, 2), aten.baddbmm.default: (1, 2), aten.linear.default: (0, 1),
           aten.convolution.default: (0, 1), aten.conv1d.default: (0, 1), aten.conv2d.default: (0, 1),
           aten.conv3d.default: (0, 1), aten._convolution.default: (0, 1)}
CONVS = (aten.conv1d.default, aten.conv2d.default, aten.conv3d.default)


def round_tf32(t: torch.Tensor) -> torch.Tensor:
    """float32 rounded to nearest on TF32's 10 explicit mantissa bits (13 low bits cleared)."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def _map(fn, a):
    """``a`` (a call's arguments or result) with ``fn`` applied to every tensor in it."""
    return tree_map(lambda x: fn(x) if isinstance(x, torch.Tensor) else x, a, is_leaf=_size)


def _widen(a):
    """float16 and bfloat16 tensors and dtype arguments as float32."""
    def wide(x):
        if isinstance(x, torch.dtype):
            return torch.float32 if x in HALF else x
        return x.float() if isinstance(x, torch.Tensor) and x.dtype in HALF else x
    return tree_map(wide, a, is_leaf=_size)


def _size(x) -> bool:
    return isinstance(x, torch.Size)  # a shape argument stays one


def _f32(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype == torch.float32


def _reordered(target, a: list) -> list | None:
    """``a``, the call's arguments, with its reduction's operands reversed along the reduced axis, or
    None when the op reduces nothing this knows how to reverse."""
    if target in (aten.sum.dim_IntList, aten.mean.dim) and _f32(a[0]) and len(a) > 1 and a[1] and a[0].dim():
        return [a[0].flip([d % a[0].dim() for d in a[1]]), *a[1:]]
    if target in (aten.sum.default, aten.mean.default) and _f32(a[0]) and a[0].dim():
        return [a[0].flip(list(range(a[0].dim()))), *a[1:]]
    if target == aten.mm.default and _f32(a[0]):
        return [a[0].flip(1), a[1].flip(0)]
    if target == aten.addmm.default and _f32(a[1]):
        return [a[0], a[1].flip(1), a[2].flip(0), *a[3:]]
    if target == aten.bmm.default and _f32(a[0]):
        return [a[0].flip(2), a[1].flip(1)]
    if target == aten.baddbmm.default and _f32(a[1]):
        return [a[0], a[1].flip(2), a[2].flip(1), *a[3:]]
    if target in (aten.linear.default, aten.matmul.default) and _f32(a[0]) and a[0].dim() and a[1].dim():
        inner = -1 if target == aten.linear.default else max(0, a[1].dim() - 2)  # the summed axis of the second
        return [a[0].flip(-1), a[1].flip(inner), *a[2:]]
    if target in CONVS:
        groups, transposed = a[6] if len(a) > 6 else 1, False
    elif target == aten.convolution.default:
        groups, transposed = a[8], a[6]
    else:
        return None
    if groups == 1 and not transposed and _f32(a[0]) and a[0].dim() == a[1].dim():  # batched
        return [a[0].flip(1), a[1].flip(1), *a[2:]]  # input channels, in the input and in the weight
    return None


class Emulator(Evaluator):
    """Eager, computing each call the way hypothesis ``mode`` says the target does."""

    def __init__(self, gm, mode: Explanation, device: str = "cpu"):
        super().__init__(gm, device)
        self.mode = mode

    def placeholder(self, target, args, kwargs):
        value = super().placeholder(target, args, kwargs)
        return _widen(value) if self.mode == Explanation.FLOAT32 else value

    def get_attr(self, target, args, kwargs):
        value = super().get_attr(target, args, kwargs)
        return _widen(value) if self.mode == Explanation.FLOAT32 else value

    def call_function(self, target, args, kwargs):
        if self.mode == Explanation.FLOAT32:  # half-precision graphs in float32 throughout, casts too
            return target(*_widen(args), **_widen(kwargs))
        if self.mode in PRECISIONS:
            into, narrowed = PRECISIONS[self.mode]
            found = [t.dtype for t in tree_leaves((args, kwargs))
                     if isinstance(t, torch.Tensor) and t.dtype in narrowed]
            if found:
                result = functools.reduce(torch.promote_types, found)  # what the op gives for these inputs
                args, kwargs = _map(lambda t: t.to(into) if t.dtype in narrowed else t, (args, kwargs))
                return _map(lambda t: t.to(result) if t.dtype == into else t, target(*args, **kwargs))
        elif self.mode == Explanation.TF32 and target in MATMULS:
            args = list(args)
            for i in MATMULS[target]:
                if i < len(args) and _f32(args[i]):
                    args[i] = round_tf32(args[i])
        elif self.mode == Explanation.REDUCTION_ORDER:
            args = _reordered(target, list(args)) or args
        return target(*args, **kwargs)


def emulate(gm, inputs: tuple, modes, device: str = "cpu") -> dict:
    """Each hypothesis's outputs of the variant on ``inputs`` (flattened like a backend's, in the dtypes
    eager gives), None for one eager cannot compute that way (an op with no bfloat16 kernel, say)."""
    with torch.no_grad():
        plain = tree_leaves(Evaluator(gm, device).run(*inputs))
    out = {}
    for mode in modes:
        try:
            with torch.no_grad():
                value = tree_leaves(Emulator(gm, mode, device).run(*inputs))
            out[mode] = [t.detach().to("cpu", p.dtype) if isinstance(t, torch.Tensor) and isinstance(p, torch.Tensor)
                         else t for t, p in zip(value, plain)]
        except Exception:  # noqa: BLE001 - a hypothesis eager cannot test explains nothing
            out[mode] = None
    return out
