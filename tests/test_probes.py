"""Input probes: several input sets per prepared backend, chosen where they make sense, replayable,
and enough to find value-dependent defects every time rather than by luck."""
from __future__ import annotations

import pytest
import torch

from seeds import create_seed
from seeds.capture import capture
from workers.probes import EXAMPLE, Probe, ProbeSettings, choose, make_inputs, roles


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
                if role == "index":  # the same valid indices, in the example's order or another
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
    assert len(chosen) == 12 and len({p.name for p in chosen}) == 12 and chosen[0].kind == EXAMPLE
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
    - {class: "tests.numeric_backends:NanToZeroInOneOp", device: cpu}
    - {class: "tests.numeric_backends:SaturateOverflow", device: cpu}
    - {class: "tests.numeric_backends:SaturateIntegerAdd", device: cpu}
    - {class: "tests.numeric_backends:BlockedSum", device: cpu}
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.mark.ray
def test_value_dependent_defects_are_found_on_every_campaign_seed(tmp_path):
    """A stack wrong only on NaN in one op, one that saturates overflows, one that saturates integer adds:
    each found by the probes (never by the example inputs alone) on every campaign seed 0..4; one wrong
    only for sums over more than a block of elements, found by the sizes on every campaign seed."""
    import ray

    from analysis.api import load_run
    from fuzzer.campaign import from_dict
    from fuzzer.driver import Driver
    from core.strict_yaml import load

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
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
            sizes = blocked["seed_id"].map(lambda s: int(s.rpartition("@")[2]) if "@" in s else 0)
            assert (sizes > 1024).all(), f"seed {seed}: blocked-sum showed at {sorted(set(sizes))}"
            assert (clusters["backends"].map(lambda b: b == ["blocked-sum@cpu"])).sum() >= 1
            assert all(len(b) == 1 for b in clusters["backends"])  # no cluster mixes two of the faults
    finally:
        ray.shutdown()


def test_layout_probes_keep_the_values_and_change_the_strides():
    every = ProbeSettings(per_variant=40, kinds=("*",))
    assert not any(p.kind == "layout" for p in choose(*_gm_inputs("timm/test_resnet"), every,
                                                      "v#0"))  # it views its features: eager refuses other layouts
    v = _variant("ops/nn.functional.avg_pool2d/float32/0")
    assert not any(p.kind == "layout" for p in choose(v.gm, v.inputs, ProbeSettings(per_variant=40), "v#0"))
    chosen = choose(v.gm, v.inputs, every, "v#0")
    layouts = [p for p in chosen if p.kind == "layout"]
    assert [p.name for p in layouts] == ["layout:channels-last", "layout:transposed", "layout:strided"]
    assert chosen.index(layouts[0]) >= 8  # last, and only when asked for: Inductor compiles again for each
    for p in layouts:
        fed = make_inputs(v.inputs, roles(v.gm, v.inputs), p)[0]
        assert torch.equal(fed, v.inputs[0]) and not fed.is_contiguous(), p.name


def test_a_probe_the_reference_refuses_blames_no_target_for_failing_it():
    from core.bugs import Status, Verdict
    from workers.judge import RefusedProbe
    from workers.outcome import RunOutcome

    refused = RefusedProbe("RuntimeError", "ZeroDivisionError")
    error = RunOutcome(backend="inductor@cpu", stack="inductor", device="cpu", status=Status.ERROR,
                       message="inductor_cpu_throw_if_integer_div_error")
    crash = RunOutcome(backend="openvino@cpu", stack="openvino", device="cpu", status=Status.CRASH)
    ran = RunOutcome(backend="onnxruntime@cpu", stack="onnxruntime", device="cpu", status=Status.OK)
    for o in (error, crash, ran):
        refused.excuse(o)
    assert error.status == Status.SKIPPED and "reference fails on this probe too" in error.message
    assert crash.status == Status.CRASH  # a process that dies is a finding whatever the input
    assert ran.status == Status.OK and ran.figures["verdict"] == Verdict.NO_REFERENCE
