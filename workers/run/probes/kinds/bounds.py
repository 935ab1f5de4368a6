"""Bounds probes: one index of an indexing operator's input out of range (-1, one past -size, equal to
the size, 2**31 - 1), where eager checks and raises. A compiled stack that returns a value
there has dropped eager's check (a ``missing-error`` finding); one that crashes the process, a failure.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from gapfuzz.workers.run.probes.base import ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS

BOUNDS = ("minus-one", "below", "size", "huge")
_DIM_INDEX = {"index_add", "index_copy", "index_fill", "index_select", "index_reduce", "gather", "scatter",
              "scatter_add", "scatter_reduce"}  # (self, dim, index, ...)


def _shape(arg, gm: fx.GraphModule, inputs: tuple):
    """The shape of a graph value: an input's own, else what the capture recorded."""
    if not isinstance(arg, fx.Node):
        return None
    if arg.op == "placeholder":
        places = [n for n in gm.graph.nodes if n.op == "placeholder"]
        t = inputs[places.index(arg)]
        return tuple(t.shape) if isinstance(t, torch.Tensor) else None
    meta = arg.meta.get("val", arg.meta.get("tensor_meta"))
    shape = getattr(meta, "shape", None)
    return None if shape is None else tuple(int(s) for s in shape)


def _at(shape, dim) -> int | None:
    if shape is None or not isinstance(dim, int):
        return None
    return 1 if not shape else int(shape[dim])


def indexed(node: fx.Node, gm: fx.GraphModule, inputs: tuple) -> list[tuple[fx.Node, int | None]]:
    """The (index, size of what it indexes) pairs an indexing call reads (size None: no upper bound)."""
    name, args = str(node.target).split(".")[1], node.args
    if name in _DIM_INDEX and len(args) >= 3:
        return [(args[2], _at(_shape(args[0], gm, inputs), args[1]))]
    if name == "take" and len(args) >= 2:
        shape = _shape(args[0], gm, inputs)
        return [(args[1], None if shape is None else int(torch.Size(shape).numel()))]
    if name == "take_along_dim" and len(args) >= 3:
        return [(args[1], _at(_shape(args[0], gm, inputs), args[2]))]
    if name == "embedding" and len(args) >= 2:
        return [(args[1], _at(_shape(args[0], gm, inputs), 0))]
    if name in ("index", "index_put", "_unsafe_index_put") and len(args) >= 2 and isinstance(args[1], (list, tuple)):
        shape = _shape(args[0], gm, inputs)
        return [(ix, _at(shape, k)) for k, ix in enumerate(args[1]) if ix is not None]
    if name == "one_hot" and args:
        classes = args[1] if len(args) > 1 else node.kwargs.get("num_classes", -1)
        return [(args[0], classes if isinstance(classes, int) and classes > 0 else None)]
    return []


@PROBE_KINDS.register
class Bounds(ProbeKind):
    """One index of an indexing operator's input out of range."""

    name = "bounds"
    order = 85
    needs = "index"
    params = {"bound": BOUNDS, "input": None, "size": None}
    shown = ("bound",)

    def propose(self, graph):
        places = [n for n in graph.gm.graph.nodes if n.op == "placeholder"]
        for node in graph.gm.graph.nodes:
            if node.op != "call_function" or not str(node.target).startswith("aten."):
                continue
            for index, size in indexed(node, graph.gm, graph.inputs):
                i = places.index(index) if index in places else None
                if i is None or graph.roles[i] != "index" or not graph.inputs[i].numel():
                    continue
                bounds = BOUNDS if size is not None else ("minus-one", "below")  # no upper bound to pass
                return [{"bound": b, "input": i, "size": size or 0} for b in bounds]
        return []

    def make(self, inputs, input_roles, params, g):
        i, size, out = params["input"], params["size"], list(inputs)
        t = inputs[i].detach().cpu()
        huge = min(torch.iinfo(t.dtype).max, 2 ** 31 - 1)  # past any buffer; times a stride, past 32-bit offsets
        value = {"minus-one": -1, "below": -size - 1, "size": size, "huge": huge}[params["bound"]]
        flat = t.clone().reshape(-1)
        flat[int(torch.randint(flat.numel(), (1,), generator=g))] = value
        out[i] = flat.reshape(t.shape).to(inputs[i].device)
        return tuple(out)

    def problem(self, params):
        i, size = params["input"], params["size"]
        for key, value, top in (("input", i, 999), ("size", size, 1 << 40)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
                return f"{str(value)[:40]!r} is not a bounds probe's {key} (0 to {top})"
        return None
