"""Node-by-node eager execution of a graph, and graphs cut at a node.

Validation of a mutation needs every node's value (and shape) on the reference, reusing what the
parent computed; tier 2 needs the value of every node on the reference and on the oracle and, for
stacks that only run whole graphs, a prefix graph whose output is one node (and that node's
inputs). All of it runs through one ``fx.Interpreter`` subclass, ``Evaluator``.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from gapfuzz.workers.backends.eager import WIDEN, widen_args

NOT_REUSED = object()  # what ``reuse`` returns for a node it has no value for


def raising_node(gm: fx.GraphModule, inputs) -> fx.Node | None:
    """The node whose eager run raises on ``inputs`` (None when none does): which operator checked them."""
    seen: list[fx.Node] = []
    evaluator = Evaluator(gm, on_value=lambda n, value, reused: seen.append(n))
    try:
        evaluator.run(*inputs)
    except Exception:  # noqa: BLE001 - the error is the answer: the node after the last one that ran
        done = set(seen)
        return next((n for n in gm.graph.nodes if n.op == "call_function" and n not in done), None)
    return None


class Evaluator(fx.Interpreter):
    """Runs an ATen graph node by node on eager and keeps what each node computed: the one node loop
    of gapfuzz (the reference's validation of each mutation, tier 2's per-node values, the shrinker's
    node values).

    ``device`` and ``widen`` move every input and weight (to the device; floats to float64, with
    explicit casts to a float type widened too: the oracle). ``reuse(node)`` may give a value
    computed before (an unchanged node of a mutation's parent) instead of running the node;
    ``on_value(node, value, reused)`` sees every value as it is made.
    """

    def __init__(self, gm: fx.GraphModule, device: str = "cpu", widen: bool = False, reuse=None, on_value=None):
        super().__init__(gm, garbage_collect_values=False)
        self.extra_traceback = False  # errors keep their own message: it becomes a record's
        self.device, self.widen = device, widen
        self.reuse, self.on_value = reuse, on_value
        self._moved: dict[str, object] = {}

    def _move(self, t):
        if not isinstance(t, torch.Tensor):
            return t
        return t.to(device=self.device, dtype=WIDEN.get(t.dtype, t.dtype) if self.widen else t.dtype)

    def run_node(self, n: fx.Node):
        value = NOT_REUSED if self.reuse is None or n.op in ("placeholder", "output") else self.reuse(n)
        reused = value is not NOT_REUSED
        if not reused:
            value = super().run_node(n)
        if self.on_value is not None and n.op != "output":
            self.on_value(n, value, reused)
        return value

    def placeholder(self, target, args, kwargs):
        return self._move(super().placeholder(target, args, kwargs))

    def get_attr(self, target, args, kwargs):
        if target not in self._moved:
            self._moved[target] = self._move(super().get_attr(target, args, kwargs))
        return self._moved[target]

    def call_function(self, target, args, kwargs):
        if self.widen:
            args, kwargs = widen_args(args), widen_args(kwargs)
        return target(*args, **kwargs)

    def call_module(self, target, args, kwargs):
        raise RuntimeError(f"an ATen graph has no module calls ({target})")

    call_method = call_module


def node_values(gm: fx.GraphModule, inputs: tuple, widen: bool = False, device: str = "cpu",
                keep=lambda n: True) -> dict[str, object]:
    """Every kept call node's value (on the host), running eagerly on ``device``; floats widened to
    float64 for the oracle when ``widen``."""
    out = {}

    def record(n: fx.Node, value, reused: bool) -> None:
        if n.op == "call_function" and keep(n):
            out[n.name] = value.detach().to("cpu") if isinstance(value, torch.Tensor) else value

    with torch.no_grad():
        Evaluator(gm, device, widen, on_value=record).run(*inputs)
    return out


def candidate_nodes(gm: fx.GraphModule, values: dict) -> list[fx.Node]:
    """Call nodes whose value is one tensor, in graph order: the places a divergence can start."""
    return [n for n in gm.graph.nodes if n.op == "call_function" and isinstance(values.get(n.name), torch.Tensor)]


def tensor_inputs(n: fx.Node, values: dict) -> list[fx.Node]:
    return [a for a in n.all_input_nodes if a.op == "call_function" and isinstance(values.get(a.name), torch.Tensor)]


def prefix_graph(gm: fx.GraphModule, name: str, extra: list[str]) -> fx.GraphModule:
    """The graph cut after node ``name``: it outputs that node's value, then the ``extra`` nodes'."""
    graph = fx.Graph()
    env = {}
    for n in gm.graph.nodes:
        if n.op == "output":
            break
        env[n] = graph.node_copy(n, lambda a: env[a])
        if n.name == name:
            break
    graph.output(tuple(env[graph_node] for graph_node in [_by_name(gm, name), *[_by_name(gm, e) for e in extra]]))
    graph.eliminate_dead_code()
    graph.lint()
    return fx.GraphModule(gm, graph)


def _by_name(gm: fx.GraphModule, name: str) -> fx.Node:
    for n in gm.graph.nodes:
        if n.name == name:
            return n
    raise KeyError(name)


def identity_graph(gm) -> tuple:
    """A graph that returns a copy of each tensor input of ``gm``, and the (position, name) of each."""
    aten = torch.ops.aten
    graph, names, outs = fx.Graph(), [], []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, n in enumerate(placeholders):
        p = graph.placeholder(n.name)
        p.meta = dict(n.meta)
        value = n.meta.get("val")
        if value is None or isinstance(value, torch.Tensor):
            outs.append(graph.call_function(aten.clone.default, (p,)))
            names.append((i, n.name))
    graph.output(tuple(outs))
    return fx.GraphModule(torch.nn.Module(), graph), names


def layout_of(inputs: tuple, i: int) -> str:
    """How input ``i`` lies in memory, in the few classes a stack gets wrong: ``aliased`` (its storage is
    another input's), ``non-contiguous`` (a transposed, channels-last, strided or expanded view),
    ``offset`` (contiguous from a storage offset), else ``contiguous``."""
    t = inputs[i]
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return "contiguous"
    ptr = t.untyped_storage().data_ptr()
    if any(isinstance(o, torch.Tensor) and o.numel() and j != i and o.untyped_storage().data_ptr() == ptr
           for j, o in enumerate(inputs)):
        return "aliased"
    if not t.is_contiguous():
        return "non-contiguous"
    return "offset" if t.storage_offset() else "contiguous"
