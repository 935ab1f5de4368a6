"""Structural mutations in the spirit of LEMON's layer add/copy/remove, at ATen level."""
from __future__ import annotations

import torch.fx as fx

from gapfuzz.fuzzer.mutators import register_mutator
from gapfuzz.fuzzer.mutators.base import Mutator, Rejected, Rewrite, aten, call_nodes, dtype_of, pick, shape_of


def _same_shape_pairs(variant, reach: int = 1) -> list[tuple[fx.Node, fx.Node]]:
    """(ancestor, node) pairs along first-argument chains (up to ``reach`` steps) with equal shape
    and dtype: the places where a node can be removed, repeated or bypassed."""
    pairs = []
    for n in call_nodes(variant):
        shape = shape_of(n)
        if shape is None or not dtype_of(n).is_floating_point:
            continue
        x = n
        for _ in range(reach):
            x = x.args[0] if x.args and isinstance(x.args[0], fx.Node) else None
            if x is None or x.op == "get_attr":
                break
            if shape_of(x) == shape and dtype_of(x) == dtype_of(n):
                pairs.append((x, n))
                break
    return pairs


@register_mutator
class RemoveNode(Mutator):
    """Remove a node whose input and output shapes match (its users read its input instead)."""

    name = "remove_node"
    family = "structure"

    def sites(self, variant):
        return [n for _, n in _same_shape_pairs(variant)]

    def apply(self, variant, params):
        rw = Rewrite(variant)
        n = rw.node(params["node"])
        n.replace_all_uses_with(n.args[0])
        return rw.finish()


@register_mutator
class DuplicateNode(Mutator):
    """Apply a shape-preserving node twice: f(x) becomes f(f(x)) (LEMON's layer copy)."""

    name = "duplicate_node"
    family = "structure"

    sites = RemoveNode.sites

    def build(self, rw, n, params):
        return rw.graph.create_node("call_function", n.target, (n, *n.args[1:]), dict(n.kwargs))


@register_mutator
class DuplicateBlock(Mutator):
    """Repeat a whole block whose output has its input's shape: y = B(x) becomes B(B(x))."""

    name = "duplicate_block"
    family = "structure"

    def propose(self, variant, rng):
        pairs = [(x, y) for x, y in _same_shape_pairs(variant, reach=12) if len(_block(x, y)) >= 2]
        pair = pick(rng, pairs)
        return None if pair is None else {"input": pair[0].name, "output": pair[1].name}

    def apply(self, variant, params):
        rw = Rewrite(variant)
        x, y = rw.node(params["input"]), rw.node(params["output"])
        block = _block(x, y)
        if not block:
            raise Rejected("no block between the nodes")
        env = {x: y}
        anchor = y
        for n in block:
            with rw.after(anchor):
                anchor = rw.graph.node_copy(n, lambda a: env.get(a, a))
            env[n] = anchor
        y.replace_all_uses_with(env[y], delete_user_cb=lambda u: u not in env.values())
        return rw.finish()


def _block(x: fx.Node, y: fx.Node) -> list[fx.Node]:
    """Nodes on paths from x to y (y included), in graph order."""
    up, stack = set(), [y]
    while stack:
        n = stack.pop()
        if n in up or n is x:
            continue
        up.add(n)
        stack.extend(a for a in n.all_input_nodes if a.op == "call_function")
    down, stack = set(), list(x.users)
    while stack:
        n = stack.pop()
        if n not in down and n.op == "call_function":
            down.add(n)
            stack.extend(n.users)
    inside = up & down
    order = {n: i for i, n in enumerate(x.graph.nodes)}
    return sorted(inside, key=order.get) if y in inside else []


@register_mutator
class AddResidual(Mutator):
    """Add a skip connection y + x around a stretch of nodes whose ends have the same shape."""

    name = "add_residual"
    family = "structure"

    def propose(self, variant, rng):
        pair = pick(rng, _same_shape_pairs(variant, reach=8))
        return None if pair is None else {"input": pair[0].name, "output": pair[1].name}

    def apply(self, variant, params):
        rw = Rewrite(variant)
        x = rw.node(params["input"])
        rw.splice_after(rw.node(params["output"]), lambda y: rw.call(aten.add.Tensor, y, x))
        return rw.finish()


_COMMUTATIVE = {aten.add.Tensor, aten.mul.Tensor, aten.maximum.default, aten.minimum.default, aten.eq.Tensor,
                aten.ne.Tensor, aten.logical_and.default, aten.logical_or.default, aten.bitwise_and.Tensor,
                aten.bitwise_or.Tensor, aten.bitwise_xor.Tensor}


@register_mutator
class SwapCommutative(Mutator):
    """Swap the operands of a commutative op (a + b -> b + a): IEEE-exact, but kernels differ."""

    name = "swap_commutative"
    family = "structure"
    preserves_semantics = True

    def sites(self, variant):
        return [n for n in call_nodes(variant) if n.target in _COMMUTATIVE and len(n.args) == 2
                and all(isinstance(a, fx.Node) for a in n.args) and not n.kwargs]

    def apply(self, variant, params):
        rw = Rewrite(variant)
        n = rw.node(params["node"])
        n.args = (n.args[1], n.args[0])
        return rw.finish()
