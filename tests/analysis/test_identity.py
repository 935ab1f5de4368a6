"""One defect, one cluster, by the located node: its symptom and op are identity, the model's output
(its dtype, whether its top-1 changed) is severity; an input the stack receives wrong is located at
the input; eager's own quirks are filed against PyTorch when independent stacks agree; the
reference's own failures are no finding."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from gapfuzz.analysis.clusters import clusters
from gapfuzz.core.bugs import Kind, Stage, Status, Symptom, Verdict, bug_key
from gapfuzz.core.failures import Failure
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.judge.consensus import find_consensus, numpy_outputs


def _div(**kw) -> dict:
    row = {"campaign": "c", "variant_id": "ops/relu/float32/0#0", "seed_id": "ops/relu/float32/0",
           "backend": "openvino@cpu", "stack": "openvino", "device": "cpu", "status": "mismatch", "stage": "compare",
           "verdict": "target-divergent", "symptom": "nonfinite", "first_div_op": "aten.relu.default",
           "node_symptom": "nonfinite", "output_dtype": "float32", "probe": "special:nan", "tol_ratio": None,
           "task_agree": None, "node_count": 3, "mutations": [], "ops": ["aten.relu.default"]}
    row.update(kw)
    return row


def test_the_located_nodes_symptom_is_identity_and_the_models_is_severity():
    """OpenVINO's relu turning NaN into 0, seen at three output dtypes and as a changed top-1 on a model:
    one cluster listing its dtypes (the default campaign's three clusters of 2026-11)."""
    rows = [_div(output_dtype=d, variant_id=f"ops/relu/{d}/0#0", seed_id=f"ops/relu/{d}/0")
            for d in ("float32", "float16", "bfloat16")]
    rows.append(_div(variant_id="timm/test_resnet#2", seed_id="timm/test_resnet", symptom="numeric", task_agree=0.0))
    c = clusters(pd.DataFrame(rows))
    assert len(c) == 1, c[["cluster", "symptom", "output_dtype"]]
    assert sorted(c.iloc[0]["output_dtypes"]) == ["bfloat16", "float16", "float32"]
    assert c.iloc[0]["level"] == "wrong answer" and c.iloc[0]["symptom"] == Symptom.NONFINITE


def test_the_dtype_is_identity_only_where_the_op_passes_at_another_dtype():
    """A float16-only kernel defect: the same seed and probe pass at float32 on the same stack."""
    f16 = _div(output_dtype="float16", variant_id="ops/relu/float32/0#1")
    ok = _div(status="ok", verdict="agree", symptom=None, first_div_op=None, node_symptom=None, stage=None)
    other = _div(output_dtype="bfloat16", variant_id="ops/x/bfloat16/0#0", seed_id="ops/x/bfloat16/0",
                 first_div_op="aten.exp.default")
    c = clusters(pd.DataFrame([f16, ok, other]))
    assert sorted(c["output_dtype"]) == ["-", "float16"]  # the exp divergence: no passing dtype, no dtype in its key
    assert bug_key(f16) == bug_key({**f16, "output_dtype": "bfloat16"})  # a record alone: no dtype in the key
    # a 2 % fault hides in bfloat16's tolerance
    loose = _div(status="ok", verdict="agree", symptom=None, first_div_op=None, node_symptom=None, stage=None,
                 output_dtype="bfloat16", variant_id="ops/relu/float32/0#2")
    c = clusters(pd.DataFrame([_div(variant_id="ops/relu/float32/0#1"), loose]))
    assert c["output_dtype"].tolist() == ["-"]


def test_an_input_the_stack_receives_wrong_is_one_place_whatever_reads_it():
    a = bug_key(_div(first_div_op="input:non-contiguous", node_symptom="numeric", symptom="numeric"))
    b = bug_key(_div(first_div_op="input:non-contiguous", node_symptom="numeric", symptom="nonfinite",
                     output_dtype="float16"))
    assert a == b and a["first_div_op"] == "input:non-contiguous"


def _outcome(backend: str, verdict=Verdict.TARGET_DIVERGENT, symptom=Symptom.NONFINITE) -> RunRecord:
    return RunRecord(campaign="", variant_id="", seed_id="", backend=backend, stack=backend.split("@")[0],
                     device="cpu", status=Status.OK, verdict=verdict, symptom=symptom)


def _judged(o: RunRecord) -> dict:
    """The columns the judge and the consensus set."""
    return {k: getattr(o, k) for k in ("verdict", "symptom", "consensus", "numpy_agrees")}


def test_stacks_that_agree_against_eager_file_one_cluster_for_pytorch():
    nan = float("nan")
    runs = [_outcome("onnxruntime@cpu"), _outcome("openvino@cpu"), _outcome("openvino-f32@cpu")]
    runs[2].stack = "openvino"
    stacks = {"onnxruntime@cpu": "onnxruntime", "openvino@cpu": "openvino", "openvino-f32@cpu": "openvino"}
    answer = [torch.tensor([nan, 1.0, -1.0])]
    outputs = dict.fromkeys(stacks, answer)
    x = torch.tensor([nan, 2.0, -3.0])
    gm = torch.fx.symbolic_trace(lambda t: torch.ops.aten.sign.default(t))
    assert torch.equal(numpy_outputs(gm, (x,))[0].isnan(), answer[0].isnan())
    find_consensus(runs, outputs, stacks, Tolerances(), lambda: numpy_outputs(gm, (x,)))
    assert {o.verdict for o in runs} == {Verdict.REFERENCE_SUSPECT}
    assert runs[0].consensus == "onnxruntime,openvino" and runs[0].numpy_agrees is True
    keys = {bug_key({**_div(), "backend": o.backend, "stack": o.stack, **_judged(o)}) for o in runs}
    assert len(keys) == 1 and next(iter(keys))["stack_device"] == "pytorch"
    bisected = bug_key({**_div(), **_judged(runs[0]), "culprit": "inductor:decomposition:aten.grid_sampler_2d.default"})
    assert bisected == next(iter(keys))  # PyTorch's behaviour: the pass that shows it is not another bug


def test_numpy_siding_with_eager_keeps_a_shared_defect_on_the_targets():
    nan = float("nan")
    runs = [_outcome("a@cpu"), _outcome("b@cpu")]
    outputs = dict.fromkeys(("a@cpu", "b@cpu"), [torch.tensor([0.0, 1.0])])  # relu(nan) = 0 on both
    gm = torch.fx.symbolic_trace(lambda t: torch.ops.aten.relu.default(t))
    find_consensus(runs, outputs, {"a@cpu": "a", "b@cpu": "b"}, Tolerances(),
                   lambda: numpy_outputs(gm, (torch.tensor([nan, 1.0]),)))
    assert {o.verdict for o in runs} == {Verdict.TARGET_DIVERGENT}


def test_a_nan_grid_coordinate_agrees_by_where_the_answer_is_finite():
    """grid_sample at a NaN coordinate: eager NaN, Inductor -0.0 and ONNX Runtime 0.09 there (2026-12)."""
    runs = [_outcome("inductor@cpu"), _outcome("onnxruntime@cpu"), _outcome("openvino@cpu", Verdict.AGREE, None)]
    outputs = {"inductor@cpu": [torch.tensor([-0.0, 0.1007])], "onnxruntime@cpu": [torch.tensor([0.0903, 0.1007])],
               "openvino@cpu": [torch.tensor([float("nan"), 0.1007])]}
    find_consensus(runs, outputs, {b: b.split("@")[0] for b in outputs}, Tolerances(), lambda: None)
    assert [o.verdict for o in runs] == [Verdict.REFERENCE_SUSPECT] * 2 + [Verdict.AGREE]
    assert runs[0].numpy_agrees is None


def test_the_references_own_failures_are_skipped_not_clustered():
    from gapfuzz.fuzzer.builds import SeedBuild
    from gapfuzz.fuzzer.records import seed_failure_record

    build = SeedBuild(seed_id="ops/nonzero/float32/0", failure=Failure(
        Status.ERROR, Stage.CAPTURE, "DataDependentOutputException", "aten.nonzero.default"))
    rec = seed_failure_record("c", build, "eager@cpu", "cpu", "ops/nonzero/float32/0#failed")
    assert rec.status == Status.SKIPPED and "DataDependent" in rec.error_type
    assert bug_key(rec.to_row()) is None
    lost = SeedBuild(seed_id="timm/x", failure=Failure.lost(RuntimeError("gone"), Stage.CAPTURE))
    assert seed_failure_record("c", lost, "eager@cpu", "cpu", "timm/x#failed").status == Status.ERROR


TAIL = "pools: {cpu: {workers: 2}}\nrun: {repeats: 1}\n"  # every campaign here: two workers, one timed run

PLANTED = """
name: identity
seed: 0
seeds:
  - {source: ops, include: ["ops/nn.functional.relu/float32/0", "ops/nn.functional.relu/float16/0",
                            "ops/nn.functional.relu/bfloat16/0", "ops/nn.functional.relu/float64/0",
                            "ops/tanh/float32/0", "ops/tanh/float16/0", "ops/add/int32/0", "ops/add/int64/0"]}
  - {source: timm, include: [test_resnet]}
variants: {per_seed: 3, mutations: 1, mutators: [semantic, precision]}
sizes: {per_seed: 0, widths: 0}
probes: {per_variant: 6}
backends:
  targets: [{class: "tests.stacks.planted_backend:PlantedFaults", device: cpu}]
"""


LAYOUT = """
name: layout
seed: 0
seeds:
  - {source: ops, include: ["ops/var/float32/0", "ops/add/float32/0", "ops/mul/float32/0", "ops/exp/float32/0"]}
variants: {per_seed: 3, mutations: 1, mutators: [strided_input]}
sizes: {per_seed: 0, widths: 0}
probes: {per_variant: 1}
backends:
  targets: [{class: "tests.stacks.repro_backends:IgnoresStrides", device: cpu}]
"""


SIGN = """
name: sign
seed: 0
seeds:
  - {source: ops, include: ["ops/sign/float32/0", "ops/sign/float16/0"]}
variants: {per_seed: 1}
sizes: {per_seed: 0, widths: 0}
probes: {per_variant: 8, kinds: [special]}
backends:
  targets: [onnxruntime@cpu, openvino@cpu]
"""





def _run(text: str, folder):
    from gapfuzz.analysis.api import load_run
    from gapfuzz.core.strict_yaml import load
    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.fuzzer.driver import Driver

    text += TAIL
    c = from_dict(load(text, "t"), "t")
    Driver(c, folder, progress=False).run()
    (folder / "campaign.yaml").write_text(text)  # as gapfuzz run leaves it: gapfuzz repro reads it
    return load_run(folder)


@pytest.mark.ray
def test_planted_faults_are_one_cluster_each_at_every_dtype_and_in_a_model(tmp_path, local_ray):
    run = _run(PLANTED, tmp_path / "planted")
    found = run.clusters()
    where = found["failing_op"].where(found["kind"] == Kind.FAILURE, found["first_div_op"])
    per_fault = where.value_counts()
    shown = found[["cluster", "kind", "symptom", "first_div_op", "output_dtypes", "count"]]
    assert per_fault.get("aten.relu.default") == 1 and per_fault.get("aten.tanh.default") == 1, shown
    assert per_fault.get("aten.add.Tensor") == 1, shown
    assert len(found) / len(per_fault) <= 1.1, shown
    relu = found[where == "aten.relu.default"].iloc[0]
    assert {"float32", "float16"} <= set(relu["output_dtypes"]), relu


@pytest.mark.slow  # 40-110 s; a faster test of the default set guards its main behaviour
@pytest.mark.ray
def test_a_stack_that_ignores_strides_is_located_at_the_input(tmp_path, local_ray):
    run = _run(LAYOUT, tmp_path / "layout")
    found = run.clusters()
    assert len(found) == 1, found[["cluster", "first_div_op", "ops", "count"]]
    assert found.iloc[0]["first_div_op"] == "input:non-contiguous" and found.iloc[0]["seeds"] >= 2
    runs = run.records(["first_div_node", "verdict"])
    located = runs[runs["verdict"] == Verdict.TARGET_DIVERGENT]["first_div_node"].dropna()
    assert located.str.startswith("input:").all() and len(located)
    from gapfuzz.fuzzer.repro.minimise import reproduce_cluster

    result = reproduce_cluster(tmp_path / "layout", found.iloc[0]["cluster"], max_calls=30, allow_plugins=True)
    assert result.status == "reproducible" and result.failures == result.tries == 3, result


@pytest.mark.slow  # about 50 s; tests/workers/test_releases.py guards the reference-suspect verdict
@pytest.mark.ray
def test_sign_at_nan_is_one_reference_suspect_cluster(tmp_path, local_ray):
    run = _run(SIGN, tmp_path / "sign")
    found = run.clusters()
    suspect = found[found["verdict"] == Verdict.REFERENCE_SUSPECT]
    assert len(suspect) == 1 and not suspect.iloc[0]["vendor"], found[["cluster", "verdict", "backends"]]
    assert sorted(suspect.iloc[0]["backends"]) == ["onnxruntime@cpu", "openvino@cpu"]
    assert bool(suspect.iloc[0]["numpy_agrees"])
    # ONNX Runtime refuses float16 sign: OpenVINO alone there is the behaviour it agreed on at float32
    assert set(suspect.iloc[0]["output_dtypes"]) == {"float32", "float16"}
    assert not found["vendor"].any(), found[["cluster", "verdict", "backends", "first_div_op"]]


ZERO_DIVISION = """
name: zdiv
seed: 0
seeds:
  - {source: ops, include: ["ops/remainder/int32/0"]}
variants: {per_seed: 1}
sizes: {per_seed: 0, widths: 0}
probes: {per_variant: 8, kinds: [integer]}
backends:
  targets: [{class: "tests.stacks.repro_backends:IgnoresStrides", device: cpu}]
"""



@pytest.mark.slow  # CI's time: the excuse itself is tested in test_probes; run with -m slow
@pytest.mark.ray
def test_a_probe_eager_raises_on_is_skipped_for_every_backend_and_no_cluster(tmp_path, local_ray):
    run = _run(ZERO_DIVISION, tmp_path / "zdiv")
    runs = run.records(["backend", "status", "message"])
    skipped = runs[runs["status"] == Status.SKIPPED]
    assert set(skipped["backend"]) == {"eager@cpu", "eager-fp64@cpu", "ignores-strides@cpu"}
    assert skipped["message"].str.contains("ZeroDivisionError").all()
    assert run.clusters().empty
