"""Node-by-node eager execution of a graph, and graphs cut at a node.

Tier 2 needs the value of every node on the reference and on the oracle, and, for stacks that
only run whole graphs, a prefix graph whose output is one node (and that node's inputs).
"""
from __future__ import annotations

import torch
import torch.fx as fx

WIDEN = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.float32: torch.float64,
         torch.complex64: torch.complex128, torch.complex32: torch.complex128}


def widen_args(a):
    """Graph arguments with every floating dtype replaced by its 64-bit one (explicit casts too)."""
    if isinstance(a, torch.dtype):
        return WIDEN.get(a, a)
    if isinstance(a, (list, tuple)) and not isinstance(a, torch.Size):
        return type(a)(widen_args(x) for x in a)
    if isinstance(a, dict):
        return {k: widen_args(v) for k, v in a.items()}
    return a


def call_node(n: fx.Node, env: dict, tensors: dict, widen: bool = False):
    """The value of one node, its inputs read from ``env``."""
    if n.op == "get_attr":
        return tensors[n.target]
    if n.op == "call_function":
        args, kwargs = fx.map_arg((n.args, n.kwargs), lambda a: env[a])
        if widen:
            args, kwargs = widen_args(args), widen_args(kwargs)
        return n.target(*args, **kwargs)
    raise RuntimeError(f"unsupported node {n.format_node()}")


def tensors_of(gm: fx.GraphModule) -> dict[str, torch.Tensor]:
    named = dict(gm.named_parameters())
    named.update(gm.named_buffers())
    return named


def node_values(gm: fx.GraphModule, inputs: tuple, widen: bool = False, device: str = "cpu",
                keep=lambda n: True) -> dict[str, object]:
    """Every kept node's value (on the host), running eagerly on ``device``; floats widened to
    float64 for the oracle when ``widen``."""
    def conv(t):
        if not isinstance(t, torch.Tensor):
            return t
        return t.to(device=device, dtype=WIDEN.get(t.dtype, t.dtype) if widen else t.dtype)

    tensors = {k: conv(v) for k, v in tensors_of(gm).items()}
    feed = iter(conv(t) for t in inputs)
    env, out = {}, {}
    with torch.no_grad():
        for n in gm.graph.nodes:
            if n.op == "output":
                break
            env[n] = next(feed) if n.op == "placeholder" else call_node(n, env, tensors, widen)
            if n.op == "call_function" and keep(n):
                v = env[n]
                out[n.name] = v.detach().to("cpu") if isinstance(v, torch.Tensor) else v
    return out


def probe_nodes(gm: fx.GraphModule, values: dict) -> list[fx.Node]:
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
