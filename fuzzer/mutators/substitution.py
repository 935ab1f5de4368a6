"""Compute the same math another way: fused ops spelled out in the ops they stand for.

Each pass keeps the meaning in exact arithmetic, so the seed's output stays an oracle
(within rounding); the backend now compiles a different op mix for the same function.
"""
from __future__ import annotations

import math
import operator

import torch
import torch.fx as fx

from gapfuzz.fuzzer.mutators import register_mutator
from gapfuzz.fuzzer.mutators.base import Mutator, Rewrite, aten, call_nodes, dtype_of, pick, same_layout, shape_of


class _Substitution(Mutator):
    """Replace one node matched by ``matches`` with the subgraph ``expand`` builds before it."""

    family = "substitution"
    preserves_semantics = True
    targets: tuple = ()

    def matches(self, n: fx.Node) -> bool:
        return shape_of(n) is not None

    def propose(self, variant, rng):
        site = pick(rng, [n for n in call_nodes(variant) if n.target in self.targets and self.matches(n)])
        return None if site is None else {"node": site.name}

    def apply(self, variant, params):
        rw = Rewrite(variant)
        n = rw.node(params["node"])
        with rw.graph.inserting_before(n):
            new = same_layout(rw, self.expand(rw, n), n)
        n.replace_all_uses_with(new)
        return rw.finish()

    def expand(self, rw: Rewrite, n: fx.Node) -> fx.Node:
        raise NotImplementedError


def _arg(n: fx.Node, i: int, name: str, default=None):
    return n.args[i] if len(n.args) > i else n.kwargs.get(name, default)


@register_mutator
class LinearAsMatmul(_Substitution):
    """linear(x, W, b) as matmul(x, W^T) + b."""

    name = "linear_as_matmul"
    targets = (aten.linear.default,)

    def expand(self, rw, n):
        x, w, b = n.args[0], n.args[1], _arg(n, 2, "bias")
        out = rw.call(aten.matmul.default, x, rw.call(aten.t.default, w))
        return rw.call(aten.add.Tensor, out, b) if b is not None else out


@register_mutator
class ConvBiasSplit(_Substitution):
    """conv(x, W, b) as conv(x, W) + b broadcast over the spatial dims."""

    name = "conv_bias_split"
    targets = (aten.conv1d.default, aten.conv2d.default, aten.conv3d.default)

    def matches(self, n):
        return _arg(n, 2, "bias") is not None and shape_of(n) is not None

    def expand(self, rw, n):
        args = list(n.args)
        bias = args[2]
        args[2] = None
        conv = rw.graph.create_node("call_function", n.target, tuple(args), dict(n.kwargs))
        view = [1, -1] + [1] * (len(shape_of(n)) - 2)
        return rw.call(aten.add.Tensor, conv, rw.call(aten.view.default, bias, view))


@register_mutator
class SoftmaxDecompose(_Substitution):
    """softmax(x) as exp(x - max) / sum(exp(x - max)); log_softmax likewise."""

    name = "softmax_decompose"
    targets = (aten.softmax.int, aten._softmax.default, aten.log_softmax.int, aten._log_softmax.default)

    def matches(self, n):
        return shape_of(n) is not None and _arg(n, 2, "half_to_float", False) is False and \
            (len(n.args) < 3 or n.args[2] in (None, False))

    def expand(self, rw, n):
        x, dim = n.args[0], n.args[1]
        shifted = rw.call(aten.sub.Tensor, x, rw.call(aten.amax.default, x, [dim], True))
        e = rw.call(aten.exp.default, shifted)
        total = rw.call(aten.sum.dim_IntList, e, [dim], True)
        if n.target in (aten.log_softmax.int, aten._log_softmax.default):
            return rw.call(aten.sub.Tensor, shifted, rw.call(aten.log.default, total))
        return rw.call(aten.div.Tensor, e, total)


@register_mutator
class LayerNormDecompose(_Substitution):
    """layer_norm as (x - mean) * rsqrt(var + eps) * w + b over the normalised dims."""

    name = "layer_norm_decompose"
    targets = (aten.layer_norm.default,)

    def expand(self, rw, n):
        x, shape = n.args[0], n.args[1]
        w, b, eps = _arg(n, 2, "weight"), _arg(n, 3, "bias"), _arg(n, 4, "eps", 1e-5)
        dims = list(range(-len(shape), 0))
        mean = rw.call(aten.mean.dim, x, dims, True)
        var = rw.call(aten.var.correction, x, dims, correction=0, keepdim=True)
        y = rw.call(aten.mul.Tensor, rw.call(aten.sub.Tensor, x, mean),
                    rw.call(aten.rsqrt.default, rw.call(aten.add.Tensor, var, eps)))
        if w is not None:
            y = rw.call(aten.mul.Tensor, y, w)
        return rw.call(aten.add.Tensor, y, b) if b is not None else y


@register_mutator
class BatchNormDecompose(_Substitution):
    """Inference batch norm as (x - mean) * rsqrt(var + eps) * w + b with per-channel views."""

    name = "batch_norm_decompose"
    targets = (operator.getitem,)  # the norm returns (out, mean, rstd); its users read item 0

    def matches(self, n):
        src = n.args[0]
        return (shape_of(n) is not None and n.args[1] == 0 and isinstance(src, fx.Node)
                and src.target is aten._native_batch_norm_legit_no_training.default)

    def expand(self, rw, n):
        bn = n.args[0]
        x, w, b, mean, var, eps = bn.args[0], bn.args[1], bn.args[2], bn.args[3], bn.args[4], _arg(bn, 6, "eps", 1e-5)
        view = [1, -1] + [1] * (len(shape_of(n)) - 2)

        def v(t):
            return rw.call(aten.view.default, t, view)

        y = rw.call(aten.mul.Tensor, rw.call(aten.sub.Tensor, x, v(mean)),
                    v(rw.call(aten.rsqrt.default, rw.call(aten.add.Tensor, var, eps))))
        if w is not None:
            y = rw.call(aten.mul.Tensor, y, v(w))
        return rw.call(aten.add.Tensor, y, v(b)) if b is not None else y


@register_mutator
class ActivationDecompose(_Substitution):
    """gelu, silu, hardswish, hardsigmoid and mish spelled out in elementwise ops."""

    name = "activation_decompose"
    targets = (aten.gelu.default, aten.silu.default, aten.hardswish.default, aten.hardsigmoid.default,
               aten.mish.default)

    def expand(self, rw, n):
        x, c = n.args[0], rw.call
        if n.target is aten.gelu.default:
            if _arg(n, 1, "approximate", "none") == "tanh":
                inner = c(aten.mul.Tensor, c(aten.add.Tensor, x, c(aten.mul.Tensor, c(aten.pow.Tensor_Scalar, x, 3),
                                                                   0.044715)), math.sqrt(2 / math.pi))
                return c(aten.mul.Tensor, c(aten.mul.Tensor, x, 0.5),
                         c(aten.add.Tensor, c(aten.tanh.default, inner), 1))
            erf = c(aten.erf.default, c(aten.mul.Tensor, x, 1 / math.sqrt(2)))
            return c(aten.mul.Tensor, c(aten.mul.Tensor, x, 0.5), c(aten.add.Tensor, erf, 1))
        if n.target is aten.silu.default:
            return c(aten.mul.Tensor, x, c(aten.sigmoid.default, x))
        if n.target is aten.mish.default:
            return c(aten.mul.Tensor, x, c(aten.tanh.default, c(aten.softplus.default, x)))
        gate = c(aten.div.Tensor, c(aten.clamp.default, c(aten.add.Tensor, x, 3), 0, 6), 6)
        return gate if n.target is aten.hardsigmoid.default else c(aten.mul.Tensor, x, gate)


@register_mutator
class AttentionDecompose(_Substitution):
    """scaled_dot_product_attention as softmax(q k^T * scale + mask) v."""

    name = "attention_decompose"
    targets = (aten.scaled_dot_product_attention.default,)

    def matches(self, n):
        return (shape_of(n) is not None and not _arg(n, 4, "dropout_p", 0.0) and not n.kwargs.get("enable_gqa")
                and shape_of(n.args[0])[-3:-2] == shape_of(n.args[1])[-3:-2])

    def expand(self, rw, n):
        q, k, v = n.args[:3]
        mask, causal, scale = _arg(n, 3, "attn_mask"), _arg(n, 5, "is_causal", False), _arg(n, 6, "scale")
        scale = scale if scale is not None else 1 / math.sqrt(shape_of(q)[-1])
        c = rw.call
        scores = c(aten.mul.Tensor, c(aten.matmul.default, q, c(aten.transpose.int, k, -2, -1)), scale)
        if causal:
            lq, lk = shape_of(q)[-2], shape_of(k)[-2]
            keep = c(aten.tril.default, c(aten.ones.default, [lq, lk], dtype=torch.bool))
            scores = c(aten.masked_fill.Scalar, scores, c(aten.logical_not.default, keep), float("-inf"))
        if mask is not None:
            scores = (c(aten.masked_fill.Scalar, scores, c(aten.logical_not.default, mask), float("-inf"))
                      if dtype_of(mask) == torch.bool else c(aten.add.Tensor, scores, mask))
        return c(aten.matmul.default, c(aten.softmax.int, scores, -1), v)
