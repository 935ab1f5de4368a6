"""Run a variant on the reference, reusing what its parent already computed.

A mutation touches a few nodes; every node upstream of them, with the same target,
arguments, weights and inputs as in the parent, has the parent's value. Only the rest is
executed, node by node, recording shape and dtype (ShapeProp's ``tensor_meta``) for the next
pass. Validation then costs a fraction of a forward pass instead of a whole one.
"""
from __future__ import annotations

import torch
import torch.fx as fx
from torch.fx.passes.shape_prop import _extract_tensor_metadata

from gapfuzz.core.ir import Variant, flatten_outputs
from gapfuzz.workers.judge.interpret import NOT_REUSED, Evaluator

MAX_CACHE_BYTES = 1 << 30  # keep at most this many bytes of intermediate values per evaluation


def _signature(n: fx.Node):
    return n.op, n.target, fx.map_arg((n.args, n.kwargs), lambda a: a.name)


class Evaluation:
    """The values of every node of one variant, as computed on the reference."""

    def __init__(self, variant: Variant, values: dict[str, object], signatures: dict, outputs: list):
        self.variant, self.values, self.signatures, self.outputs = variant, values, signatures, outputs


def _tensor_bytes(v) -> int:
    return v.numel() * v.element_size() if isinstance(v, torch.Tensor) else 0


def _record_meta(n: fx.Node, value) -> None:
    if isinstance(value, torch.Tensor):
        n.meta["tensor_meta"] = _extract_tensor_metadata(value)
    elif isinstance(value, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in value):
        n.meta["tensor_meta"] = type(value)(_extract_tensor_metadata(v) for v in value)
    else:
        n.meta.pop("tensor_meta", None)


def evaluate(variant: Variant, parent: Evaluation | None = None) -> Evaluation:
    """Run ``variant`` on eager, reusing ``parent``'s values for unchanged nodes; raises what it raises."""
    tensors = variant.tensors()
    same_input: dict[str, bool] = {}
    if parent is not None:
        p_inputs = dict(zip((n.name for n in parent.variant.gm.graph.nodes if n.op == "placeholder"),
                            parent.variant.inputs))
        p_tensors = parent.variant.tensors()
        inputs = iter(variant.inputs)
        for n in variant.gm.graph.nodes:
            if n.op == "placeholder":
                same_input[n.name] = p_inputs.get(n.name) is next(inputs)
    values, signatures, clean = {}, {}, set()
    kept = {"bytes": 0, "all": True}

    def reuse(n: fx.Node):
        sig = signatures[n.name] = _signature(n)
        if (parent is not None and n.name in parent.values and parent.signatures.get(n.name) == sig
                and all(a in clean for a in n.all_input_nodes)
                and (n.op != "get_attr" or p_tensors.get(n.target) is tensors.get(n.target))):
            clean.add(n)
            return parent.values[n.name]
        return NOT_REUSED

    def record(n: fx.Node, value, reused: bool) -> None:
        if n.op == "placeholder":
            signatures[n.name] = _signature(n)
            if parent is not None and n.name in parent.values and same_input[n.name]:
                clean.add(n)
                reused = True
        if not (reused and "tensor_meta" in n.meta):  # a copied node keeps its parent's, still true
            _record_meta(n, value)
        kept["bytes"] += _tensor_bytes(value)
        kept["all"] = kept["all"] and kept["bytes"] <= MAX_CACHE_BYTES
        if kept["all"]:
            values[n.name] = value

    with torch.no_grad():
        out = Evaluator(variant.gm, reuse=reuse, on_value=record).run(*variant.inputs)
    return Evaluation(variant, values if kept["all"] else {}, signatures, flatten_outputs(out))
