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

from workers.ir import Variant, flatten_outputs

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
    graph = variant.gm.graph
    tensors = variant.tensors()
    inputs = iter(variant.inputs)
    same_input = {}
    if parent is not None:
        p_inputs = dict(zip((n.name for n in parent.variant.gm.graph.nodes if n.op == "placeholder"),
                            parent.variant.inputs))
        p_tensors = parent.variant.tensors()
    env: dict[fx.Node, object] = {}
    values, signatures, clean = {}, {}, set()
    keep = True
    total = 0
    with torch.no_grad():
        for n in graph.nodes:
            sig = _signature(n)
            signatures[n.name] = sig
            if n.op == "placeholder":
                value = next(inputs)
                same_input[n.name] = parent is not None and p_inputs.get(n.name) is value
            reusable = (parent is not None and n.name in parent.values and parent.signatures.get(n.name) == sig
                        and all(a in clean for a in n.all_input_nodes)
                        and (n.op != "get_attr" or p_tensors.get(n.target) is tensors.get(n.target))
                        and (n.op != "placeholder" or same_input[n.name]))
            if n.op == "output":
                out = fx.map_arg(n.args[0], lambda a: env[a])
                break
            if reusable:
                value = parent.values[n.name]
                clean.add(n)
            elif n.op == "get_attr":
                value = tensors[n.target]
            elif n.op == "call_function":
                args, kwargs = fx.map_arg((n.args, n.kwargs), lambda a: env[a])
                value = n.target(*args, **kwargs)
            elif n.op != "placeholder":
                raise RuntimeError(f"unsupported node {n.format_node()}")
            env[n] = value
            if not (reusable and "tensor_meta" in n.meta):  # a copied node keeps its parent's, still true
                _record_meta(n, value)
            total += _tensor_bytes(value)
            keep = keep and total <= MAX_CACHE_BYTES
            if keep:
                values[n.name] = value
    return Evaluation(variant, values if keep else {}, signatures, flatten_outputs(out))
