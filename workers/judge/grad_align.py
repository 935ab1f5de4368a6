"""Tier 2 for a gradient divergence: the forward node whose backward goes wrong first.

When a training run's forward outputs agree and a gradient does not, the defect is in backward.
Backward runs the forward nodes in reverse order, so the nodes are checked in that order, each on
its own: a one-node graph fed the reference's values of that node's inputs, run forward and
backward on the target, on eager and on the float64 oracle (``workers.run.training.train_step``); the
first node whose gradients the target gets wrong, as the oracle attributes it, is the location.
The backward operators that node's gradient goes through (read while eager runs its backward) are
recorded with it, so a report names what to look at: ``convolution_backward``, not ``conv2d``.

A defect that needs several nodes together (a fusion across them) shows in no single node: then
the location is the forward node that uses the parameter or input whose gradient is wrong, last
in graph order (the first such gradient backward computes).

The one-node check runs that node's forward too. Where its forward value diverges (a model's
later layers hid it from the outputs: a normalisation, a value under the absolute tolerance), the
gradient is wrong because the forward is: the node's symptom (``node_symptom``) is the forward's,
so the run is keyed as that forward defect (``core.bugs``), not as a backward one. Where only its
gradients diverge and each is within the error bound of the sum it is (``workers.judge.reduction``:
an expand's backward sums what it broadcast), the run is a reduction's order, no defect.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx
from torch.utils._python_dispatch import TorchDispatchMode

from gapfuzz.core.bugs import Explanation, Verdict
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.workers.backends.eager import prepare_eager, prepare_eager_fp64
from gapfuzz.workers.judge.compare import attribute, compare
from gapfuzz.workers.judge.interpret import Evaluator
from gapfuzz.workers.judge.reduction import gradients_within_bound
from gapfuzz.workers.run.training import GRAD, train_step

MAX_NODES = 24  # one-node prepares (compiles, on a compiler) at most per located run


def all_values(gm: fx.GraphModule, inputs: tuple, device: str = "cpu") -> dict:
    """Every node's value on eager, placeholders and weights too."""
    out = {}

    def record(n, value, reused):
        out[n.name] = value

    with torch.no_grad():
        Evaluator(gm, device, on_value=record).run(*inputs)
    return out


def one_node(node: fx.Node, values: dict) -> tuple[fx.GraphModule, tuple] | None:
    """``node`` alone, its tensor arguments as inputs (their reference values); None when it has no
    floating input or output to differentiate."""
    graph, env, fed = fx.Graph(), {}, []
    for a in node.all_input_nodes:
        if isinstance(values.get(a.name), torch.Tensor):
            env[a] = graph.placeholder(a.name)
            fed.append(values[a.name].detach().clone())
        else:
            return None
    out = values.get(node.name)
    first = isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor)
    out = out[0] if first else out  # a multi-output op (batch norm): its main output
    if not (isinstance(out, torch.Tensor) and out.is_floating_point() and any(t.is_floating_point() for t in fed)):
        return None
    copied = graph.node_copy(node, lambda a: env[a])
    graph.output((graph.call_function(operator.getitem, (copied, 0)) if first else copied,))
    graph.lint()
    return fx.GraphModule(torch.nn.Module(), graph), tuple(fed)


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket) if hasattr(func, "overloadpacket") else str(func)
        if name not in self.ops and name not in ("aten.detach", "aten.alias"):
            self.ops.append(name)
        return func(*args, **(kwargs or {}))


def backward_ops(gm: fx.GraphModule, inputs: tuple) -> list[str]:
    """The ATen operators eager's backward of ``gm`` calls (``aten.convolution_backward``, ...)."""
    leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    with torch.enable_grad():
        out = torch.utils._pytree.tree_leaves(gm(*leaves))[0]
        cotangent = torch.ones_like(out)
        wanted = [t for t in leaves if t.requires_grad]
        mode = _Ops()
        with mode:
            torch.autograd.grad(out, wanted, cotangent, allow_unused=True)
    return mode.ops


class GradAligner:
    """Locate the first node whose backward diverges on one target."""

    def __init__(self, variant, make_backend, device: str, input_device: str, settings: Tolerances,
                 wrong: list[str], reference_device: str = "cpu"):
        self.v, self.make_backend, self.device, self.input_device = variant, make_backend, device, input_device
        self.s, self.wrong = settings, wrong  # the names of the gradient outputs that diverge
        self.values = all_values(variant.gm, variant.inputs, reference_device)
        self.prepares = 0
        self.forward: dict = {}  # node -> the Closeness of its forward value where the target's diverges
        self.bounded: dict = {}  # node -> its gradients' error in units of their reduction bound, where within it

    def _diverges(self, node: fx.Node, gm: fx.GraphModule, fed: tuple) -> bool:
        """Whether ``gm`` (``node`` alone) diverges forward or backward on the target, as the oracle
        attributes it; a forward value that diverges is kept (``self.forward``)."""
        ref = train_step(prepare_eager(gm, fed, "cpu", {})[0], [], fed)
        oracle = train_step(prepare_eager_fp64(gm, fed, "cpu", {})[0], [], fed)
        on_device = tuple(t.to(self.input_device) for t in fed)
        self.prepares += 1
        fn = self.make_backend().prepare(gm, on_device, self.device)
        out = [t.detach().cpu() for t in train_step(fn, [], on_device)]
        if compare(out, ref, self.s).passed:
            return False
        forward = attribute(out[:1], ref[:1], oracle[:1], self.s)  # one node: one forward output, then the loss
        if forward.verdict == Verdict.TARGET_DIVERGENT:
            self.forward[node.name] = forward.closeness
        if attribute(out, ref, oracle, self.s).verdict != Verdict.TARGET_DIVERGENT:
            return False
        if compare(out[:2], ref[:2], self.s).passed:  # the gradients alone: summed in another order?
            ratio = gradients_within_bound(gm, fed, out, oracle, self.s)
            if ratio is not None:
                self.bounded[node.name] = ratio
        return True

    def by_nodes(self) -> fx.Node | None:
        nodes = [n for n in reversed(self.v.gm.graph.nodes) if n.op == "call_function"]
        for n in nodes:
            if self.prepares >= MAX_NODES:
                return None
            single = one_node(n, self.values)
            if single is None:
                continue
            try:
                if self._diverges(n, *single):
                    return n
            except Exception:  # noqa: BLE001 - a node the stack cannot compile alone says nothing
                continue
        return None

    def by_owner(self) -> fx.Node | None:
        """The last forward node that reads a leaf whose gradient diverges."""
        leaves = {w[len(GRAD):].removeprefix("input:") for w in self.wrong}
        owners = [u for n in self.v.gm.graph.nodes if n.op in ("get_attr", "placeholder")
                  and (n.name in leaves or str(n.target) in leaves) for u in n.users if u.op == "call_function"]
        order = {n: i for i, n in enumerate(self.v.gm.graph.nodes)}
        return max(owners, key=order.get) if owners else None

    def locate(self) -> dict:
        node = self.by_nodes()
        if node is None:  # the owner of the first wrong gradient
            node = self.by_owner()
        if node is None:
            return {"align_error": "no node's backward diverges alone, and no wrong gradient has an owner",
                    "align_prepares": self.prepares}
        result = {"first_div_node": node.name, "first_div_op": str(node.target), "align_prepares": self.prepares}
        forward = self.forward.get(node.name)
        if forward is not None:  # the node's forward is wrong: the gradient is that forward defect's
            result.update(node_symptom=str(forward.symptom), node_dtype=forward.output_dtype)
        elif node.name in self.bounded:  # its gradients sum in another order, within their bound
            result.update(explanation=str(Explanation.REDUCTION_ORDER), explain_ratio=self.bounded[node.name])
        single = one_node(node, self.values)
        if single is not None:
            try:
                result["grad_ops"] = backward_ops(*single)
            except Exception:  # noqa: BLE001 - the ops are a courtesy; the location stands without them
                pass
        return result
