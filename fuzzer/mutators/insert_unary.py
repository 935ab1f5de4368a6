"""Insert an elementwise unary op after a floating tensor: widens op coverage per site."""
from __future__ import annotations

from gapfuzz.fuzzer.mutators import register_mutator
from gapfuzz.fuzzer.mutators.base import Mutator, aten, copy_graph, finish, float_nodes, insert_after, node, pick

UNARY = {
    "abs": aten.abs.default, "neg": aten.neg.default, "sin": aten.sin.default, "cos": aten.cos.default,
    "tanh": aten.tanh.default, "sigmoid": aten.sigmoid.default, "relu": aten.relu.default,
    "erf": aten.erf.default, "atan": aten.atan.default, "square": aten.square.default,
    "exp": aten.exp.default, "expm1": aten.expm1.default, "floor": aten.floor.default,
    "round": aten.round.default, "sign": aten.sign.default, "reciprocal": aten.reciprocal.default,
    "rsqrt": aten.rsqrt.default, "log1p": aten.log1p.default, "trunc": aten.trunc.default,
    "sinh": aten.sinh.default, "asinh": aten.asinh.default,
}


@register_mutator
class InsertUnary(Mutator):
    """Insert an elementwise unary op (sin, exp, floor, rsqrt, ...) after a floating node."""

    name = "insert_unary"
    family = "structure"

    def sites(self, variant):
        return float_nodes(variant)

    def draw(self, site, rng):
        return {"op": pick(rng, sorted(UNARY))}

    def apply(self, variant, params):
        graph, nodes = copy_graph(variant.gm)
        anchor = node(nodes, params["node"])
        insert_after(anchor, UNARY[params["op"]], (anchor,))
        return finish(variant, graph)
