"""Tier 2, activation alignment: the first graph node whose value diverges on the target.

Stacks that run a graph node by node (``capture_nodes = True``, e.g. eager on any device) give
every node's value in one run. Compiled stacks only run whole graphs, so the graph is cut after
node k and compiled again: a binary search over k finds where the divergence starts in at most
ceil(log2(nodes)) compiles. Before any node, the graph's inputs as the stack received them (an
identity graph through it) are checked: a stack that mishandles an input's layout, alias or dtype
is located at the input (``input:<name>``, op ``input:<layout>``). The located node's own symptom
(``node_symptom``) is the divergence's identity (``core.bugs``), whatever the model around it made
of it. At that node the inputs are checked too, each side against the float64 oracle (two float32
orders of a long dot product can be many tolerances apart from each other and equally near the
exact result): a divergence whose inputs the target computes no worse than the reference and that a
discontinuous op (round, floor, a cast to an integer, a comparison, argmax over near-ties) blows up is
*amplified rounding* (``Explanation.AMPLIFIED``), not a defect of the target; where the target's inputs
are already worse, the finding moves back to the node that made them so. A located reduction whose
operands agree and whose result is within its error bound (``workers.judge.reduction``) is a
summation order (``Explanation.REDUCTION_ORDER``), not a defect either.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import torch

from gapfuzz.core.bugs import INPUT, BugKey, Explanation, Symptom, Verdict
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.workers.judge.compare import attribute, compare
from gapfuzz.workers.judge.discontinuity import all_values, amplifies, is_discontinuous
from gapfuzz.workers.judge.interpret import (
    candidate_nodes,
    identity_graph,
    layout_of,
    node_values,
    prefix_graph,
    tensor_inputs,
)
from gapfuzz.workers.judge.reduction import node_within_bound

GROWTH_POINTS = 48


def align_case(seed_id: str, key: BugKey, output_dtype: str | None = None) -> str:
    """What makes two divergent runs the same case for tier 2: the same seed, output dtype and bug key
    (which tier 2 has not yet completed with the first divergent op)."""
    return f"{seed_id}|{output_dtype or '-'}|{key.id}"


LOCATION_FIELDS = ("first_div_node", "first_div_op", "amplified", "grad_ops", "node_symptom", "node_dtype")
PENDING = "not run: being located on "  # the note of a run whose case another run is locating
BENIGN_AT_NODE = (Explanation.AMPLIFIED, Explanation.REDUCTION_ORDER)  # what tier 2 explains at the node


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
    explanation: str | None = None  # what explains the divergence at the node (``BENIGN_AT_NODE``)

    @property
    def done(self) -> bool:
        return bool(self.op)

    @classmethod
    def of(cls, variant_id: str, record) -> Location:
        """Where a located record's divergence is (a ``results.schema.RunRecord``)."""
        explained = record.explanation if record.explanation in BENIGN_AT_NODE else None
        return cls(variant_id, record.first_div_node, record.first_div_op, bool(record.amplified),
                   tuple(record.grad_ops or ()), record.node_symptom, record.node_dtype, explained)

    def inherit(self, record) -> None:
        """A run of the same case takes this location, and says so (``align_error``)."""
        if self.op:
            if self.grad_ops:
                record.grad_ops = list(self.grad_ops)
            record.update(first_div_node=self.node, first_div_op=self.op, amplified=self.amplified,
                          node_symptom=self.symptom, node_dtype=self.dtype,
                          align_error=f"not run: inherited from {self.variant_id}, located at {self.op}")
            if self.explanation and not record.explanation:
                record.explanation = self.explanation
        else:
            record.align_error = f"{PENDING}{self.variant_id}"


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

    def peek(self, case: str):
        """Where the case is (being) located, None when no run has claimed it: claims nothing."""
        return self.cases.get(case)

    def settle(self, case: str, location) -> None:
        if location.done:
            self.cases[case] = location
        else:  # tier 2 failed there: the next run of the case tries again
            self.cases.pop(case, None)


class Aligner:
    """Locate the first divergent node of one target on one variant."""

    def __init__(self, variant, make_backend, device: str, input_device: str, settings: Tolerances,
                 reference_device: str = "cpu", symptom: str | None = None):
        self.v, self.make_backend, self.device, self.input_device = variant, make_backend, device, input_device
        self.s = settings
        self.wanted = symptom  # what the run shows: a NaN-pattern divergence starts where NaNs differ
        self.ref = node_values(variant.gm, variant.inputs, device=reference_device)
        self.oracle = all_values(variant.gm, variant.inputs, widen=True)  # placeholders and weights too
        self.nodes = candidate_nodes(variant.gm, self.ref)
        self.prepares = 0
        self.growth: dict[str, float] = {}
        self.symptoms: dict[str, object] = {}  # node -> its Closeness against the reference, as _diverges measured it
        self.diverged: set[str] = set()
        self.captured: dict | None = None  # every node's value on the target, for a stack run node by node

    def _diverges(self, name: str, value) -> bool:
        """Whether the target diverges at node ``name`` the way the run does: a run whose output differs in
        more than rounding (NaN pattern, integers, values) starts where that does, not at an earlier
        node that is only numerically off (OpenVINO's bfloat16 convolution before its relu drops a NaN)."""
        v = attribute([value], [self.ref[name]], [self.oracle[name]], self.s)
        self.growth[name] = v.closeness.tol_ratio
        self.symptoms[name] = v.closeness
        if v.verdict != Verdict.TARGET_DIVERGENT:
            return False
        bad = self.wanted in (None, Symptom.NUMERIC) or v.closeness.symptom != Symptom.NUMERIC
        if bad:
            self.diverged.add(name)
        return bad

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

    def by_bisection(self, hi: int | None = None) -> tuple[int, dict]:
        """Smallest k (up to ``hi``) whose prefix diverges, assuming divergence persists once it starts."""
        lo, hi, seen = 0, len(self.nodes) - 1 if hi is None else hi, {}
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

    def by_capture(self, hi: int | None = None) -> tuple[int, dict]:
        """Every node's value from one node-by-node run on the target device (the first such run's)."""
        if self.captured is None:
            self.captured = node_values(self.v.gm, self.v.inputs, device=self.device)
            self.prepares = 1
        target = self.captured
        first = len(self.nodes) - 1 if hi is None else hi
        for k, n in enumerate(self.nodes[:first + 1]):
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
        search = self.by_capture if capture_nodes else self.by_bisection
        k, seen = search()
        values = seen.get(k)
        if values and self._steps(self.nodes[k], values) and not self._inputs_agree(self.nodes[k], values) and k:
            self.wanted = None  # its inputs are already worse than the reference's: the node that made them so
            j, earlier = search(k - 1)
            if self.nodes[j].name in self.diverged:
                k, values = j, earlier.get(j)
        return self._result(k, values)

    def _steps(self, node, values: list) -> bool:
        """A discontinuous node whose value differs past tolerance (an integer result has no tol_ratio)."""
        close = self.symptoms.get(node.name)
        return is_discontinuous(node, values[0], values[1:]) and close is not None and not close.passed

    def _inputs_agree(self, node, values: list) -> bool:
        """Whether the target computes ``node``'s inputs no worse than the reference does, each side against the
        float64 oracle (``attribute``), or within a reduction's error bound: two orders of a long dot product
        may be tolerances apart and equally near the exact result."""
        ins = tensor_inputs(node, self.ref)
        if not ins:
            return True
        if attribute(values[1:], [self.ref[a.name] for a in ins], [self.oracle[a.name] for a in ins],
                     self.s).verdict != Verdict.TARGET_DIVERGENT:
            return True
        return all(node_within_bound(a, v, self.oracle, self.s) is not None or
                   compare([v], [self.ref[a.name]], self.s).passed for a, v in zip(ins, values[1:]))

    def _explained(self, node, values: list | None) -> dict:
        """What explains the divergence at the located ``node`` (its target value and inputs ``values``):
        amplified rounding, a reduction's order, or nothing."""
        if not values:
            return {}
        if self._steps(node, values) and self._inputs_agree(node, values) and amplifies(values, self._ref_of(node)):
            return {"amplified": True, "amplifier_node": node.name, "explanation": str(Explanation.AMPLIFIED)}
        ratio = node_within_bound(node, values[0], self.oracle, self.s) if self._inputs_agree(node, values) else None
        if ratio is not None:
            return {"amplified": False, "explanation": str(Explanation.REDUCTION_ORDER), "explain_ratio": ratio}
        return {"amplified": False}

    def _ref_of(self, node) -> list:
        return [self.ref[node.name], *[self.ref[a.name] for a in tensor_inputs(node, self.ref)]]

    def _result(self, k: int, values: list | None) -> dict:
        node = self.nodes[k]
        result = {"first_div_node": node.name, "first_div_op": str(node.target), "align_prepares": self.prepares}
        close = self.symptoms.get(node.name)
        if values and close is not None and not close.passed:
            result.update(node_symptom=str(close.symptom), node_dtype=close.output_dtype)
        result.update(self._explained(node, values))
        order = {n.name: i for i, n in enumerate(self.nodes)}
        points = sorted(self.growth.items(), key=lambda kv: order[kv[0]])
        if len(points) > GROWTH_POINTS:
            step = len(points) / GROWTH_POINTS
            points = [points[int(i * step)] for i in range(GROWTH_POINTS)]
        result["div_growth"] = json.dumps([[n, str(self.nodes[order[n]].target), round(r, 6)] for n, r in points])
        return result


def ask(fn, *args):
    """Call a ledger's method in this process, or on the campaign's Ray actor."""
    if hasattr(fn, "remote"):
        import ray

        return ray.get(fn.remote(*args))
    return fn(*args)
