"""Tier 2, activation alignment: the first graph node whose value diverges on the target.

Stacks that run a graph node by node (``capture_nodes = True``, e.g. eager on any device) give
every node's value in one run. Compiled stacks only run whole graphs, so the graph is cut after
node k and compiled again: a binary search over k finds where the divergence starts in at most
ceil(log2(nodes)) compiles. Before any node, the graph's inputs as the stack received them (an
identity graph through it) are checked: a stack that mishandles an input's layout, alias or dtype
is located at the input (``input:<name>``, op ``input:<layout>``). The located node's own symptom
(``node_symptom``) is the divergence's identity (``core.bugs``), whatever the model around it made
of it. At that node the inputs are checked too: a divergence that is at
rounding level on the inputs and blown up by a discontinuous op (floor, a cast to an integer,
a comparison, argmax over near-ties) is *amplified rounding*, not a defect of the target.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import torch

from gapfuzz.core.bugs import INPUT, BugKey, Symptom, Verdict
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.workers.judge.compare import attribute, compare
from gapfuzz.workers.judge.interpret import candidate_nodes, node_values, prefix_graph, tensor_inputs

aten = torch.ops.aten
DISCONTINUOUS = {
    aten.floor.default, aten.ceil.default, aten.round.default, aten.round.decimals, aten.trunc.default,
    aten.sign.default, aten.eq.Tensor, aten.eq.Scalar, aten.ne.Tensor, aten.ne.Scalar, aten.lt.Tensor,
    aten.lt.Scalar, aten.le.Tensor, aten.le.Scalar, aten.gt.Tensor, aten.gt.Scalar, aten.ge.Tensor,
    aten.ge.Scalar, aten.argmax.default, aten.argmin.default, aten.sort.default, aten.sort.stable,
    aten.topk.default, aten.max.dim, aten.min.dim, aten.remainder.Tensor, aten.remainder.Scalar,
    aten.fmod.Tensor, aten.fmod.Scalar, aten.floor_divide.default, aten.div.Tensor_mode,
    aten.bucketize.Tensor, aten.searchsorted.Tensor, aten.argsort.default, aten.argsort.stable,
}
GROWTH_POINTS = 48


def align_case(seed_id: str, key: BugKey, output_dtype: str | None = None) -> str:
    """What makes two divergent runs the same case for tier 2: the same seed, output dtype and bug key
    (which tier 2 has not yet completed with the first divergent op)."""
    return f"{seed_id}|{output_dtype or '-'}|{key.id}"


LOCATION_FIELDS = ("first_div_node", "first_div_op", "amplified", "grad_ops", "node_symptom", "node_dtype")


@dataclass(frozen=True)
class Location:
    """Where a case was located (``op`` set) or is being located (``op`` None), and on which variant;
    whether the divergence there is amplified rounding."""

    variant_id: str
    node: str | None = None
    op: str | None = None
    amplified: bool = False
    grad_ops: tuple = ()  # training: the backward operators of the located node
    symptom: str | None = None  # what differs at the node (core.bugs.Symptom)
    dtype: str | None = None  # the node's dtype

    @property
    def done(self) -> bool:
        return bool(self.op)

    @classmethod
    def of(cls, variant_id: str, record) -> Location:
        """Where a located record's divergence is (a ``results.schema.RunRecord``)."""
        return cls(variant_id, record.first_div_node, record.first_div_op, bool(record.amplified),
                   tuple(record.grad_ops or ()), record.node_symptom, record.node_dtype)

    def inherit(self, record) -> None:
        """A run of the same case takes this location, and says so (``align_error``)."""
        if self.op:
            if self.grad_ops:
                record.grad_ops = list(self.grad_ops)
            record.update(first_div_node=self.node, first_div_op=self.op, amplified=self.amplified,
                          node_symptom=self.symptom, node_dtype=self.dtype,
                          align_error=f"not run: inherited from {self.variant_id}, located at {self.op}")
        else:
            record.align_error = f"not run: being located on {self.variant_id}"


class AlignLedger:
    """Tier 2 once per case (``compare.align_scope: seed``): bisection is a dozen compiles a run,
    and a seed's variants mostly diverge the same way. The first run to claim a case locates it;
    the others inherit its location. One per campaign, shared by every worker as a Ray actor; it
    keeps compiler attributions (``workers.judge.culprit.Culprit``) the same way, under their own cases."""

    def __init__(self):
        self.cases: dict[str, Location] = {}

    def claim(self, case: str, variant_id: str, pending=None) -> Location | None:
        """None: locate it, then ``settle``. Otherwise where it is (being) located. ``pending``: what a
        later claim gets meanwhile (default: a Location without an op)."""
        if case in self.cases:
            return self.cases[case]
        self.cases[case] = pending if pending is not None else Location(variant_id)
        return None

    def settle(self, case: str, location) -> None:
        if location.done:
            self.cases[case] = location
        else:  # tier 2 failed there: the next run of the case tries again
            self.cases.pop(case, None)


def is_discontinuous(node, value, inputs: list) -> bool:
    """A step function of its inputs: rounding, comparison, selection, or a float-to-integer cast."""
    if node.target in DISCONTINUOUS:
        return True
    floats_in = any(v.is_floating_point() for v in inputs if isinstance(v, torch.Tensor))
    return isinstance(value, torch.Tensor) and not value.is_floating_point() and floats_in


class Aligner:
    """Locate the first divergent node of one target on one variant."""

    def __init__(self, variant, make_backend, device: str, input_device: str, settings: Tolerances,
                 reference_device: str = "cpu", symptom: str | None = None):
        self.v, self.make_backend, self.device, self.input_device = variant, make_backend, device, input_device
        self.s = settings
        self.wanted = symptom  # what the run shows: a NaN-pattern divergence starts where NaNs differ
        self.ref = node_values(variant.gm, variant.inputs, device=reference_device)
        self.oracle = node_values(variant.gm, variant.inputs, widen=True)
        self.nodes = candidate_nodes(variant.gm, self.ref)
        self.prepares = 0
        self.growth: dict[str, float] = {}
        self.symptoms: dict[str, object] = {}  # node -> its Closeness against the reference, as _diverges measured it

    def _diverges(self, name: str, value) -> bool:
        """Whether the target diverges at node ``name`` the way the run does: a run whose output differs in
        more than rounding (NaN pattern, integers, values) starts where that does, not at an earlier
        node that is only numerically off (OpenVINO's bfloat16 convolution before its relu drops a NaN)."""
        v = attribute([value], [self.ref[name]], [self.oracle[name]], self.s)
        self.growth[name] = v.closeness.tol_ratio
        self.symptoms[name] = v.closeness
        if v.verdict != Verdict.TARGET_DIVERGENT:
            return False
        return self.wanted in (None, Symptom.NUMERIC) or v.closeness.symptom != Symptom.NUMERIC

    def _run(self, gm) -> list:
        """``gm`` prepared by the target and called once on the variant's inputs: its outputs on the host."""
        inputs = tuple(t.to(self.input_device) for t in self.v.inputs)
        self.prepares += 1
        with torch.no_grad():
            out = self.make_backend().prepare(gm, inputs, self.device)(*inputs)
        return [t.detach().cpu() if isinstance(t, torch.Tensor) else t for t in torch.utils._pytree.tree_leaves(out)]

    def _run_prefix(self, k: int) -> list:
        node = self.nodes[k]
        return self._run(prefix_graph(self.v.gm, node.name, [a.name for a in tensor_inputs(node, self.ref)]))

    def by_bisection(self) -> tuple[int, dict]:
        """Smallest k whose prefix diverges, assuming divergence persists once it starts."""
        lo, hi, seen = 0, len(self.nodes) - 1, {}
        while lo < hi:
            mid = (lo + hi) // 2
            try:
                seen[mid] = self._run_prefix(mid)
                bad = self._diverges(self.nodes[mid].name, seen[mid][0])
            except Exception:  # noqa: BLE001 - a prefix the stack cannot compile says nothing
                bad = False
            lo, hi = (lo, mid) if bad else (mid + 1, hi)
        if lo not in seen:
            try:
                seen[lo] = self._run_prefix(lo)
                self._diverges(self.nodes[lo].name, seen[lo][0])
            except Exception:  # noqa: BLE001
                seen[lo] = None
        return lo, seen

    def by_capture(self) -> tuple[int, dict]:
        """Every node's value from one node-by-node run on the target device."""
        target = node_values(self.v.gm, self.v.inputs, device=self.device)
        self.prepares = 1
        first = len(self.nodes) - 1
        for k, n in enumerate(self.nodes):
            if self._diverges(n.name, target[n.name]):
                first = k
                break
        node = self.nodes[first]
        return first, {first: [target[node.name], *[target[a.name] for a in tensor_inputs(node, self.ref)]]}

    def by_inputs(self) -> dict | None:
        """The first graph input the stack does not receive as given: an identity graph's outputs
        (a copy of each input) against the inputs; None when every input arrives intact."""
        gm, names = identity_graph(self.v.gm)
        if not names:
            return None
        try:
            out = self._run(gm)
        except Exception:  # noqa: BLE001 - a stack that cannot run a bare copy says nothing of its inputs
            return None
        for (i, name), value in zip(names, out):
            given = self.v.inputs[i]
            close = compare([value], [given.detach().cpu()], self.s)
            if not close.passed:
                return {"first_div_node": f"{INPUT}{name}", "first_div_op": f"{INPUT}{layout_of(self.v.inputs, i)}",
                        "node_symptom": str(close.symptom), "node_dtype": close.output_dtype,
                        "align_prepares": self.prepares}
        return None

    def locate(self, capture_nodes: bool) -> dict:
        if not self.nodes:
            return {}
        at_input = None if capture_nodes else self.by_inputs()
        if at_input:
            return at_input
        k, seen = self.by_capture() if capture_nodes else self.by_bisection()
        node = self.nodes[k]
        result = {"first_div_node": node.name, "first_div_op": str(node.target), "align_prepares": self.prepares}
        values = seen.get(k)
        close = self.symptoms.get(node.name)
        if values and close is not None and not close.passed:
            result.update(node_symptom=str(close.symptom), node_dtype=close.output_dtype)
        if values:
            ins = tensor_inputs(node, self.ref)
            in_ratio = compare(values[1:], [self.ref[a.name] for a in ins], self.s).tol_ratio if ins else math.inf
            amplified = is_discontinuous(node, values[0], values[1:]) and in_ratio <= 1.0 and \
                self.growth.get(node.name, 0) > 1.0
            result.update(amplified=amplified, amplifier_node=node.name if amplified else None)
        order = {n.name: i for i, n in enumerate(self.nodes)}
        points = sorted(self.growth.items(), key=lambda kv: order[kv[0]])
        if len(points) > GROWTH_POINTS:
            step = len(points) / GROWTH_POINTS
            points = [points[int(i * step)] for i in range(GROWTH_POINTS)]
        result["div_growth"] = json.dumps([[n, str(self.nodes[order[n]].target), round(r, 6)] for n, r in points])
        return result


def identity_graph(gm) -> tuple:
    """A graph that returns a copy of each tensor input of ``gm``, and the (position, name) of each."""
    import torch.fx as fx

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


def ask(fn, *args):
    """Call a ledger's method in this process, or on the campaign's Ray actor."""
    if hasattr(fn, "remote"):
        import ray

        return ray.get(fn.remote(*args))
    return fn(*args)
