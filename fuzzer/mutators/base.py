"""The mutator contract and the graph helpers every pass shares.

A mutation is two steps, so that a recipe replays without any randomness:
``propose(variant, rng)`` draws concrete parameters (JSON values: node names, op
names, numbers) or returns None when the graph has no site; ``apply(variant, params)``
is a pure pass that returns a *new* variant and never touches the old one.
"""
from __future__ import annotations

import random

import torch
import torch.fx as fx

from workers.ir import Variant

aten = torch.ops.aten


class MutatorError(ValueError):
    """A mutator name or parameter that is wrong (a campaign or fuzzer bug: raised loudly)."""


class Rejected(Exception):
    """The pass cannot apply here; the draw is discarded quietly and another one tried."""


class Mutator:
    name = ""
    family = ""  # structure, substitution, injection, numeric, precision, semantic
    preserves_semantics = False
    numeric = False  # its variants may legitimately produce non-finite outputs

    def propose(self, variant: Variant, rng: random.Random) -> dict | None:
        raise NotImplementedError

    def apply(self, variant: Variant, params: dict) -> Variant:
        raise NotImplementedError


# ---------------------------------------------------------------- graph helpers
def copy_graph(gm: fx.GraphModule) -> tuple[fx.Graph, dict[str, fx.Node]]:
    """A copy of the graph (same node names and meta) and its nodes by name."""
    graph = fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    return graph, {n.name: n for n in graph.nodes}


def finish(variant: Variant, graph: fx.Graph, inputs: tuple | None = None, root=None) -> Variant:
    graph.eliminate_dead_code()
    graph.lint()
    gm = fx.GraphModule(root if root is not None else variant.gm, graph)
    return variant.with_graph(gm, inputs)


def tensor_meta(node: fx.Node):
    """Shape and dtype of a node's single-tensor value (from the last reference run), else None."""
    tm = node.meta.get("tensor_meta")
    if tm is None or not hasattr(tm, "dtype"):
        return None
    return tm


def call_nodes(variant: Variant) -> list[fx.Node]:
    return [n for n in variant.gm.graph.nodes if n.op == "call_function"]


def float_nodes(variant: Variant) -> list[fx.Node]:
    """Call nodes whose value is one floating tensor: the usual insertion sites."""
    return [n for n in call_nodes(variant)
            if (tm := tensor_meta(n)) is not None and tm.dtype.is_floating_point]


def node(nodes: dict[str, fx.Node], name: str) -> fx.Node:
    if name not in nodes:
        raise Rejected(f"no node named {name!r}")
    return nodes[name]


def insert_after(anchor: fx.Node, target, args: tuple, kwargs: dict | None = None) -> fx.Node:
    """A new call after ``anchor`` that takes over every use of it."""
    with anchor.graph.inserting_after(anchor):
        new = anchor.graph.call_function(target, args, kwargs or {})
    anchor.replace_all_uses_with(new, delete_user_cb=lambda user: user is not new)
    return new


def pick(rng: random.Random, items: list):
    return items[rng.randrange(len(items))] if items else None
