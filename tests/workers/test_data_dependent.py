"""Data-dependent operators (nonzero, masked_select, x[mask], unique, item) are reached and judged:
Inductor compiles them whole, a wrong count is a shape divergence, and the mutator that inserts them
into real models keeps the graph valid on every stage. Their operator seeds are matrices, and the
order of their results reaches the output, so a stack that returns the right rows in the wrong order
is found."""
from __future__ import annotations

import random

import pytest
import torch
from torch._dynamo.utils import counters

from gapfuzz.core.bugs import Symptom, Verdict
from gapfuzz.core.ir import Variant
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.fuzzer.mutators import get_mutator
from gapfuzz.fuzzer.mutators.base import shape_of
from gapfuzz.fuzzer.mutators.data_dependent import FORMS
from gapfuzz.fuzzer.validate import evaluate
from gapfuzz.seeds import create_seed
from gapfuzz.seeds.capture import capture
from gapfuzz.seeds.sources import ops
from gapfuzz.seeds.sources.op_samples import sample_tensors
from gapfuzz.workers.backends.eager import EagerFp64
from gapfuzz.workers.backends.inductor import prepare_aot_eager, prepare_inductor
from gapfuzz.workers.judge.compare import attribute, compare
from gapfuzz.workers.judge.verdict import judge_outputs
from tests.conftest import shared_ray
from tests.stacks.data_dependent_backend import _nonzero_column_major
from tests.stacks.numeric_backends import _retargeted

MUTATOR = "inject_data_dependent"
aten = torch.ops.aten


# ---------------------------------------------------------------- comparison
def test_a_wrong_count_is_a_shape_divergence_and_indices_compare_exactly():
    x = torch.tensor([[0.0, 1.5], [2.0, 0.0], [0.0, 3.0]])
    ref = [torch.nonzero(x)]  # int64 indices, (3, 2)
    s = Tolerances()
    short = compare([ref[0][:-1]], ref, s)  # one index dropped
    assert short.symptom == Symptom.SHAPE and short.mismatched_outputs == 1
    assert compare([ref[0].reshape(-1)], ref, s).symptom == Symptom.SHAPE  # same values, another shape
    assert compare([ref[0][:0]], ref, s).symptom == Symptom.SHAPE  # nothing found
    off = ref[0].clone()
    off[-1, -1] += 1  # one index one off: no tolerance for integers
    assert compare([off], ref, s).symptom == Symptom.INTEGER
    assert compare([ref[0].clone()], ref, s).passed

    values, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
    unique = [values, inverse, counts]
    assert compare([values[1:], inverse, counts], unique, s).symptom == Symptom.SHAPE  # a value missing
    assert compare([values, inverse, counts + torch.tensor([0, 0, 0, 1])], unique, s).symptom == Symptom.INTEGER
    wrong_inverse = inverse.clone()
    wrong_inverse[0, 0] = 1
    assert compare([values, wrong_inverse, counts], unique, s).symptom == Symptom.INTEGER

    # attributed with the oracle, and as a record's columns: a target-divergent shape, never an exception
    oracle = [torch.nonzero(x.double())]
    v = attribute([ref[0][:-1]], ref, oracle, s)
    assert v.verdict == Verdict.TARGET_DIVERGENT and v.closeness.symptom == Symptom.SHAPE
    cols = judge_outputs([ref[0][:-1]], ref, oracle, s, "tensor", ["out"]).columns()
    assert cols["verdict"] == Verdict.TARGET_DIVERGENT and cols["symptom"] == Symptom.SHAPE
    floats = [torch.masked_select(x, x > 0)]
    cols = judge_outputs([floats[0][:-1]], floats, [floats[0].double()], s, "tensor", ["out"]).columns()
    assert cols["verdict"] == Verdict.TARGET_DIVERGENT and cols["symptom"] == Symptom.SHAPE


# ---------------------------------------------------------------- Inductor
def _compiles_whole(prepare, v: Variant) -> list:
    torch._dynamo.reset()
    counters.clear()
    run, _ = prepare(v.gm, v.inputs, "cpu", {})
    out = list(run(*v.inputs))
    assert not counters["graph_break"], dict(counters["graph_break"])
    return out


@pytest.mark.parametrize("seed_id", ["ops/nonzero/float32/0", "ops/masked_select/float32/0", "ops/unique/float32/0"])
def test_data_dependent_op_seeds_compile_whole_on_inductor(seed_id):
    v = capture(create_seed(seed_id)).variant
    out = _compiles_whole(prepare_inductor, v)
    assert compare(out, list(v.gm(*v.inputs)), Tolerances()).passed


def _base(seed_id: str):
    return evaluate(capture(create_seed(seed_id)).variant)


# ---------------------------------------------------------------- operator seeds at rank 2
DATA_DEPENDENT_OPS = ("nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "nonzero_static")


def test_data_dependent_op_seeds_are_matrices_and_other_ids_keep_their_sample():
    index = ops.load_index()
    assert set(DATA_DEPENDENT_OPS) <= set(index["rank_first"])
    for key in DATA_DEPENDENT_OPS:
        first = create_seed(f"ops/{key}/float32/0").args[0]
        assert first.dim() >= 2 and first.count_nonzero() > 0, (key, first.shape)
    for key in index["rank_first"]:  # the rule is the operators' own: each dispatches a data-dependent op
        assert any(ops.data_dependent(aten) for sid, aten in index["seeds"].items() if sid.split("/")[1] == key)
    for seed_id in ("ops/add/float32/0", "ops/sum/float32/1", "ops/nn.functional.conv2d/float32/0"):
        key, dtype, i = seed_id.split("/")[1:]
        assert key not in index["rank_first"]
        sample = ops.samples(ops.op_infos()[key], getattr(torch, dtype), int(i) + 1)[int(i)]  # generator order
        assert all(torch.equal(a, b) for a, b in zip(create_seed(seed_id).args, sample_tensors(sample)))


# ---------------------------------------------------------------- the order reaches the output
def _reversed_unique(x, sorted=True, return_inverse=False, return_counts=False):
    values, inverse, counts = aten._unique2.default(x, sorted, return_inverse, return_counts)
    return values.flip(0), inverse, counts.flip(0)  # the same values and counts, paired, in another order


REORDERED = {  # a form -> the ops it reads an order from, and the same ops returning another order
    "nonzero": ((aten.nonzero.default,), _nonzero_column_major),
    "masked_select": ((aten.masked_select.default,), lambda x, mask: aten.masked_select.default(x, mask).flip(0)),
    "masked_scatter": ((aten.masked_select.default,), lambda x, mask: aten.masked_select.default(x, mask).flip(0)),
    "bool_index": ((aten.index.Tensor,), lambda x, index: aten.index.Tensor(x, index).flip(0)),
    "unique": ((aten._unique2.default,), _reversed_unique),
}


@pytest.mark.parametrize("form", sorted(REORDERED))
def test_the_order_of_a_data_dependent_result_reaches_the_output(conv, form):
    """The mutated graph run with its data-dependent op returning the same elements in another order
    gives another output; run with the op itself (through the same patching) the same output."""
    m = get_mutator(MUTATOR)
    site = m.sites(conv.variant)[-1]
    assert len(shape_of(site)) == 4
    v = m.apply(conv.variant, {"node": site.name, "form": form, "cmp": "gt", "k": 7})
    targets, reordered = REORDERED[form]
    assert any(n.target in targets for n in v.gm.graph.nodes)
    with torch.no_grad():
        truth = list(v.gm(*v.inputs))
        same = list(_retargeted(v.gm, targets, lambda *a, **k: targets[0](*a, **k))(*v.inputs))
        other = list(_retargeted(v.gm, targets, reordered)(*v.inputs))
    assert compare(same, truth, Tolerances()).passed
    assert not compare(other, truth, Tolerances()).passed


def test_sites_of_rank_2_are_preferred_and_each_form_is_valid_on_a_vector(conv):
    m = get_mutator(MUTATOR)
    ranks = {len(shape_of(n)) for n in m.sites(conv.variant)}
    assert ranks and min(ranks) >= 2
    vector = _base("ops/softmax/float32/0")  # its one float node is 1-D: taken when nothing else is there
    (site,) = m.sites(vector.variant)
    assert len(shape_of(site)) == 1
    for form in sorted(FORMS):
        v = m.apply(vector.variant, {"node": site.name, "form": form, "cmp": "ge", "k": 1})
        ev = evaluate(v, vector)
        assert [o.shape for o in ev.outputs] == [o.shape for o in vector.outputs], form
        assert not compare(ev.outputs, vector.outputs, Tolerances()).passed, form
        assert compare(_compiles_whole(prepare_inductor, v), ev.outputs, Tolerances()).passed, form


@pytest.fixture(scope="module")
def conv():
    return _base("ops/nn.functional.conv2d/float32/0")  # a (1, 3, 4, 4) activation: four index columns


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_is_valid_everywhere_and_compiles_whole(conv, form):
    """Eager, the float64 oracle, the IR's round trip, aot-eager and Inductor, with no graph break."""
    m = get_mutator(MUTATOR)
    site = m.sites(conv.variant)[-1]
    outputs = {}
    for cmp in ("gt", "ge"):
        v = m.apply(conv.variant, {"node": site.name, "form": form, "cmp": cmp, "k": 7})
        ev = evaluate(v, conv)
        assert [tuple(o.shape) for o in ev.outputs] == [tuple(o.shape) for o in conv.outputs]
        EagerFp64().prepare(v.gm, v.inputs, "cpu")(*v.inputs)
        back = Variant.from_payload(v.to_payload())
        assert back.graph_json == v.graph_json
        assert all(torch.equal(a, b) for a, b in zip(back.gm(*back.inputs), ev.outputs))
        for prepare in (prepare_aot_eager, prepare_inductor):
            assert compare(_compiles_whole(prepare, back), ev.outputs, Tolerances()).passed, prepare.__name__
        outputs[cmp] = ev.outputs
        assert not compare(ev.outputs, conv.outputs, Tolerances()).passed  # the result reaches the output
    # the threshold is the node's own element k: > and >= differ there, on every input
    assert not compare(outputs["gt"], outputs["ge"], Tolerances()).passed


def test_a_mutated_resnet_runs_on_inductor_whole_and_agrees():
    base = _base("timm/test_resnet")
    m = get_mutator(MUTATOR)
    rng = random.Random(0)
    for _ in range(40):  # a site whose value reaches the output (timm zeroes each block's last BN weight)
        params = m.propose(base.variant, rng)
        v = m.apply(base.variant, params)
        ev = evaluate(v, base)
        effective = not compare(ev.outputs, base.outputs, Tolerances()).passed
        if params["form"] in ("nonzero", "masked_select") and effective:
            break
    else:
        pytest.fail("no effective nonzero or masked_select site in 40 draws")
    out = _compiles_whole(prepare_inductor, Variant.from_payload(v.to_payload()))
    assert compare(out, ev.outputs, Tolerances()).passed
    assert any(op in v.ops for op in ("aten.nonzero.default", "aten.masked_select.default"))


def test_an_inductor_reproducer_of_a_data_dependent_graph_runs_alone(tmp_path, conv):
    """prepare_inductor is copied into repro.py with the config wrapper it calls."""
    from gapfuzz.fuzzer.repro.code import reproducer, save_inputs
    from gapfuzz.fuzzer.repro.minimise import verify
    from gapfuzz.workers.run.registry import parse_backend

    m = get_mutator(MUTATOR)
    v = m.apply(conv.variant, {"node": m.sites(conv.variant)[-1].name, "form": "nonzero", "cmp": "ge", "k": 3})
    record = {"status": "mismatch", "verdict": "target-divergent", "symptom": "shape", "backend": "inductor@cpu",
              "variant_id": "ops/nn.functional.conv2d/float32/0#1", "output_dtype": "float32"}
    code = reproducer(v, parse_backend("inductor@cpu"), record, "t", {"tolerances": {}, "multiplier": 3.0,
                                                                      "far": 1000.0})
    assert "capture_dynamic_output_shape_ops" in code and "def with_dynamic_output_shapes" in code
    (tmp_path / "repro.py").write_text(code)
    save_inputs(v, tmp_path / "inputs.pt")
    failures, out = verify(tmp_path, tries=1)
    assert failures == 0 and "the bug is not present" in out, out


# ---------------------------------------------------------------- campaigns
CAMPAIGN = """
name: data-dependent
seed: 0
seeds:
  - {source: ops, include: ["ops/nonzero/float32/0", "ops/masked_select/float32/0", "ops/unique/float32/0"]}
variants: {per_seed: 1}
sizes: {per_seed: 0, widths: 0}
probes: {per_variant: 4}
backends:
  targets:
    - {class: "tests.stacks.data_dependent_backend:DataDependentFaults", device: cpu}
    - {class: "tests.stacks.data_dependent_backend:DataDependentFaults", device: cpu, label: dd-clean,
       options: {faults: []}}
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.fixture(scope="module")
def local_ray(_session_ray):
    """The session's embedded Ray (``conftest``), for this module's campaigns."""
    shared_ray()
    yield


def _run(text: str, folder):
    from gapfuzz.analysis.api import load_run
    from gapfuzz.core.strict_yaml import load
    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.fuzzer.driver import Driver

    Driver(from_dict(load(text, "t"), "t"), folder, progress=False).run()
    return load_run(folder)


def _clean_twin_shows_nothing(run, shown):
    found = run.clusters()
    assert all(b == ["dd-faults@cpu"] for b in found["backends"]), shown  # the clean twin shows nothing
    records = run.records(["seed_id", "backend", "status", "stage"])
    records = records[records["stage"] != "mutate"]  # a variant no mutator could change (nonzero's: no float node)
    clean = records[records["backend"] == "dd-clean@cpu"]
    assert len(clean) and (clean["status"] == "ok").all(), shown
    return records[records["backend"] == "dd-faults@cpu"]


@pytest.mark.ray
def test_a_fault_only_a_data_dependent_shape_shows_is_a_shape_cluster_and_its_clean_twin_shows_none(tmp_path,
                                                                                                  local_ray):
    run = _run(CAMPAIGN, tmp_path / "run")
    found = run.clusters()
    shown = found[["cluster", "kind", "symptom", "first_div_op", "backends", "count"]]
    faulty = _clean_twin_shows_nothing(run, shown)
    assert sorted(found["first_div_op"]) == ["aten.masked_select.default", "aten.nonzero.default"], shown
    assert (found["symptom"] == Symptom.SHAPE).all() and (found["verdict"] == Verdict.TARGET_DIVERGENT).all(), shown
    located = run.records(["backend", "first_div_op", "node_symptom"]).dropna()
    assert set(located["backend"]) == {"dd-faults@cpu"} and (located["node_symptom"] == Symptom.SHAPE).all()
    assert (faulty[faulty["seed_id"] == "ops/unique/float32/0"]["status"] == "ok").all()  # no fault there


@pytest.mark.slow  # a model's variants on top of the operator seeds: 30 s once Ray is up, a minute or more alone
@pytest.mark.ray
def test_the_mutator_takes_the_fault_into_a_model(tmp_path, local_ray):
    text = CAMPAIGN.replace("variants: {per_seed: 1}", "  - {source: timm, include: [test_vit]}\n"
                            "variants: {per_seed: 4, mutations: 1, mutators: [inject_data_dependent]}")
    run = _run(text, tmp_path / "run")
    found = run.clusters()
    shown = found[["cluster", "kind", "symptom", "first_div_op", "failing_op", "seed_ids", "count"]]
    _clean_twin_shows_nothing(run, shown)
    vit = run.records(["seed_id", "backend", "status", "message"])
    vit = vit[(vit["seed_id"] == "timm/test_vit") & (vit["backend"] == "dd-faults@cpu") & (vit["status"] != "ok")]
    # seed 0 draws masked_scatter twice: the short masked_select leaves it too few values for its mask
    assert vit["message"].str.contains("number of ones in mask").any(), shown


ORDER_CAMPAIGN = """
name: nonzero-order
seed: 0
seeds:
  - {source: ops, include: ["ops/nonzero/float32/0"]}
sizes: {per_seed: 0, widths: 0}
backends:
  targets:
    - {class: "tests.stacks.data_dependent_backend:ColumnMajorNonzero", device: cpu}
    - {class: "tests.stacks.data_dependent_backend:DataDependentFaults", device: cpu, label: dd-clean,
       options: {faults: []}}
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.mark.ray
def test_nonzero_rows_in_column_major_order_on_a_matrix_are_one_cluster(tmp_path, local_ray):
    """The defaults' variants and mutators on nonzero's operator seed: the stack's wrong row order is found,
    as one cluster at nonzero, and the clean twin shows nothing."""
    run = _run(ORDER_CAMPAIGN, tmp_path / "run")
    found = run.clusters()
    shown = found[["cluster", "kind", "symptom", "first_div_op", "failing_op", "backends", "count"]]
    assert len(found) == 1 and found["backends"].iloc[0] == ["nonzero-order@cpu"], shown
    assert found["first_div_op"].iloc[0] == "aten.nonzero.default", shown
    assert found["verdict"].iloc[0] == Verdict.TARGET_DIVERGENT and found["symptom"].iloc[0] == Symptom.INTEGER, shown
    records = run.records(["variant_id", "backend", "status"])
    assert (records[records["backend"] == "dd-clean@cpu"]["status"] == "ok").all(), shown
    faulty = records[records["backend"] == "nonzero-order@cpu"]
    assert faulty["variant_id"].nunique() == 3 and (faulty["status"] == "mismatch").any(), shown
