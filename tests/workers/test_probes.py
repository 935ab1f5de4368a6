"""Input probes: several input sets per prepared backend, chosen where they make sense, replayable,
and enough to find value-dependent defects every time rather than by luck."""
from __future__ import annotations

import pytest
import torch

from gapfuzz.seeds import create_seed
from gapfuzz.seeds.capture import capture
from gapfuzz.workers.run.probes import COUNTED, EXAMPLE, Probe, ProbeSettings, choose, make_inputs, roles
from gapfuzz.workers.run.probes.kinds.edge import EDGES, QUOTIENTS
from tests.conftest import shared_ray


def _variant(seed_id: str):
    return capture(create_seed(seed_id)).variant


def _gm_inputs(seed_id: str):
    v = _variant(seed_id)
    return v.gm, v.inputs


def test_an_index_keeps_its_values_and_a_mask_stays_a_mask():
    emb = _variant("ops/nn.functional.embedding/float32/0")
    assert roles(emb.gm, emb.inputs) == ["value", "index"]
    where = _variant("ops/where/float32/0")
    assert roles(where.gm, where.inputs) == ["value", "mask", "value"]
    for v in (emb, where):
        r = roles(v.gm, v.inputs)
        for p in choose(v.gm, v.inputs, ProbeSettings(per_variant=20), "v#0"):
            fed = make_inputs(v.inputs, r, p)
            for role, old, new in zip(r, v.inputs, fed):
                assert new.dtype == old.dtype and new.shape == old.shape, p.name
                if role == "index" and p.kind != "bounds":  # the same valid indices, in another order
                    assert torch.equal(new.flatten().sort().values, old.flatten().sort().values), p.name
                if role == "mask":
                    assert new.dtype == torch.bool and (torch.equal(new, old) or p.kind == "bool"), p.name


def test_integers_used_as_numbers_get_their_extremes():
    v = _variant("ops/add/int32/0")
    assert roles(v.gm, v.inputs) == ["integer", "integer"]
    names = [p.name for p in choose(v.gm, v.inputs, ProbeSettings(), "v#0")]
    assert names[0] == EXAMPLE and {"integer:max", "integer:min", "integer:overflow-sum"} <= set(names)
    fed = make_inputs(v.inputs, roles(v.gm, v.inputs), Probe.of("integer", {"corner": "max"}))
    assert all(int(t.min()) == int(t.max()) == 2**31 - 1 for t in fed)


def test_probes_replay_from_their_recipe_in_any_process():
    v = _variant("timm/test_vit")
    r = roles(v.gm, v.inputs)
    chosen = choose(v.gm, v.inputs, ProbeSettings(per_variant=12), "timm/test_vit#3")
    values = [p for p in chosen if p.kind != "layout"]  # the three layouts come beside the twelve
    assert len(values) == 12 and len({p.name for p in chosen}) == 15 and chosen[0].kind == EXAMPLE
    assert chosen == choose(v.gm, v.inputs, ProbeSettings(per_variant=12), "timm/test_vit#3")
    for p in chosen:
        again = Probe.from_recipe(p.recipe())
        assert again == p
        a, b = make_inputs(v.inputs, r, p)[0], make_inputs(v.inputs, r, again)[0]
        assert torch.equal(a.nan_to_num(), b.nan_to_num()) and torch.equal(a.isnan(), b.isnan())
    nan = make_inputs(v.inputs, r, next(p for p in chosen if p.name == "special:nan:single"))[0]
    assert int(nan.isnan().sum()) == 1 and not v.inputs[0].isnan().any()  # the example is left alone
    other_seed = choose(v.gm, v.inputs, ProbeSettings(per_variant=12, campaign_seed=1), "timm/test_vit#3")
    assert [p.name for p in other_seed] == [p.name for p in chosen] and other_seed != chosen  # other positions


@pytest.mark.parametrize("kinds, expect", [(("special",), {"special"}), (("ran*", "ties"), {"random", "ties"}),
                                           (("example",), {EXAMPLE})])
def test_a_campaign_chooses_the_kinds_and_how_many(kinds, expect):
    v = _variant("timm/test_resnet")
    chosen = choose(v.gm, v.inputs, ProbeSettings(per_variant=4, kinds=kinds), "v#0")
    assert {p.kind for p in chosen} == expect and len(chosen) <= 4


PLANTED = """
name: planted
seed: SEED
seeds:
  - {source: ops, include: ["ops/nn.functional.relu/float32/0", "ops/exp/float32/0", "ops/add/int32/0",
                            "ops/sum/float32/0"]}
variants: {per_seed: 1}
backends:
  targets:
    - {class: "tests.stacks.numeric_backends:NanToZeroInOneOp", device: cpu}
    - {class: "tests.stacks.numeric_backends:SaturateOverflow", device: cpu}
    - {class: "tests.stacks.numeric_backends:SaturateIntegerAdd", device: cpu}
    - {class: "tests.stacks.numeric_backends:BlockedSum", device: cpu}
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.mark.slow  # CI's time (two to three minutes); the default set keeps the probes finding defects (below)
@pytest.mark.ray
def test_value_dependent_defects_are_found_on_every_campaign_seed(tmp_path):
    """A stack wrong only on NaN in one op, one that saturates overflows, one that saturates integer adds:
    each found by the probes (never by the example inputs alone) on every campaign seed 0..4; one wrong
    only for sums over more than a block of elements, found by the sizes on every campaign seed."""

    from gapfuzz.analysis.api import load_run
    from gapfuzz.core.ids import SeedId
    from gapfuzz.core.strict_yaml import load
    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.fuzzer.driver import Driver

    shared_ray()  # the session's embedded Ray (conftest)
    for seed in range(5):
        c = from_dict(load(PLANTED.replace("SEED", str(seed)), "planted"), "planted")
        Driver(c, tmp_path / str(seed), progress=False).run()
        clusters = load_run(tmp_path / str(seed)).clusters(vendor=True)
        for backend in ("nan-to-zero@cpu", "saturate-overflow@cpu", "saturate-int-add@cpu"):
            mine = clusters[clusters["backends"].map(lambda b: b == [backend])]
            assert len(mine), f"seed {seed}: nothing found on {backend}"
            assert all(EXAMPLE not in p for p in mine["probes"]), f"seed {seed}: {backend} showed on the example"
        runs = load_run(tmp_path / str(seed)).records()
        blocked = runs[(runs["backend"] == "blocked-sum@cpu") & (runs["status"] == "mismatch")]
        assert len(blocked), f"seed {seed}: nothing found on blocked-sum@cpu"
        sizes = blocked["seed_id"].map(lambda s: SeedId.parse(s).size or SeedId.parse(s).width or 0)
        assert (sizes > 1024).all(), f"seed {seed}: blocked-sum showed at {sorted(set(sizes))}"
        assert (clusters["backends"].map(lambda b: b == ["blocked-sum@cpu"])).sum() >= 1
        assert all(len(b) == 1 for b in clusters["backends"])  # no cluster mixes two of the faults


def test_layout_probes_keep_the_values_and_change_the_strides():
    every = ProbeSettings(per_variant=40, kinds=("*",))
    resnet = choose(*_gm_inputs("timm/test_resnet"), ProbeSettings(), "v#0")  # a view further in: layouts too
    assert [p.name for p in resnet if p.kind == "layout"][:1] == ["layout:channels-last"]
    v = _variant("ops/nn.functional.avg_pool2d/float32/0")
    chosen = choose(v.gm, v.inputs, ProbeSettings(), "v#0")  # by default, beside the eight value probes
    layouts = [p for p in chosen if p.kind == "layout"]
    assert [p.name for p in layouts] == ["layout:channels-last", "layout:transposed", "layout:strided"]
    edges = [p.name for p in chosen if p.kind == "edge"]  # a one-operator graph: the dtype's edges after them
    boundary = [p for p in chosen if p.kind == "boundary"]  # and its own overflow boundaries last
    assert boundary and chosen[-len(boundary):] == boundary
    chosen = chosen[:-len(boundary)]
    assert edges == [f"edge:{e}" for e in EDGES] and chosen[-len(EDGES) - 3:-len(EDGES)] == layouts
    assert len(chosen) == 8 + 3 + len(EDGES)
    assert [p for p in choose(v.gm, v.inputs, every, "v#0") if p.kind == "layout"] == layouts  # the same recipes
    for p in layouts:
        fed = make_inputs(v.inputs, roles(v.gm, v.inputs), p)[0]
        assert torch.equal(fed, v.inputs[0]) and not fed.is_contiguous(), p.name


def test_a_probe_the_reference_refuses_blames_no_target_for_failing_it():
    from gapfuzz.core.bugs import Status, Verdict
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.workers.judge.verdict import RefusedProbe

    refused = RefusedProbe("RuntimeError", "ZeroDivisionError")
    blank = dict(campaign="", variant_id="", seed_id="", device="cpu")
    error = RunRecord(backend="inductor@cpu", stack="inductor", status=Status.ERROR,
                      message="inductor_cpu_throw_if_integer_div_error", **blank)
    crash = RunRecord(backend="openvino@cpu", stack="openvino", status=Status.CRASH, **blank)
    ran = RunRecord(backend="onnxruntime@cpu", stack="onnxruntime", status=Status.OK, **blank)
    for o in (error, crash, ran):
        refused.excuse(o)
    assert error.status == Status.SKIPPED and "reference fails on this probe too" in error.message
    assert crash.status == Status.CRASH  # a process that dies is a finding whatever the input
    assert ran.status == Status.OK and ran.verdict == Verdict.NO_REFERENCE


def test_a_stack_that_compiles_again_for_new_strides_gets_at_most_one_layout():
    """Eager, ONNX Runtime, OpenVINO and plug-ins take any strides: every layout. Inductor and aot-eager
    compile again for each: one, on a convolution (channels-last) or a matmul (transposed) only.
    AOTInductor reads another layout wrong: none. A campaign that names layouts gives every stack all."""
    from gapfuzz.workers.run.backend import Backend, adapt
    from gapfuzz.workers.run.registry import backend_class

    assert [backend_class(s).any_strides for s in ("eager", "eager-fp64", "onnxruntime", "openvino", "tensorrt")] \
        == [True] * 5
    assert backend_class("inductor").any_strides is False and backend_class("aot-eager").any_strides is False
    assert backend_class("aot-inductor").any_strides is None

    class Plain:  # a plug-in that says nothing of strides, and one that recompiles
        name = "plain"

        def prepare(self, gm, inputs, device):
            return gm

    class Recompiles(Plain):
        any_strides = False

    assert adapt(Plain).any_strides is True and adapt(Recompiles).any_strides is False
    assert Backend.any_strides is True
    named = ProbeSettings(kinds=("*",))
    for seed_id, one in [("ops/nn.functional.conv2d/float32/0", ["layout:channels-last"]),
                         ("ops/mm/float32/0", ["layout:transposed"]),
                         ("ops/nn.functional.avg_pool2d/float32/0", []), ("ops/exp/float32/0", [])]:
        v = _variant(seed_id)
        every = choose(v.gm, v.inputs, ProbeSettings(), "v#0")
        fewer = choose(v.gm, v.inputs, ProbeSettings(), "v#0", any_strides=False)
        assert [p.name for p in every if p.kind == "layout"] == ["layout:channels-last", "layout:transposed",
                                                                 "layout:strided"], seed_id
        assert [p.name for p in fewer if p.kind == "layout"] == one, seed_id
        assert set(fewer) <= set(every) and [p for p in every if p.kind != "layout"] == \
            [p for p in fewer if p.kind != "layout"]  # the value probes are the same: outcomes line up by name
        assert not any(p.kind == "layout" for p in choose(v.gm, v.inputs, ProbeSettings(), "v#0", any_strides=None))
        for strides in (True, False, None):
            assert [p.kind for p in choose(v.gm, v.inputs, named, "v#0", strides)].count("layout") == 3


def test_relation_probes_relate_inputs_of_one_shape_and_dtype():
    """Equal everywhere, at a seeded half of the positions, one ulp (or one) apart on either side, or
    swapped; beside the value probes, replayable, and only where two inputs used as numbers share a
    shape and dtype (a mask, an index or another shape is left alone)."""
    clamp = _variant("ops/clamp/float32/0")  # x, min, max: three inputs of one shape
    r = roles(clamp.gm, clamp.inputs)
    chosen = choose(clamp.gm, clamp.inputs, ProbeSettings(), "v#0")
    relations = [p for p in chosen if p.kind == "relation"]
    assert [p.name for p in relations] == ["relation:equal", "relation:some-equal", "relation:ulp",
                                           "relation:ulp-flipped", "relation:swapped"]
    assert len([p for p in chosen if p.kind in COUNTED]) == 8  # they displace no value probe
    x, lo, hi = clamp.inputs
    fed = {p.params[0][1]: make_inputs(clamp.inputs, r, p) for p in relations}
    assert all(torch.equal(t, x) for t in fed["equal"])
    _, half, _ = fed["some-equal"]
    assert torch.equal(fed["some-equal"][0], x) and 0.3 < float((half == x).float().mean()) < 0.7
    near = fed["ulp"][1]
    assert torch.equal(near, torch.nextafter(x, lo)) and not torch.equal(near, x)
    assert torch.equal((near > x), (lo > x)) and torch.equal((near < x), (lo < x))  # the example's order, barely
    flipped = fed["ulp-flipped"][1]
    assert torch.equal(flipped > x, lo <= x) and torch.equal(flipped, torch.nextafter(x, 2 * x - lo))  # other side
    assert [torch.equal(a, b) for a, b in zip(fed["swapped"], (hi, lo, x))] == [True] * 3
    for p in relations:
        again = make_inputs(clamp.inputs, r, Probe.from_recipe(p.recipe()))
        assert all(torch.equal(a, b) for a, b in zip(make_inputs(clamp.inputs, r, p), again)), p.name
    assert all(torch.equal(a, b) for a, b in zip(clamp.inputs, (x, lo, hi)))  # the example is left alone

    ints = _variant("ops/add/int32/0")
    side = torch.sign(ints.inputs[1] - ints.inputs[0])
    a, b = make_inputs(ints.inputs, roles(ints.gm, ints.inputs), Probe.of("relation", {"relation": "ulp"}))
    assert int((b.long() - a.long()).abs().max()) <= 1 and torch.equal(torch.sign(b - a), side)
    _, b = make_inputs(ints.inputs, roles(ints.gm, ints.inputs), Probe.of("relation", {"relation": "ulp-flipped"}))
    assert int((b.long() - a.long()).abs().max()) == 1 and not (torch.sign(b - a) == side).any()
    where = _variant("ops/where/float32/0")  # value, mask, value: the two values related, the mask kept
    a, mask, b = make_inputs(where.inputs, roles(where.gm, where.inputs), Probe.of("relation", {"relation": "equal"}))
    assert torch.equal(a, b) and torch.equal(mask, where.inputs[1])
    for seed_id in ("ops/gt/float32/1", "ops/nn.functional.embedding/float32/0", "timm/test_resnet"):
        v = _variant(seed_id)  # (5,) against (), a value and an index, one input
        assert not any(p.kind == "relation" for p in choose(v.gm, v.inputs, ProbeSettings(), "v#0")), seed_id
    assert not any(p.kind == "relation" for p in choose(clamp.gm, clamp.inputs, ProbeSettings(kinds=("special",)),
                                                        "v#0"))


REACH = """
name: reach
seed: 0
seeds:
  - {source: ops, include: ["ops/mm/float32/0", "ops/exp/float32/0", "ops/floor_divide/float32/0", "ops/gt/float32/0"]}
variants: {per_seed: 1}
sizes: {per_seed: 0, widths: 0}
backends:
  targets:
    - {class: "tests.stacks.probe_backends:IgnoresStridesAny", device: cpu}
    - {class: "tests.stacks.probe_backends:ShortCopyCompiled", device: cpu}
    - {class: "tests.stacks.probe_backends:NearTiesDivide", device: cpu}
    - {class: "tests.stacks.probe_backends:GreaterAsAtLeast", device: cpu}
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.mark.ray
def test_default_probes_find_a_stack_that_ignores_strides_and_one_that_ties_near_ties(tmp_path):
    """With the default probes: stacks that mishandle non-contiguous inputs are found by the layout
    probes (all three where the stack takes any strides; the one a recompiling stack gets, on the
    matmul only); a stack whose ``floor_divide`` ties near ties (a bfloat16 quotient) is found by a relation
    probe one ulp apart alone, while every value probe of the same campaign passes on it."""

    from gapfuzz.analysis.api import load_run
    from gapfuzz.core.strict_yaml import load
    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.fuzzer.driver import Driver

    shared_ray()  # the session's embedded Ray (conftest)
    Driver(from_dict(load(REACH, "reach"), "reach"), tmp_path / "reach", progress=False).run()
    run = load_run(tmp_path / "reach")
    runs = run.records()
    op = runs["seed_id"].str.split("/").str[1]

    def probes(backend, seed_op, status=None):
        mine = runs[(runs["backend"] == backend) & (op == seed_op)]
        return sorted(mine[mine["status"] == status]["probe"] if status else mine["probe"])

    layouts = ["layout:channels-last", "layout:strided", "layout:transposed"]
    for backend in ("eager@cpu", "eager-fp64@cpu", "strides-any@cpu"):
        assert [p for p in probes(backend, "mm") if p.startswith("layout")] == layouts, backend
    assert [p for p in probes("strides-compiled@cpu", "mm") if p.startswith("layout")] == ["layout:transposed"]
    assert not any(p.startswith("layout") for p in probes("strides-compiled@cpu", "exp"))
    assert probes("strides-any@cpu", "mm", "mismatch") and probes("strides-any@cpu", "exp", "mismatch")
    for backend in ("strides-any@cpu", "strides-compiled@cpu"):
        assert all(p.startswith("layout:") for p in probes(backend, "mm", "mismatch") + probes(backend, "exp",
                                                                                                 "mismatch"))
    assert probes("strides-compiled@cpu", "mm", "mismatch") == ["layout:transposed"]
    near = probes("near-ties@cpu", "floor_divide", "mismatch")  # a one-ulp relation, and the quotient edges
    assert [p for p in near if p.startswith("relation:")] in (["relation:ulp"], ["relation:ulp-flipped"]), near
    assert "edge:quotient-ulp" in near and all(p.startswith(("relation:", "edge:")) for p in near), near
    edges = [p for p in probes("eager@cpu", "floor_divide") if p.startswith("edge:")]
    assert len(edges) == 8 and len(probes("near-ties@cpu", "floor_divide", "ok")) + len(near) == 8 + 5 + len(edges)
    assert sum(p.startswith("relation:") for p in probes("eager@cpu", "floor_divide")) == 5
    flipped = probes("gt-as-ge@cpu", "gt", "mismatch")  # equal inputs: the relation probes (and ties)
    assert "relation:equal" in flipped and EXAMPLE not in flipped and not probes("gt-as-ge@cpu", "mm", "mismatch")
    found = run.clusters(vendor=True)
    for backend in ("strides-any@cpu", "strides-compiled@cpu", "near-ties@cpu", "gt-as-ge@cpu"):
        assert found["backends"].map(lambda b, x=backend: x in b).any(), (backend, found[["cluster", "backends"]])


def test_edge_probes_sit_one_step_from_the_dtypes_edges_on_small_graphs_only():
    assert not [p for p in choose(*_gm_inputs("timm/test_resnet"), ProbeSettings(), "v#0") if p.kind == "edge"]
    v = _variant("ops/floor_divide/float32/0")
    chosen = {p.params[0][1]: p for p in choose(v.gm, v.inputs, ProbeSettings(), "v#0") if p.kind == "edge"}
    assert list(chosen) == [*EDGES, *QUOTIENTS]  # the division family gets quotients too
    r = roles(v.gm, v.inputs)
    fed = {e: make_inputs(v.inputs, r, p) for e, p in chosen.items()}
    top = torch.finfo(torch.float32).max
    big = fed["max"][0].abs()
    assert torch.isfinite(big).all() and (big >= torch.nextafter(torch.tensor(top), torch.tensor(0.0))).all()
    tiny = fed["tiny"][0].abs()
    assert (tiny <= torch.finfo(torch.float32).smallest_normal).all() and ((tiny > 0) & (tiny < 1.2e-38)).any()
    nan = fed["nan-sign"][0]
    assert int(nan.isnan().sum()) == 1 and torch.signbit(nan[nan.isnan()]).all()
    snan = fed["snan"][0]
    assert (snan.view(torch.int32) == 0x7F800001).sum() == 1  # the payload travels as drawn
    a, b = fed["quotient"][:2]
    q = a.double() / b.double()
    assert (b != 0).all() and torch.equal(q, q.round())  # integer-valued quotients
    a, b = fed["quotient-ulp"][:2]
    q = a.double() / b.double()
    assert (q != q.round()).any()  # one ulp off an integer
    for e, p in chosen.items():  # replayed from its recipe, the same inputs
        again = make_inputs(v.inputs, r, Probe.from_recipe(p.recipe()))
        assert all(torch.equal(x.view(torch.int32), y.view(torch.int32)) for x, y in zip(fed[e], again)), e
