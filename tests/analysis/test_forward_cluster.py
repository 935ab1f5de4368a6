"""A forward defect seen in training is one cluster with its gradients: a gradient divergence at a node
whose forward value diverges (on its own run, or on the stack's forward runs of the same seed) is keyed
as that forward defect, and a matrix product is keyed by its kernel whether a graph held linear or mm.
A backward-only defect stays a gradient cluster of its own."""
from __future__ import annotations

import pytest
import torch

from gapfuzz.core.bugs import Kind, Symptom, Verdict, bug_key
from gapfuzz.core.modes import Mode

aten = torch.ops.aten
BOTH = """
name: forward-and-backward
seed: 0
mode: [inference, training]
seeds:
  - {source: ops, include: ["ops/nn.functional.linear/float32/0", "ops/mm/float32/0", "ops/tanh/float32/0"]}
variants: {per_seed: 1}
sizes: {per_seed: 0, widths: 0}
probes: {per_variant: 3}
backends:
  targets: [{class: "tests.stacks.forward_backends:ScaledMatmulForward", device: cpu},
            {class: "tests.stacks.planted_backward:WrongTanhBackward", device: cpu}]
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


def _divergence(**columns) -> dict:
    return {"backend": "s@cpu", "stack": "s", "device": "cpu", "status": "mismatch", "output_dtype": "float32",
            "verdict": Verdict.TARGET_DIVERGENT, "tol_ratio": 50.0, **columns}


def test_a_gradient_whose_node_forward_diverges_is_keyed_as_that_forward_defect_at_its_kernel():
    forward = bug_key(_divergence(symptom="numeric", first_div_op="aten.linear.default", node_symptom="numeric"))
    at_mm = bug_key(_divergence(symptom="numeric", first_div_op="aten.mm.default", node_symptom="numeric"))
    gradient = bug_key(_divergence(symptom="grad", first_div_op="aten.addmm.default", node_symptom="numeric"))
    backward_only = bug_key(_divergence(symptom="grad", first_div_op="aten.linear.default"))
    assert forward == at_mm == gradient and forward["first_div_op"] == "aten.mm.default"
    assert backward_only != forward and backward_only["symptom"] == Symptom.GRAD
    conv = bug_key(_divergence(symptom="numeric", first_div_op="aten.conv2d.default", node_symptom="numeric"))
    assert conv["first_div_op"] == "aten.conv2d.default"  # other ops are keyed by themselves
    assert forward.shown_by(gradient, ["aten.linear.default"])  # the reducer finds the kernel under either name
    assert not forward.shown_by(gradient, ["aten.conv2d.default"])
    # one kernel, one key: a batched or broadcast product is mm's; a reduction's min is its max's
    for one, other in (("matmul", "mm"), ("bmm", "mm"), ("argmin", "argmax"), ("amin", "amax")):
        keys = [bug_key(_divergence(symptom="numeric", first_div_op=f"aten.{op}.default", node_symptom="numeric"))
                for op in (one, other)]
        assert keys[0] == keys[1], (one, other)
    assert bug_key(_divergence(symptom="numeric", first_div_op="aten.min.dim")) == \
        bug_key(_divergence(symptom="numeric", first_div_op="aten.max.dim"))


def _run(**columns) -> dict:
    row = {"variant_id": "s#0:train", "seed_id": "s", "backend": "s@cpu", "stack": "s", "device": "cpu",
           "status": "mismatch", "stage": "compare", "verdict": "target-divergent", "symptom": "grad",
           "first_div_op": "aten.linear.default", "node_symptom": None, "output_dtype": "float32", "tol_ratio": 50.0,
           "probe": "special:nan:single", "mode": "training", "worst_output": "grad:w", "explanation": None}
    return {**row, **columns}


def test_a_gradient_joins_the_forward_divergence_of_its_stack_op_and_seed_and_no_other():
    import pandas as pd

    from gapfuzz.analysis.clusters import clusters

    forward = dict(variant_id="s#0", mode="inference", probe="example", symptom="numeric", node_symptom="numeric",
                   first_div_op="aten.mm.default", worst_output="out")
    rows = [_run(**forward), _run(),  # a NaN probe hid the forward: the seed's other probes show it
            _run(seed_id="t", variant_id="t#0:train"),  # another seed: no forward divergence there
            _run(backend="b@cpu", stack="b"),  # another stack
            _run(**{**forward, "seed_id": "u", "variant_id": "u#0", "node_symptom": "nonfinite", "probe": "x"}),
            _run(seed_id="u", variant_id="u#0:train")]  # a NaN/Inf-pattern forward shows on its own probe alone
    c = clusters(pd.DataFrame(rows))
    # the forward defect at the mm kernel: s's numeric forward, the gradient it joined, and u's NaN/Inf forward
    joined = c[c["symptoms"].map(lambda v: Symptom.NUMERIC in v)].iloc[0]
    assert joined["count"] == 3 and joined["seed_ids"] == ["s", "u"] and joined["modes"] == ["inference", "training"]
    assert joined["symptoms"] == ["numeric", "nonfinite"] and joined["symptom"] == Symptom.NONFINITE  # the worst
    assert joined["grad_at"] == ["grad:w"] and sorted(joined["ops"]) == ["aten.linear.default", "aten.mm.default"]
    apart = c[c["symptom"] == Symptom.GRAD]
    assert sorted(map(sorted, apart["seed_ids"])) == [["s"], ["t", "u"]]  # stack b on s; stack s on t and u
    assert (apart["modes"].map(tuple) == ("training",)).all() and len(c) == 3  # u's gradient: a NaN probe hid it


def _linear_tanh():
    torch.manual_seed(0)
    root = torch.nn.Module()
    root.register_parameter("w", torch.nn.Parameter(torch.randn(3, 4), requires_grad=False))
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(aten.linear.default, (x, g.get_attr("w")))
    g.output((g.call_function(aten.tanh.default, (y,)),))
    return torch.fx.GraphModule(root, g), (torch.randn(2, 4),)


@pytest.mark.parametrize("stack, op, forward", [("forward_backends:ScaledMatmulForward", "aten.linear.default", True),
                                                ("planted_backward:WrongTanhBackward", "aten.tanh.default", False)])
def test_the_gradient_aligner_says_whether_the_located_nodes_forward_diverged(stack, op, forward):
    from gapfuzz.core.ir import Variant
    from gapfuzz.core.tolerances import Tolerances
    from gapfuzz.workers.judge.grad_align import GradAligner
    from gapfuzz.workers.run.registry import load_class

    gm, inputs = _linear_tanh()
    cls = load_class(f"tests.stacks.{stack}")
    where = GradAligner(Variant(gm, inputs, ("out",), mode=Mode.TRAINING), cls, "cpu", "cpu", Tolerances(),
                        ["grad:w"]).locate()
    assert where["first_div_op"] == op
    assert where.get("node_symptom") == (Symptom.NUMERIC if forward else None), where


@pytest.mark.slow  # about 35 s; tests/analysis/test_one_cluster.py guards the keys of a forward and a backward fault
@pytest.mark.ray
def test_a_forward_matmul_fault_is_one_cluster_with_its_gradients_and_a_backward_fault_stays_apart(tmp_path, local_ray):
    from tests.conftest import run_campaign

    run = run_campaign(BOTH, tmp_path / "run")
    found = run.clusters(vendor=True)
    by_backend = {b: found[found["backends"].map(lambda v, b=b: b in v)] for b in
                  ("scaled-matmul-forward@cpu", "wrong-tanh-backward@cpu")}
    shown = found[["cluster", "symptom", "first_div_op", "modes", "ops", "grad_at", "backends"]]
    forward = by_backend["scaled-matmul-forward@cpu"]
    assert len(forward) == 1 and len(found) == 2, shown
    cluster = forward.iloc[0]
    assert cluster["modes"] == ["inference", "training"] and cluster["symptom"] == Symptom.NUMERIC
    assert {"aten.linear.default", "aten.mm.default"} <= set(cluster["ops"]), shown
    assert cluster["grad_at"] and all(g.startswith("grad:") for g in cluster["grad_at"]), shown
    records = run.cluster(cluster["cluster"], ["mode", "symptom"])
    assert (records["symptom"] == Symptom.GRAD).any()  # gradient runs that the forward hid from its outputs joined
    backward = by_backend["wrong-tanh-backward@cpu"].iloc[0]
    assert backward["kind"] == Kind.DISCREPANCY and backward["symptom"] == Symptom.GRAD
    assert backward["first_div_op"] == "aten.tanh.default" and backward["modes"] == ["training"]
    assert backward["grad_at"]
