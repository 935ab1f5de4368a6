"""Replace an activation with another one (LEMON's activation replace, at ATen level)."""
from __future__ import annotations

from gapfuzz.fuzzer.mutators import register_mutator
from gapfuzz.fuzzer.mutators.base import Mutator, aten, copy_graph, finish, insert_after, node, pick

# name -> (op, extra positional args, extra kwargs); every entry maps a tensor to a same-shape tensor
ACTIVATIONS = {
    "relu": (aten.relu.default, (), {}),
    "gelu": (aten.gelu.default, (), {}),
    "gelu_tanh": (aten.gelu.default, (), {"approximate": "tanh"}),
    "silu": (aten.silu.default, (), {}),
    "sigmoid": (aten.sigmoid.default, (), {}),
    "tanh": (aten.tanh.default, (), {}),
    "hardswish": (aten.hardswish.default, (), {}),
    "hardsigmoid": (aten.hardsigmoid.default, (), {}),
    "mish": (aten.mish.default, (), {}),
    "elu": (aten.elu.default, (), {}),
    "selu": (aten.selu.default, (), {}),
    "leaky_relu": (aten.leaky_relu.default, (0.01,), {}),
    "softplus": (aten.softplus.default, (), {}),
    "relu6": (aten.hardtanh.default, (0.0, 6.0), {}),
}
_OPS = {spec[0] for spec in ACTIVATIONS.values()}


@register_mutator
class ReplaceActivation(Mutator):
    """Swap an activation function for another (relu -> gelu, silu -> hardswish, ...)."""

    name = "replace_activation"
    family = "structure"

    def sites(self, variant):
        return [n for n in variant.gm.graph.nodes if n.op == "call_function" and n.target in _OPS]

    def draw(self, site, rng):
        current = next((k for k, (op, a, kw) in ACTIVATIONS.items()
                        if op is site.target and tuple(site.args[1:]) == a and dict(site.kwargs) == kw), None)
        return {"to": pick(rng, sorted(set(ACTIVATIONS) - {current}))}

    def apply(self, variant, params):
        graph, nodes = copy_graph(variant.gm)
        old = node(nodes, params["node"])
        op, args, kwargs = ACTIVATIONS[params["to"]]
        new = insert_after(old, op, (old.args[0], *args), kwargs)
        new.meta = dict(old.meta)
        return finish(variant, graph)
