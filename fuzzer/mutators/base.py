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

from gapfuzz.core.ir import Variant

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
    differentiable = True  # False: its graphs leave backward nothing to test; left out of training variants
    # A mutator that picks one of named choices (an operator from a pool) names the params key that
    # records the pick; coverage guidance then favours the choices a campaign has used least.
    choice_param: str | None = None
    choice_weights: dict | None = None  # set per build by the generator from the guidance snapshot

    @classmethod
    def choices(cls) -> list[str]:
        return []

    def choose(self, rng: random.Random, names: list[str]) -> str:
        """One of ``names``, weighted by ``choice_weights`` (uniform without guidance)."""
        return rng.choices(names, weights=[max(1e-6, (self.choice_weights or {}).get(n, 1.0)) for n in names])[0]

    def propose(self, variant: Variant, rng: random.Random) -> dict | None:
        """Concrete parameters for ``apply``, or None when the graph has no site. By default: one of
        ``sites`` (``{"node": name}``) and what ``draw`` adds for it."""
        site = pick(rng, self.sites(variant))
        extra = None if site is None else self.draw(site, rng)
        return None if extra is None else {"node": site.name, **extra}

    def sites(self, variant: Variant) -> list[fx.Node]:
        """The nodes the default ``propose`` picks from."""
        raise NotImplementedError(f"mutator {self.name} defines neither sites() nor propose()")

    def draw(self, site: fx.Node, rng: random.Random) -> dict | None:
        """Parameters beyond the site, drawn after it; None when the site turns out not to fit."""
        return {}

    def apply(self, variant: Variant, params: dict) -> Variant:
        """A new variant. By default: ``build``'s nodes spliced in after node ``params["node"]``, whose
        other users read their result."""
        rw = Rewrite(variant)
        rw.splice_after(rw.node(params["node"]), lambda x: self.build(rw, x, params))
        return rw.finish()

    def build(self, rw: Rewrite, x: fx.Node, params: dict) -> fx.Node:
        """The nodes the default ``apply`` puts after ``x``; returns their result."""
        raise NotImplementedError(f"mutator {self.name} defines neither build() nor apply()")


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
    with anchor.graph.inserting_before(anchor.next):
        new = anchor.graph.call_function(target, args, kwargs or {})
    anchor.replace_all_uses_with(new, delete_user_cb=lambda user: user is not new)
    return new


def pick(rng: random.Random, items: list):
    return items[rng.randrange(len(items))] if items else None


def shape_of(n) -> tuple | None:
    tm = tensor_meta(n) if isinstance(n, fx.Node) else None
    return tuple(tm.shape) if tm is not None else None


def dtype_of(n):
    tm = tensor_meta(n) if isinstance(n, fx.Node) else None
    return tm.dtype if tm is not None else None


class Rewrite:
    """A copy of a variant's graph to edit, plus the tensors and inputs the edit changes.

    New constants become get_attr targets named ``gf_<hint>_<k>``; replaced weights keep
    their name but get a new tensor, so the variant the pass started from is never touched.
    """

    def __init__(self, variant: Variant):
        self.variant = variant
        self.graph, self.nodes = copy_graph(variant.gm)
        self.tensors: dict[str, torch.Tensor] = {}
        self.inputs = tuple(variant.inputs)

    def node(self, name: str) -> fx.Node:
        return node(self.nodes, name)

    def after(self, anchor: fx.Node):
        """Insert the following nodes right after ``anchor``, in the order they are made."""
        return self.graph.inserting_before(anchor.next)

    def call(self, target, *args, **kwargs) -> fx.Node:
        return self.graph.call_function(target, args, kwargs)

    def constant(self, tensor: torch.Tensor, hint: str = "c") -> fx.Node:
        taken = set(self.variant.tensors()) | set(self.tensors)
        k = 0
        while f"gf_{hint}_{k}" in taken:
            k += 1
        name = f"gf_{hint}_{k}"
        self.tensors[name] = tensor
        return self.graph.get_attr(name)

    def set_tensor(self, name: str, tensor: torch.Tensor) -> None:
        if name not in self.variant.tensors():
            raise Rejected(f"no tensor named {name!r}")
        self.tensors[name] = tensor

    def splice_after(self, x: fx.Node, build) -> fx.Node:
        """Insert ``build(x)``'s nodes right after ``x`` (after the last input, for an input); every other
        user of ``x`` reads the result."""
        before = set(self.graph.nodes)
        anchor = [n for n in self.graph.nodes if n.op == "placeholder"][-1] if x.op == "placeholder" else x
        with self.after(anchor):
            out = build(x)
        new = set(self.graph.nodes) - before
        x.replace_all_uses_with(out, delete_user_cb=lambda u: u not in new)
        return out

    def tensor(self, name: str) -> torch.Tensor:
        return self.tensors.get(name, self.variant.tensors().get(name))

    def finish(self) -> Variant:
        root = torch.nn.Module()
        params = dict(self.variant.gm.named_parameters())
        for name, t in {**self.variant.tensors(), **self.tensors}.items():
            t = self.tensors.get(name, t)
            if name in params and name not in self.tensors:
                root.register_parameter(name, params[name])
            else:
                root.register_buffer(name, t)
        return finish(self.variant, self.graph, self.inputs, root)


def same_layout(rw: Rewrite, new: fx.Node, old: fx.Node) -> fx.Node:
    """Give the result the strides the replaced node had: later ``view`` ops may rely on them."""
    tm = old.meta.get("tensor_meta")
    if tm is None or not hasattr(tm, "stride"):
        return new
    contiguous = torch.empty(tm.shape, device="meta").stride()
    if tuple(tm.stride) == tuple(contiguous):
        return new
    out = rw.call(aten.new_empty_strided.default, new, list(tm.shape), list(tm.stride))  # new's dtype and device
    return rw.call(aten.copy.default, out, new)
