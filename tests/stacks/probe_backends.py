"""Test-only stacks whose flaws only the layout and relation probes show, loaded by module:Class.

- ``IgnoresStridesAny``: reads every non-contiguous input as if it were dense row-major (a kernel
  that takes the data pointer and assumes contiguity); it takes any strides, so it gets every layout.
- ``ShortCopyCompiled``: a stack that compiles again for new strides, as Inductor does
  (``any_strides = False``: at most one layout probe, on a convolution or matmul), whose copy of a
  non-contiguous input into dense order is one element short (its last element reads 0). Its
  answers differ from ``IgnoresStridesAny``'s, so the two are not taken for a consensus against eager.
- ``NearTiesDivide``: ``floor_divide`` rounds the quotient to bfloat16 before its floor, so operands
  one ulp apart divide to exactly 1 (a near tie is a tie): right on exact ties (the ties probe) and on
  operands far apart, off by one where ``a / b`` is just below an integer.
- ``NarrowLayerNorm``: layer_norm's statistics over the first 1024 elements of a row only: found
  only where a seed is rebuilt wider (the width axis).
- ``GreaterAsAtLeast``: ``a > b`` computed as ``a >= b``: wrong only where two inputs are equal,
  which independently drawn inputs never are (one flipped bool is a divergence: integers and bools
  are exact).
"""
from __future__ import annotations

import torch

from gapfuzz.workers.run.registry import Backend

from .numeric_backends import _retargeted
from .repro_backends import read_as_dense

aten = torch.ops.aten


class IgnoresStridesAny(Backend):
    name = "strides-any"

    def prepare(self, gm, example_inputs, device):
        def run(*inputs):
            return gm(*(read_as_dense(t) for t in inputs))
        return run


def _short_copy(t):
    if not isinstance(t, torch.Tensor) or t.is_contiguous() or not t.numel():
        return t
    dense = t.contiguous()
    dense.view(-1)[-1] = 0
    return dense


class ShortCopyCompiled(Backend):
    name = "strides-compiled"
    any_strides = False

    def prepare(self, gm, example_inputs, device):
        def run(*inputs):
            return gm(*(_short_copy(t) for t in inputs))
        return run


def _floor_divide_bf16(a, b):
    if not (isinstance(a, torch.Tensor) and a.is_floating_point()):
        return aten.floor_divide.default(a, b)
    return torch.floor(aten.div.Tensor(a, b).to(torch.bfloat16)).to(a.dtype)


class NearTiesDivide(Backend):
    name = "near-ties"

    def prepare(self, gm, example_inputs, device):
        return _retargeted(gm, (aten.floor_divide.default,), _floor_divide_bf16)


class GreaterAsAtLeast(Backend):
    name = "gt-as-ge"

    def prepare(self, gm, example_inputs, device):
        return _retargeted(gm, (aten.gt.Tensor,), aten.ge.Tensor)


def _layer_norm_first_1024(x, shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    """layer_norm whose statistics read at most the first 1024 elements of a row (a kernel whose
    reduction stops at one block): right on every row up to 1024 wide."""
    if x.shape[-1] <= 1024 or len(shape) != 1:
        return aten.layer_norm.default(x, shape, weight, bias, eps)
    head = x[..., :1024]
    mean, var = head.mean(-1, keepdim=True), head.var(-1, unbiased=False, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps)
    return y * weight + bias if weight is not None else y


class NarrowLayerNorm(Backend):
    name = "narrow-layer-norm"

    def prepare(self, gm, example_inputs, device):
        return _retargeted(gm, (aten.layer_norm.default,), _layer_norm_first_1024)
