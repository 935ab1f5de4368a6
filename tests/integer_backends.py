"""A test-only stack with a fault only a chain of two operators on a narrow integer type reaches, loaded
by ``tests.integer_backends:NarrowPromotion``: like Inductor's C++ code generation, whose ``abs`` of a
``short`` is an ``int``, it fails to compile a reduction (amax, amin, argmax, argmin, max, min) of an
int8 or int16 value that an elementwise op (abs, neg, a bitwise op, a shift, a clamp) produced.
A bare reduction of an input compiles. Option ``faults: false`` is the same stack without the fault."""
from __future__ import annotations

import torch
from torch.fx.passes.shape_prop import ShapeProp

from gapfuzz.workers.run.registry import Backend

aten = torch.ops.aten
REDUCTIONS = {"amax", "amin", "argmax", "argmin", "max", "min"}
ELEMENTWISE = {"abs", "neg", "bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
               "bitwise_right_shift", "clamp", "clamp_min", "clamp_max", "sign", "mul", "add"}
NARROW = (torch.int8, torch.int16)


def _name(n) -> str:
    return getattr(n.target, "_opname", "") if n.op == "call_function" else ""


def narrow_chains(gm: torch.fx.GraphModule, example_inputs) -> list[str]:
    """The ``elementwise -> reduction`` pairs on int8 or int16 values in ``gm``."""
    ShapeProp(gm).propagate(*example_inputs)
    found = []
    for n in gm.graph.nodes:
        source = n.args[0] if n.args else None
        if _name(n) in REDUCTIONS and isinstance(source, torch.fx.Node) and _name(source) in ELEMENTWISE:
            tm = source.meta.get("tensor_meta")
            if getattr(tm, "dtype", None) in NARROW:
                found.append(f"{_name(source)} -> {_name(n)} ({str(tm.dtype).removeprefix('torch.')})")
    return found


class NarrowPromotion(Backend):
    name = "narrow-promotion"

    def prepare(self, gm, example_inputs, device):
        chains = narrow_chains(gm, example_inputs) if self.options.get("faults", True) else []
        if chains:
            raise RuntimeError(f"C++ compile error: invalid conversion from 'int' to 'short' in the reduction of "
                               f"{chains[0]}")
        return gm


def _reduced_in_int8(op):
    def run(x, *args, **kwargs):
        out = op(x.to(torch.int8), *args, **kwargs)  # past 127 the values wrap: wrong there only
        return tuple(o.to(x.dtype) if o.dtype == torch.int8 else o for o in out) if isinstance(out, tuple) else \
            out.to(x.dtype) if out.dtype == torch.int8 else out
    return run


class NarrowChainValues(Backend):
    """A reduction (amax, amin, max, min) of an int16 value an elementwise op produced is computed in int8:
    right at small values (an operator sample's), wrong where the chain's values pass 127. Only a value
    probe of a mutated variant reaches it: the seed itself has no chain, and index probes keep its values."""

    name = "narrow-chain-values"

    def prepare(self, gm, example_inputs, device):
        ShapeProp(gm).propagate(*example_inputs)
        graph = torch.fx.Graph()
        graph.output(graph.graph_copy(gm.graph, {}))
        for n in graph.nodes:
            source = n.args[0] if n.args else None
            tm = getattr(source, "meta", {}).get("tensor_meta")
            if _name(n) in {"amax", "amin", "max", "min"} and isinstance(source, torch.fx.Node) and \
                    _name(source) in ELEMENTWISE and getattr(tm, "dtype", None) == torch.int16:
                n.target = _reduced_in_int8(n.target)
        return torch.fx.GraphModule(gm, graph)
