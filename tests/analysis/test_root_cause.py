"""One defect, one cluster: planted faults each become exactly one cluster, a reordered sum none; the
explanation hypotheses hold where they should and not where they should not; merging, impact and
known issues."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from gapfuzz.core.bugs import Explanation, Kind, Symptom, Verdict
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.workers.judge.compare import compare
from gapfuzz.workers.judge.emulate import emulate, round_tf32
from gapfuzz.workers.judge.explain import declared, explain, hypotheses, measure
from tests.conftest import shared_ray

PLANTED = """
name: planted-faults
seed: SEED
seeds:
  - {source: ops, include: ["ops/nn.functional.silu/float32/0", "ops/tanh/float32/0", \
"ops/nn.functional.relu/float32/0",
                            "ops/add/int32/0", "ops/sum/float32/0"]}
variants: {per_seed: 3, mutations: 1, mutators: [semantic]}
sizes: {per_seed: 1, widths: 0}
backends:
  targets: [{class: "tests.stacks.planted_backend:PlantedFaults", device: cpu}]
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.mark.slow  # 40-110 s; a faster test of the default set guards its main behaviour
@pytest.mark.ray
def test_each_planted_fault_is_one_cluster_and_a_reordered_sum_none(tmp_path):

    from gapfuzz.analysis.api import load_run
    from gapfuzz.core.strict_yaml import load
    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.fuzzer.driver import Driver

    tight = "compare: {tolerances: {float32: [1.0e-8, 1.0e-9]}, multiplier: 1.0}\n"  # the reordered sum shows
    shared_ray()  # the session's embedded Ray (conftest)
    for seed, extra in ((0, ""), (1, ""), (0, tight)):
        c = from_dict(load(PLANTED.replace("SEED", str(seed)) + extra, "planted"), "planted")
        folder = tmp_path / f"{seed}{'-tight' if extra else ''}"
        Driver(c, folder, progress=False).run()
        run = load_run(folder)
        found = run.clusters()
        where = sorted(found["failing_op"].where(found["kind"] == Kind.FAILURE, found["first_div_op"]))
        assert where == ["aten.add.Tensor", "aten.relu.default", "aten.silu", "aten.tanh.default"], \
            f"seed {seed}:\n{found[['cluster', 'kind', 'symptom', 'first_div_op', 'failing_op', 'count']]}"
        assert found["backends"].map(lambda b: b == ["planted@cpu"]).all()
        assert found["explanation"].isna().all()  # every planted fault stays unexplained: a defect
        symptoms = dict(zip(found["first_div_op"], found["symptom"]))
        assert symptoms["aten.relu.default"] == Symptom.NONFINITE
        assert symptoms["aten.add.Tensor"] == Symptom.INTEGER
        runs = run.records(["seed_id", "backend", "verdict", "explanation", "align_error", "first_div_op"])
        summed = runs[runs["seed_id"].str.startswith("ops/sum/") & (runs["backend"] == "planted@cpu")]
        divergent = summed[summed["verdict"].isin([Verdict.TARGET_DIVERGENT, Verdict.REFERENCE_DIVERGENT])]
        assert divergent["explanation"].isin([Explanation.REDUCTION_ORDER]).all()
        assert len(divergent) or not extra, "the tight tolerances should show the reordered sum"
        inherited = runs["align_error"].fillna("").str.startswith("not run: inherited from")
        assert runs.loc[inherited, "first_div_op"].notna().all()




def _graph(fn, *inputs):
    """An ATen graph of ``fn``, like a capture's."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn)(*inputs)


def _judged(target: list, reference: list, s: Tolerances) -> dict:
    c = compare(target, reference, s)
    return {"verdict": Verdict.TARGET_DIVERGENT, "symptom": c.symptom, "tol_ratio": c.tol_ratio}


def _explained(target, reference, gm, inputs, s, tf32=False, precisions=frozenset()):
    judged = _judged(target, reference, s)
    modes = hypotheses(judged["verdict"], tf32, set(precisions))
    return explain(judged["symptom"], target, reference, measure(emulate(gm, inputs, modes), reference, s), s)


def test_bfloat16_holds_for_a_stack_computing_in_it_and_not_for_a_constant_two_percent():
    s = Tolerances()
    torch.manual_seed(0)
    x, w = torch.randn(8, 64), torch.randn(64, 32)
    gm = _graph(lambda a, b: torch.tanh(a @ b), x, w)
    reference = [gm(x, w)]
    as_bf16 = [torch.tanh(x.bfloat16() @ w.bfloat16()).float()]
    bf16 = declared({"inference_precision": "<Type: 'bfloat16'>"}, {})
    assert bf16 == {Explanation.BFLOAT16} and declared({}, {"INFERENCE_PRECISION_HINT": "f32"}) == set()
    found = _explained(as_bf16, reference, gm, (x, w), s, precisions=bf16)
    assert found is not None and found[0] == Explanation.BFLOAT16
    assert _explained(as_bf16, reference, gm, (x, w), s) is None  # a stack that does not say it: a finding
    two_percent = [reference[0] * 1.02]
    assert _explained(two_percent, reference, gm, (x, w), s, precisions=bf16) is None


def test_reduction_order_holds_for_a_reordered_sum_and_tf32_for_rounded_matmul_inputs_with_tf32_on():
    s = Tolerances()
    torch.manual_seed(1)
    x = torch.randn(4, 4096) * 1e3
    gm = _graph(lambda a: a.sum(-1), x)
    reference = [gm(x)]
    reordered = [x.flip(-1).sum(-1)]
    if _judged(reordered, reference, s)["symptom"] is not None:  # a reordering beyond tolerance
        assert _explained(reordered, reference, gm, (x,), s)[0] == Explanation.REDUCTION_ORDER
    a, b = torch.randn(16, 256), torch.randn(256, 16)
    mm = _graph(lambda p, q: p @ q, a, b)
    reference = [mm(a, b)]
    tf32 = [round_tf32(a) @ round_tf32(b)]
    found = _explained(tf32, reference, mm, (a, b), s, tf32=True)
    assert found is not None and found[0] == Explanation.TF32
    assert _explained(tf32, reference, mm, (a, b), s, tf32=False) is None  # TF32 off: rounding is a finding


@pytest.mark.parametrize("seed_id", ["timm/test_resnet", "timm/test_vit"])
def test_emulations_of_a_real_model_keep_its_values_shapes_and_dtypes(seed_id):
    """Reordering a sum changes its rounding, never its value: on a real model it stays within tolerance;
    every hypothesis gives the outputs eager gives, shape for shape and dtype for dtype."""
    from gapfuzz.seeds import create_seed
    from gapfuzz.seeds.capture import capture
    from gapfuzz.workers.judge.explain import spread

    v = capture(create_seed(seed_id)).variant
    reference = torch.utils._pytree.tree_leaves(v.gm(*v.inputs))
    modes = (Explanation.REDUCTION_ORDER, Explanation.BFLOAT16, Explanation.TF32, Explanation.FLOAT32)
    emulated = emulate(v.gm, v.inputs, modes)
    for mode, outputs in emulated.items():
        assert outputs is not None, mode
        assert [(t.shape, t.dtype) for t in outputs] == [(t.shape, t.dtype) for t in reference], mode
    assert spread(emulated[Explanation.REDUCTION_ORDER], reference, Tolerances())[0] < 1.0
    assert spread(emulated[Explanation.BFLOAT16], reference, Tolerances())[0] > 10.0


def test_a_half_graph_computed_in_float32_explains_a_less_exact_reference():
    s = Tolerances()
    torch.manual_seed(2)
    x, w = torch.randn(8, 256).half(), torch.randn(256, 64).half()
    gm = _graph(lambda a, b: torch.tanh(a @ b) * 3 + a.sum(-1, keepdim=True), x, w)
    reference = [gm(x, w)]
    wide = [(torch.tanh(x.float() @ w.float()) * 3 + x.float().sum(-1, keepdim=True)).half()]
    judged = _judged(wide, reference, s)
    judged["verdict"] = Verdict.REFERENCE_DIVERGENT  # float64 blames eager's float16 rounding
    if judged["symptom"] is not None:
        emulated = emulate(gm, (x, w), hypotheses(judged["verdict"], False, set()))
        found = explain(judged["symptom"], wide, reference, measure(emulated, reference, s), s)
        assert found is not None and found[0] == Explanation.FLOAT32


def test_ledger_cases_hand_their_location_to_later_runs():
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.workers.judge.align import AlignLedger, Location

    ledger = AlignLedger()
    assert ledger.claim("seed|d-1", "v#0") is None
    busy = ledger.claim("seed|d-1", "v#1")
    record = RunRecord(campaign="", variant_id="v#1", seed_id="", backend="inductor@cpu")
    busy.inherit(record)
    assert record.align_error == "not run: being located on v#0" and record.first_div_op is None
    ledger.settle("seed|d-1", Location("v#0", "tanh", "aten.tanh.default"))
    record = RunRecord(campaign="", variant_id="v#2", seed_id="", backend="inductor@cpu")
    ledger.claim("seed|d-1", "v#2").inherit(record)
    assert record.first_div_op == "aten.tanh.default" and record.first_div_node == "tanh"
    assert record.align_error.startswith("not run: inherited from v#0")


def _rec(**kw) -> dict:
    row = {"campaign": "c", "variant_id": "s#0", "seed_id": "s", "seed_source": "timm", "family": "f",
           "backend": "openvino@cpu", "stack": "openvino", "device": "cpu", "status": "mismatch", "stage": "compare",
           "error_type": None, "message": None, "cause": None, "verdict": "target-divergent", "symptom": "numeric",
           "first_div_op": "aten.conv2d.default", "output_dtype": "float32", "tol_ratio": 50.0, "task_agree": 1.0,
           "node_count": 10, "mutations": [], "probe": "example", "align_error": None, "explanation": None,
           "backend_options": "{}"}
    row.update(kw)
    return row


def test_band_is_severity_not_identity_and_ledger_skipped_runs_join_the_located_cluster():
    from gapfuzz.analysis.clusters import clusters

    rows = [_rec(tol_ratio=5.0), _rec(variant_id="s#1", tol_ratio=5e4),
            _rec(variant_id="s#2", first_div_op=None, align_error="not run: located on s#0 at aten.conv2d.default"),
            _rec(variant_id="s#3", first_div_op=None, probe="ties",
                 align_error="not run: left to probe example of this variant and backend")]
    c = clusters(pd.DataFrame(rows))
    assert len(c) == 1 and c["count"].iloc[0] == 4 and c["inherited"].iloc[0] == 2 and c["band"].iloc[0] == "1e4"


def test_a_behaviour_is_one_cluster_over_ops_dtypes_and_seeds_and_benign_ones_stand_apart():
    from gapfuzz.analysis.clusters import clusters

    rows = [_rec(explanation="bfloat16"), _rec(variant_id="t#0", seed_id="t", first_div_op="aten.linear.default",
                                                output_dtype="float16", explanation="bfloat16", tol_ratio=3e3),
            _rec(variant_id="u#0", seed_id="u", first_div_op="aten.max_pool2d.default"),
            _rec(variant_id="w#0", seed_id="w", backend="inductor@cpu", stack="inductor",
                 explanation="reduction-order", first_div_op="aten.sum.dim_IntList"),
            _rec(variant_id="w#0", seed_id="w", backend="onnxruntime@cpu", stack="onnxruntime",
                 verdict="ill-conditioned", status="mismatch")]
    c = clusters(pd.DataFrame(rows))
    kinds = c.groupby("kind").size().to_dict()
    assert kinds == {Kind.DISCREPANCY: 2, Kind.BENIGN: 2}
    bf16 = c[c["explanation"] == "bfloat16"].iloc[0]
    assert bf16["count"] == 2 and sorted(bf16["ops"]) == ["aten.conv2d.default", "aten.linear.default"]
    assert sorted(bf16["output_dtypes"]) == ["float16", "float32"] and bf16["seeds"] == 2 and not bf16["vendor"]
    assert pd.isna(c.iloc[0]["explanation"]) and c.iloc[0]["count"] == 1  # unexplained first, though smaller
    assert set(c.loc[c["kind"] == Kind.BENIGN, "explanation"]) == {"reduction-order", "ill-conditioned"}


def test_another_option_set_that_agrees_explains_a_divergence():
    from gapfuzz.analysis.clusters import clusters

    f32 = '{"INFERENCE_PRECISION_HINT": "f32"}'
    rows = [_rec(), _rec(backend="openvino-f32@cpu", verdict="agree", status="ok", backend_options=f32),
            _rec(variant_id="s#1", first_div_op="aten.gelu.default")]
    c = clusters(pd.DataFrame(rows))
    assert sorted(c["explanation"].fillna("-")) == ["-", "options"]
    tuned = '{"mode": "max-autotune"}'  # another label that differs in something else explains nothing
    rows = [_rec(), _rec(backend="openvino-tuned@cpu", verdict="agree", status="ok", backend_options=tuned)]
    assert clusters(pd.DataFrame(rows))["explanation"].isna().all()
    rows = [_rec(), _rec(backend="openvino@gpu", device="gpu", verdict="agree", status="ok")]
    assert clusters(pd.DataFrame(rows))["explanation"].isna().all()  # another device is another stack


def test_impact_counts_the_model_seeds_holding_a_clusters_ops_and_orders_by_it():
    from gapfuzz.analysis.clusters import clusters

    catalog = pd.DataFrame({"seed_id": ["timm/a", "timm/a@64", "timm/b", "ops/x/float32/0"],
                            "source": ["timm", "timm", "timm", "ops"], "status": ["ok"] * 4,
                            "ops": [["aten.conv2d.default", "aten.relu.default"], ["aten.conv2d.default"],
                                    ["aten.conv2d.default"], ["aten.erfinv.default"]]})
    rows = [_rec(first_div_op="aten.erfinv.default", variant_id="x#0", seed_id="ops/x/float32/0", tol_ratio=5e5),
            _rec(first_div_op="aten.conv2d.default"), _rec(first_div_op="aten.relu.default", variant_id="a#1")]
    c = clusters(pd.DataFrame(rows), catalog=catalog)
    assert list(c["first_div_op"]) == ["aten.conv2d.default", "aten.relu.default", "aten.erfinv.default"]
    assert list(c["impact"]) == [2.0, 1.0, 0.0]


def test_clusters_whose_minimised_reproducers_match_merge(tmp_path):
    from gapfuzz.analysis.merge import merge, minimised

    c = pd.DataFrame({"cluster": ["d-1", "d-2", "d-3"], "kind": ["discrepancy"] * 3, "count": [5, 3, 1],
                      "variants": [2, 1, 1], "unmutated": [0, 0, 0], "inherited": [0, 0, 0], "seeds": [1, 1, 1],
                      "seed_ids": [["a"], ["b"], ["c"]], "families": [[]] * 3, "backends": [["x@cpu"]] * 3,
                      "probes": [[]] * 3, "ops": [["aten.linear.default"], ["aten.addmm.default"], []],
                      "output_dtypes": [[]] * 3, "mutations": [[]] * 3, "vendor": [True] * 3,
                      "max_tol_ratio": [1.0] * 3})
    for cid, ops in (("d-1", ["aten.addmm.default"]), ("d-2", ["aten.addmm.default"]), ("d-3", ["aten.mm.default"])):
        (tmp_path / cid).mkdir()
        (tmp_path / cid / "shrink.json").write_text(json.dumps(
            {"status": "reproducible", "stack": "x@cpu", "kind": "discrepancy", "symptom": "numeric", "ops": ops}))
    out = merge(c, minimised(tmp_path))
    assert list(out["cluster"]) == ["d-1", "d-3"] and out["merged"].iloc[0] == ["d-2"]
    assert out["count"].iloc[0] == 8 and out["seeds"].iloc[0] == 2


def test_known_issues_mark_clusters_and_diff_tells_known_from_new(tmp_path):
    from gapfuzz.analysis.known import KnownIssues
    from gapfuzz.analysis.triage import diff
    from gapfuzz.results.store import ResultsError

    f = tmp_path / "known.yaml"
    f.write_text("_known:\n  - name: ov-bf16\n    class: documented\n    where: {backends: 'openvino@cpu', "
                 "explanation: bfloat16}\n")
    known = KnownIssues.load(f)
    after = pd.DataFrame({"cluster": ["d-1", "d-2"], "kind": ["discrepancy"] * 2, "backends": [["openvino@cpu"]] * 2,
                          "explanation": ["bfloat16", None], "count": [3, 1], "severity": [2, 2]})
    after["known"] = known.match(after)
    assert list(after["known"]) == ["ov-bf16", None]
    d = diff(after.iloc[:0], after)
    assert dict(zip(d["cluster"], d["state"])) == {"d-1": "known", "d-2": "new"}
    f.write_text("_known:\n  - name: x\n    class: documented\n    where: {backend: 'openvino@cpu'}\n")
    with pytest.raises(ResultsError, match=r"unknown cluster column 'backend' \(did you mean 'backends'\?\)"):
        KnownIssues.load(f)
    f.write_text("d-0123456789: {class: defct}\n")
    with pytest.raises(ResultsError, match="did you mean 'defect'"):
        KnownIssues.load(f)
