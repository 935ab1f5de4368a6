"""One defect, one cluster: a located node's defect is one key whatever symptom its runs showed (a
NaN on one probe, a numeric error on another, strict bits under tolerance), an op is keyed as the
kernel it runs, a node's unconcluded bisections take the pass its bisected runs name; and the guards
still hold (another stack, node, verdict, side, pass or failure template is another defect).
``triage --why`` says which of these made a cluster."""
from __future__ import annotations

import pandas as pd
import pytest

from gapfuzz.analysis.clusters import clusters
from gapfuzz.core.bugs import Kind, Symptom, bug_key, bug_key_list, bug_keys, kernel_op
from gapfuzz.core.key_parts import key_table

RELU = "aten.relu.default"


def _div(**kw) -> dict:
    row = {"variant_id": "ops/relu/float32/0#0", "seed_id": "ops/relu/float32/0", "backend": "s@cpu", "stack": "s",
           "device": "cpu", "status": "mismatch", "stage": "compare", "verdict": "target-divergent",
           "symptom": "numeric", "first_div_op": RELU, "node_symptom": "numeric", "output_dtype": "float32",
           "probe": "example", "tol_ratio": 50.0, "mode": "inference"}
    return {**row, **kw}


def _at_node(symptom: str, **kw) -> dict:
    return _div(symptom=symptom, node_symptom=symptom, **kw)


def test_a_located_nodes_symptoms_are_one_key_and_each_run_keeps_its_own():
    forward = [bug_key(_at_node(s)) for s in ("numeric", "nonfinite", "strict", "integer", "value")]
    assert len({k.id for k in forward}) == 1 and len(set(forward)) == 1
    assert forward[1]["symptom"] == Symptom.NONFINITE and forward[1].keyed("symptom") == Symptom.NUMERIC
    backward = [bug_key(_div(symptom=s, node_symptom=None)) for s in ("grad", "grad-nonfinite")]
    assert backward[0] == backward[1] and backward[0] != forward[0]  # the node's backward: another kernel
    p = "inductor:post_grad_passes:p"
    passes = [bug_key(_div(symptom=s, node_symptom=None, culprit=p)) for s in ("grad", "grad-nonfinite")]
    passes.append(bug_key(_at_node("nonfinite", culprit=p)))
    assert len(set(passes)) == 1  # a named pass is the defect, forward or backward
    # a numeric key keeps the id it had before symptoms folded
    assert bug_key(_at_node("numeric")).id == bug_key_list([_at_node("numeric")])[0].id
    # unlocated, the symptom is all there is to tell two divergences apart
    assert bug_key(_at_node("nonfinite", first_div_op=None)) != bug_key(_at_node("numeric", first_div_op=None))
    # a missing check and a wrong shape are not a wrong value
    assert bug_key(_at_node("shape")) != forward[0]


def test_the_guards_keep_two_defects_apart():
    base = bug_key(_at_node("nonfinite"))
    for other in (_at_node("nonfinite", stack="t", backend="t@cpu"),
                  _at_node("nonfinite", first_div_op="aten.gelu.default"),
                  _at_node("nonfinite", verdict="reference-divergent"),
                  _at_node("nonfinite", culprit="inductor:post_grad_passes:p")):
        assert bug_key(other) != base, other
    fail = {"backend": "s@cpu", "stack": "s", "device": "cpu", "status": "error", "stage": "compile",
            "error_type": "E", "message": "no kernel for aten.relu"}
    assert bug_key(fail) != bug_key({**fail, "message": "out of range in aten.relu"})


ONE_KERNEL = [("aten.linear.default", "aten.mm.default"), ("aten.addmm.default", "aten.mm.default"),
              ("aten.matmul.default", "aten.bmm.default"), ("aten.baddbmm.default", "aten.mm.default"),
              ("aten.argmin.default", "aten.argmax.default"), ("aten.amin.default", "aten.amax.default"),
              ("aten.min.dim", "aten.max.dim")]
ALIKE = [("aten.neg.default", "aten.abs.default"), ("aten.minimum.default", "aten.min.default"),
         ("aten.max.dim", "aten.max.default"), ("aten.conv2d.default", "aten.mm.default")]


@pytest.mark.parametrize("one, other", ONE_KERNEL)
def test_ops_of_one_kernel_are_one_key(one, other):
    assert bug_key(_at_node("numeric", first_div_op=one)) == bug_key(_at_node("nonfinite", first_div_op=other))


@pytest.mark.parametrize("one, other", ALIKE)
def test_ops_that_only_look_alike_stay_apart(one, other):
    assert kernel_op(one) != kernel_op(other)
    assert bug_key(_at_node("numeric", first_div_op=one)) != bug_key(_at_node("numeric", first_div_op=other))


def test_the_reducer_still_holds_a_reproducer_to_the_symptom_its_run_showed():
    nan = bug_key(_at_node("nonfinite"))
    candidate = {**_div(symptom="nonfinite"), "first_div_op": None, "node_symptom": None}
    assert nan.shown_by(bug_key(candidate), [RELU])
    assert not nan.shown_by(bug_key({**candidate, "symptom": "numeric"}), [RELU])


def test_the_vectorised_keys_are_the_one_key():
    records = [_at_node(s) for s in ("numeric", "nonfinite", "strict")] + [_div(symptom="grad", node_symptom=None)]
    table = bug_keys(key_table(records)).to_pylist()
    assert [r["cluster"] for r in table] == [k.id for k in bug_key_list(records)]
    assert [r["symptom"] for r in table] == ["numeric", "nonfinite", "strict", "grad"]
    assert [r["symptom_class"] for r in table] == ["numeric", "numeric", "numeric", "grad"]


def test_a_nodes_runs_are_one_cluster_that_lists_what_they_showed():
    rows = [_at_node("numeric", variant_id=f"v{i}") for i in range(3)] + \
        [_at_node("nonfinite", variant_id="n", probe="special:nan"),
         _at_node("strict", variant_id="b", probe="edge:nan-sign"),
         _at_node("strict", variant_id="x", first_div_op="aten.neg.default", seed_id="ops/neg/float32/0")]
    c = clusters(pd.DataFrame(rows))
    assert len(c) == 2, c[["cluster", "symptom", "symptoms", "ops"]]
    relu = c[c["ops"].map(lambda v: RELU in v)].iloc[0]
    assert relu["count"] == 5 and relu["symptoms"][0] == "numeric" and set(relu["symptoms"]) == {
        "numeric", "nonfinite", "strict"}
    assert relu["symptom"] == Symptom.NONFINITE and relu["level"] == "wrong answer"  # the worst describes it
    neg = c[c["ops"].map(lambda v: "aten.neg.default" in v)].iloc[0]
    assert neg["symptom"] == Symptom.STRICT and neg["level"] == "strict"  # strict alone stays its own class


def _bisected(**kw) -> dict:
    return _div(**{"culprit_layer": "optimiser", "culprit": "inductor:pre_grad_passes:p", **kw})


def _unconcluded(**kw) -> dict:
    return _div(bisect_error="over its 900 s budget after 40 compiles", variant_id="big#0", seed_id="big", **kw)


def test_a_nodes_unconcluded_bisection_takes_the_one_pass_its_bisected_runs_name():
    c = clusters(pd.DataFrame([_bisected(), _unconcluded()]))
    assert len(c) == 1 and c.iloc[0]["culprit"] == "inductor:pre_grad_passes:p" and c.iloc[0]["count"] == 2
    two = clusters(pd.DataFrame([_bisected(), _bisected(culprit="inductor:post_grad_passes:q", variant_id="w"),
                                 _unconcluded()]))
    assert len(two) == 3  # two passes at the node: which one is this run's is not known
    kernel = clusters(pd.DataFrame([_bisected(), _div(culprit_layer="kernel", variant_id="k"), _unconcluded()]))
    assert len(kernel) == 2  # the kernel itself was also found wrong there: no pass to give
    elsewhere = clusters(pd.DataFrame([_bisected(), _unconcluded(first_div_op="aten.gelu.default")]))
    assert len(elsewhere) == 2  # another node


def test_why_says_what_the_key_folded_and_what_it_keeps_apart(tmp_path):
    from gapfuzz.analysis.api import load_run
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.results.store import RecordStore

    rows = [_at_node("numeric", first_div_op="aten.linear.default"), _at_node("nonfinite", variant_id="n#0",
                                                                             first_div_op="aten.mm.default"),
            _at_node("strict", variant_id="b#0", first_div_op="aten.matmul.default"),
            _at_node("numeric", variant_id="t#0", stack="t", backend="t@cpu", first_div_op="aten.mm.default")]
    RecordStore(tmp_path).write([RunRecord(campaign="c", **r) for r in rows])
    run = load_run(tmp_path)
    found = run.clusters()
    assert len(found) == 2 and (found["kind"] == Kind.DISCREPANCY).all()
    mine = found[found["backends"].map(lambda v: "s@cpu" in v)].iloc[0]["cluster"]
    why = run.why(mine)
    assert "symptom        numeric (the class of what the node showed" in why
    assert "symptoms at the node, one defect whatever it showed: " in why and "nonfinite (1)" in why
    assert "strict runs joined the divergence past tolerance at the same node: 1" in why
    assert "ops keyed as one kernel, aten.mm.default: aten.linear.default, aten.matmul.default, aten.mm.default" in why
    assert "stack_device t@cpu (here s@cpu)" in why  # the other stack's cluster at the same kernel, kept apart
