"""A test-only stack with a fault only a chain of two operators on a narrow integer type reaches, loaded
by ``tests.stacks.integer_backends:NarrowPromotion``: like Inductor's C++ code generation, whose ``abs`` of a
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



# elementwise ops that made an input an index before integer roles took pointwise operators as numbers
SCALAR_OPS = {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "clamp_min",
              "clamp_max", "remainder", "div"}


def _through_int8(op):
    def run(x, *args, **kwargs):
        return op(x.to(torch.int8).to(x.dtype), *args, **kwargs)  # an input past 127 wraps: wrong there only
    return run


class NarrowChainValues(Backend):
    """An elementwise op with a scalar (a bitwise op, a shift, clamp_min, remainder) that reads an int16 graph
    input and feeds a reduction (amax, amin, max, min) reads that input as int8: right at small values (an
    operator sample's), wrong where the input passes 127. Only an integer value probe of a mutated variant
    reaches it: the seed itself has no chain, and the example, index and relation probes keep its values."""

    name = "narrow-chain-values"

    def prepare(self, gm, example_inputs, device):
        ShapeProp(gm).propagate(*example_inputs)
        graph = torch.fx.Graph()
        graph.output(graph.graph_copy(gm.graph, {}))
        for n in graph.nodes:
            source = n.args[0] if n.args else None
            if _name(n) not in {"amax", "amin", "max", "min"} or not isinstance(source, torch.fx.Node) or \
                    _name(source) not in SCALAR_OPS or not source.args:
                continue
            read = source.args[0]
            tm = getattr(read, "meta", {}).get("tensor_meta")
            if getattr(read, "op", None) == "placeholder" and getattr(tm, "dtype", None) == torch.int16:
                source.target = _through_int8(source.target)
        return torch.fx.GraphModule(gm, graph)
