"""Semantics-preserving rewrites: identities a compiler must see through without changing results.

For these the seed's own output is a further oracle (a metamorphic check).
"""
from __future__ import annotations

import operator

import torch.fx as fx

from gapfuzz.fuzzer.mutators import register_mutator
from gapfuzz.fuzzer.mutators.base import Mutator, Rewrite, aten, call_nodes, float_nodes, pick, same_layout, shape_of


class _Identity(Mutator):
    """Splice ``wrap(x)``, equal to x, in after a floating node x."""

    family = "semantic"
    preserves_semantics = True
    min_rank = 0

    def sites(self, variant) -> list[fx.Node]:
        return [n for n in float_nodes(variant) if len(shape_of(n)) >= self.min_rank]

    def build(self, rw, x, params):
        return same_layout(rw, self.wrap(rw, x, params), x)

    def wrap(self, rw: Rewrite, x: fx.Node, params: dict) -> fx.Node:
        """Build the identity; return its result."""
        raise NotImplementedError


@register_mutator
class TransposePair(_Identity):
    """x -> transpose(transpose(x, a, b), a, b): a layout round trip."""

    name = "transpose_pair"
    min_rank = 2

    def draw(self, site, rng):
        a, b = sorted(rng.sample(range(len(shape_of(site))), 2))
        return {"dims": [a, b]}

    def wrap(self, rw, x, params):
        a, b = params["dims"]
        return rw.call(aten.transpose.int, rw.call(aten.transpose.int, x, a, b), a, b)


@register_mutator
class AddZero(_Identity):
    """x -> x + 0."""

    name = "add_zero"

    def wrap(self, rw, x, params):
        return rw.call(aten.add.Tensor, x, 0.0)


@register_mutator
class MulOne(_Identity):
    """x -> x * 1."""

    name = "mul_one"

    def wrap(self, rw, x, params):
        return rw.call(aten.mul.Tensor, x, 1.0)


@register_mutator
class SplitConcat(_Identity):
    """x -> cat(split(x, k, dim), dim): the pieces put back together."""

    name = "split_concat"
    min_rank = 1

    def sites(self, variant):
        return [n for n in super().sites(variant) if max(shape_of(n), default=0) >= 2]

    def draw(self, site, rng):
        dims = [d for d, s in enumerate(shape_of(site)) if s >= 2]
        dim = rng.choice(dims)
        return {"dim": dim, "size": rng.randrange(1, shape_of(site)[dim])}

    def wrap(self, rw, x, params):
        parts = rw.call(aten.split.Tensor, x, params["size"], params["dim"])
        count = -(-shape_of(x)[params["dim"]] // params["size"])
        pieces = [rw.graph.call_function(operator.getitem, (parts, i)) for i in range(count)]
        return rw.call(aten.cat.default, pieces, params["dim"])


@register_mutator
class ReshapeRoundtrip(_Identity):
    """x -> reshape(reshape(x, [-1]), shape(x)): flatten and restore."""

    name = "reshape_roundtrip"
    min_rank = 2

    def wrap(self, rw, x, params):
        return rw.call(aten.reshape.default, rw.call(aten.reshape.default, x, [-1]), list(shape_of(x)))


@register_mutator
class ReorderNodes(Mutator):
    """Move a node past an independent later one: the same dataflow in another order."""

    name = "reorder_nodes"
    family = "semantic"
    preserves_semantics = True

    def propose(self, variant, rng):
        nodes = call_nodes(variant)
        pos = {n: i for i, n in enumerate(nodes)}
        pairs = []
        for i, a in enumerate(nodes):
            first_use = min((pos.get(u, len(nodes)) for u in a.users), default=len(nodes))
            for b in nodes[i + 1:first_use]:
                if not _depends(b, a):
                    pairs.append((a, b))
                if len(pairs) > 4000:
                    break
        pair = pick(rng, pairs)
        return None if pair is None else {"node": pair[0].name, "after": pair[1].name}

    def apply(self, variant, params):
        rw = Rewrite(variant)
        a, b = rw.node(params["node"]), rw.node(params["after"])
        b.append(a)
        return rw.finish()


def _depends(b: fx.Node, a: fx.Node, limit: int = 64) -> bool:
    """Does b read a, directly or within ``limit`` steps back?"""
    stack, seen = list(b.all_input_nodes), set()
    while stack and len(seen) < limit:
        n = stack.pop()
        if n is a:
            return True
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    return bool(stack)  # undecided within the limit: treat as dependent
