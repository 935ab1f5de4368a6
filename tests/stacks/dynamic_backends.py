"""A test-only stack wrong only at sizes its compiled code was not traced at, loaded by module:Class.

``HintBoundCompiled`` compiles through ``torch.compile`` with a Dynamo backend of its own. Where
Dynamo traced the graph with symbolic sizes (``dynamic: true``), its kernels take their loop bounds
from the sizes they were traced at (the symbols' hints) rather than from the symbols: at a larger
size, every input is read only up to the traced length, the rest as zeros (a reduction sums
``min(n, traced n)`` elements). At the traced sizes, at smaller ones, and wherever the sizes are
constants (``dynamic: false``: a new size compiles again), it is right.
"""
from __future__ import annotations

import torch

from gapfuzz.workers.run.backend import Backend


def _read_up_to(t, traced: tuple):
    """``t`` with every element past the traced length of each dimension read as zero."""
    if not isinstance(t, torch.Tensor) or traced is None or tuple(t.shape) == traced or t.dim() != len(traced):
        return t
    out = t.clone()
    for d, (n, h) in enumerate(zip(t.shape, traced)):
        if n > h:
            out.narrow(d, h, n - h).zero_()
    return out


def _symbolic(graph: torch.fx.GraphModule) -> bool:
    """Whether Dynamo traced the graph with a symbolic size (its placeholders' fake values say)."""
    values = [n.meta.get("example_value") for n in graph.graph.nodes if n.op == "placeholder"]
    return any(isinstance(v, torch.SymInt) or isinstance(v, torch.Tensor) and
               any(isinstance(s, torch.SymInt) for s in v.shape) for v in values)


def hint_bound(graph: torch.fx.GraphModule, example_inputs: list):
    """The Dynamo backend: the graph as traced, its inputs read up to the sizes they were traced at
    (``example_inputs``: the real tensors of the first call) where those sizes are symbolic."""
    if not _symbolic(graph):
        return graph.forward
    traced = [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in example_inputs]

    def run(*args):
        return graph(*(_read_up_to(a, h) for a, h in zip(args, traced)))
    return run


class HintBoundCompiled(Backend):
    name = "hint-bound"
    any_strides = False  # compiles again for new strides, as Inductor does
    compile_error_modules = ("torch._dynamo",)

    def prepare(self, gm, example_inputs, device):
        return torch.compile(gm, backend=hint_bound, dynamic=bool(self.options.get("dynamic", False)))
