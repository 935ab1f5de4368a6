"""Operator injection: splice an operator from a pool in wherever its shape constraints fit.

Every pool entry maps a floating tensor to one of the same shape, so it can follow any such
node; the pool widens the operators each backend is asked to compile. Coverage guidance weights
the entries by how little of each op a campaign has covered (``Mutator.choices``).
"""
from __future__ import annotations

import math
import operator
import random
from dataclasses import dataclass
from typing import Callable

import torch
import torch.fx as fx

from gapfuzz.fuzzer.mutators import register_mutator
from gapfuzz.fuzzer.mutators.base import Mutator, Rewrite, aten, dtype_of, float_nodes, pick, same_layout, shape_of


@dataclass
class Entry:
    fits: Callable[[tuple], bool]
    build: Callable  # (rw, x, params) -> node
    needs_dim: bool = True


def _w(rw: Rewrite, shape: tuple, seed: int, scale: float) -> fx.Node:
    g = torch.Generator().manual_seed(seed)
    return rw.constant(torch.randn(shape, generator=g) * scale, "w")


def _keep(op, reduction):
    """x -> op(x, reduction(x, dim, keepdim=True)): a reduction broadcast back to x's shape."""
    return lambda rw, x, p: rw.call(op, x, rw.call(reduction, x, [p["dim"]], True))


def _first(rw, n):
    return rw.graph.call_function(operator.getitem, (n, 0))


def _rank(k):
    return lambda s: len(s) >= k


POOL: dict[str, Entry] = {
    "cumsum": Entry(_rank(1), lambda rw, x, p: rw.call(aten.cumsum.default, x, p["dim"])),
    "flip": Entry(_rank(1), lambda rw, x, p: rw.call(aten.flip.default, x, [p["dim"]])),
    "roll": Entry(_rank(1), lambda rw, x, p: rw.call(aten.roll.default, x, [1], [p["dim"]])),
    "softmax": Entry(_rank(1), lambda rw, x, p: rw.call(aten.softmax.int, x, p["dim"])),
    "log_softmax": Entry(_rank(1), lambda rw, x, p: rw.call(aten.log_softmax.int, x, p["dim"])),
    "sort_values": Entry(_rank(1), lambda rw, x, p: _first(rw, rw.call(aten.sort.default, x, p["dim"]))),
    "cummax_values": Entry(_rank(1), lambda rw, x, p: _first(rw, rw.call(aten.cummax.default, x, p["dim"]))),
    "sub_mean": Entry(_rank(1), _keep(aten.sub.Tensor, aten.mean.dim)),
    "sub_amax": Entry(_rank(1), _keep(aten.sub.Tensor, aten.amax.default)),
    "sub_logsumexp": Entry(_rank(1), _keep(aten.sub.Tensor, aten.logsumexp.default)),
    "div_l2norm": Entry(_rank(1), lambda rw, x, p: rw.call(aten.div.Tensor, x, rw.call(
        aten.add.Tensor, rw.call(aten.linalg_vector_norm.default, x, 2, [p["dim"]], True), 1e-6))),
    "mul_rsqrt_var": Entry(_rank(1), lambda rw, x, p: rw.call(aten.mul.Tensor, x, rw.call(aten.rsqrt.default, rw.call(
        aten.add.Tensor, rw.call(aten.var.correction, x, [p["dim"]], correction=1, keepdim=True), 1e-5)))),
    "layer_norm": Entry(_rank(1), lambda rw, x, p: rw.call(aten.layer_norm.default, x, [shape_of(x)[-1]]), False),
    "clamp": Entry(_rank(0), lambda rw, x, p: rw.call(aten.clamp.default, x, -1.0, 1.0), False),
    "hardtanh": Entry(_rank(0), lambda rw, x, p: rw.call(aten.hardtanh.default, x), False),
    "nan_to_num": Entry(_rank(0), lambda rw, x, p: rw.call(aten.nan_to_num.default, x), False),
    "leaky_where": Entry(_rank(0), lambda rw, x, p: rw.call(aten.where.self, rw.call(aten.gt.Scalar, x, 0.0), x,
                                                            rw.call(aten.mul.Tensor, x, 0.1)), False),
    "masked_fill": Entry(_rank(0), lambda rw, x, p: rw.call(aten.masked_fill.Scalar, x,
                                                            rw.call(aten.lt.Scalar, x, 0.0), 0.0), False),
    "addcmul": Entry(_rank(0), lambda rw, x, p: rw.call(aten.addcmul.default, x, x, x, value=0.1), False),
    "erfinv_tanh": Entry(_rank(0), lambda rw, x, p: rw.call(aten.erfinv.default, rw.call(
        aten.mul.Tensor, rw.call(aten.tanh.default, x), 0.99)), False),
    "asin_tanh": Entry(_rank(0), lambda rw, x, p: rw.call(aten.asin.default, rw.call(aten.tanh.default, x)), False),
    "tril": Entry(_rank(2), lambda rw, x, p: rw.call(aten.tril.default, x), False),
    "matmul_square": Entry(lambda s: len(s) >= 2 and s[-1] <= 2048, lambda rw, x, p: rw.call(
        aten.matmul.default, x, _w(rw, (shape_of(x)[-1],) * 2, p["seed"], 1 / math.sqrt(shape_of(x)[-1]))), False),
    "linear_square": Entry(lambda s: len(s) >= 1 and s[-1] <= 2048, lambda rw, x, p: rw.call(
        aten.linear.default, x, _w(rw, (shape_of(x)[-1],) * 2, p["seed"], 1 / math.sqrt(shape_of(x)[-1]))), False),
    "conv1x1": Entry(lambda s: len(s) == 4 and s[1] <= 1024, lambda rw, x, p: rw.call(
        aten.conv2d.default, x, _w(rw, (shape_of(x)[1], shape_of(x)[1], 1, 1), p["seed"], shape_of(x)[1] ** -0.5)),
        False),
    "depthwise3x3": Entry(lambda s: len(s) == 4, lambda rw, x, p: rw.call(
        aten.conv2d.default, x, _w(rw, (shape_of(x)[1], 1, 3, 3), p["seed"], 1 / 3), None, [1, 1], [1, 1], [1, 1],
        shape_of(x)[1]), False),
    "avg_pool3x3": Entry(lambda s: len(s) == 4, lambda rw, x, p: rw.call(
        aten.avg_pool2d.default, x, [3, 3], [1, 1], [1, 1]), False),
    "max_pool3x3": Entry(lambda s: len(s) == 4, lambda rw, x, p: rw.call(
        aten.max_pool2d.default, x, [3, 3], [1, 1], [1, 1]), False),
    "group_norm": Entry(lambda s: len(s) == 4 and s[1] % 2 == 0, lambda rw, x, p: rw.call(
        aten.group_norm.default, x, 2), False),
    "pixel_shuffle_roundtrip": Entry(lambda s: len(s) == 4 and s[2] % 2 == 0 and s[3] % 2 == 0,
                                     lambda rw, x, p: rw.call(aten.pixel_shuffle.default,
                                                              rw.call(aten.pixel_unshuffle.default, x, 2), 2), False),
    "upsample_avgpool": Entry(lambda s: len(s) == 4, lambda rw, x, p: rw.call(aten.avg_pool2d.default, rw.call(
        aten.upsample_nearest2d.vec, x, [2 * shape_of(x)[2], 2 * shape_of(x)[3]], None), [2, 2], [2, 2]), False),
    "index_select_perm": Entry(_rank(1), lambda rw, x, p: rw.call(aten.index_select.default, x, p["dim"], rw.constant(
        torch.randperm(shape_of(x)[p["dim"]], generator=torch.Generator().manual_seed(p["seed"])), "idx"))),
}
BINARY = {"add": aten.add.Tensor, "sub": aten.sub.Tensor, "mul": aten.mul.Tensor, "div": aten.div.Tensor,
          "maximum": aten.maximum.default, "minimum": aten.minimum.default, "atan2": aten.atan2.default,
          "fmod": aten.fmod.Tensor, "remainder": aten.remainder.Tensor, "copysign": aten.copysign.Tensor,
          "hypot": aten.hypot.default, "xlogy": aten.xlogy.Tensor}


@register_mutator
class InjectOp(Mutator):
    """Insert an operator from the injection pool (cumsum, softmax, conv1x1, sort, ...) after a node."""

    name = "inject_op"
    family = "injection"
    choice_param = "op"

    @classmethod
    def choices(cls) -> list[str]:
        return sorted(POOL)

    def sites(self, variant):
        return [n for n in float_nodes(variant) if shape_of(n) is not None]

    def draw(self, site, rng: random.Random):
        shape = shape_of(site)
        names = sorted(k for k, e in POOL.items() if e.fits(shape) and (not e.needs_dim or len(shape) >= 1))
        if not names:
            return None
        op = self.choose(rng, names)
        params = {"op": op, "seed": rng.randrange(2**31)}
        if POOL[op].needs_dim:
            params["dim"] = rng.randrange(len(shape))
        return params

    def build(self, rw, x, params):
        return same_layout(rw, POOL[params["op"]].build(rw, x, params), x)


@register_mutator
class InjectBinary(Mutator):
    """Combine a node with an earlier node of the same shape by a binary op (atan2, fmod, hypot, ...)."""

    name = "inject_binary"
    family = "injection"

    def propose(self, variant, rng):
        nodes = float_nodes(variant)
        by_key: dict = {}
        for n in nodes:
            by_key.setdefault((shape_of(n), dtype_of(n)), []).append(n)
        pairs = [(a, b) for group in by_key.values() for i, b in enumerate(group) for a in group[max(0, i - 8):i]]
        pair = pick(rng, pairs)
        return None if pair is None else {"node": pair[1].name, "other": pair[0].name, "op": rng.choice(sorted(BINARY))}

    def build(self, rw, x, params):
        return rw.call(BINARY[params["op"]], x, rw.node(params["other"]))
