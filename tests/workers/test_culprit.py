"""Compiler attribution: findings bisected to the pass that causes them, keyed by it, reported with it;
optimisation differentials; option sets drawn per variant from a target's option space."""
from __future__ import annotations

import json

import pytest

from gapfuzz.core.bugs import DIVERGENCE_FIELDS, MISSING, bug_key, key_id
from gapfuzz.workers.judge.culprit import CONVERSION, KERNEL, OPTIMISER, Culprit, in_words, layer_of, pass_name
from gapfuzz.workers.run.registry import parse_backend
from tests.conftest import gapfuzz, shared_ray


def _divergence(op, culprit=None, **extra):
    return {"backend": "inductor@cpu", "stack": "inductor", "device": "cpu", "status": "mismatch",
            "verdict": "target-divergent", "symptom": "value", "first_div_op": op, "output_dtype": "float32",
            "culprit": culprit, **extra}


def test_one_pass_is_one_key_whichever_op_it_breaks_and_one_op_two_passes_break_is_two():
    a = bug_key(_divergence("aten.sub.Tensor", "inductor:post_grad_passes:p1"))
    b = bug_key(_divergence("aten.mul.Tensor", "inductor:post_grad_passes:p1"))
    c = bug_key(_divergence("aten.mul.Tensor", "inductor:joint_graph_passes:p2"))
    assert a.id == b.id and b.id != c.id
    assert a["first_div_op"] == MISSING and a["culprit"] == "inductor:post_grad_passes:p1"


def test_a_key_without_a_culprit_keeps_the_id_it_had_before_culprits():
    key = bug_key(_divergence("aten.sub.Tensor"))
    old = key_id(key.kind, *(key.keyed(f) for f in DIVERGENCE_FIELDS if f != "culprit"))
    assert key.id == f"d-{old}" and key.id != bug_key(_divergence("aten.sub.Tensor", "inductor:x:y")).id


def test_the_reducer_keeps_a_candidate_of_a_bisected_finding_without_bisecting_it():
    key = bug_key(_divergence("aten.sub.Tensor", "inductor:post_grad_passes:p1"))
    assert key.shown_by(bug_key(_divergence(None)), ["aten.sub.Tensor"])
    crash = bug_key({"backend": "inductor@cpu", "stack": "inductor", "device": "cpu", "status": "error",
                     "stage": "compile", "error_type": "E", "message": "boom", "culprit": "inductor:lowerings:add"})
    assert crash.shown_by(bug_key({**{k: crash[k] for k in ()}, "backend": "inductor@cpu", "stack": "inductor",
                                   "device": "cpu", "status": "error", "stage": "compile", "error_type": "E",
                                   "message": "boom"}))


def test_layers_and_identities_say_whose_team_a_culprit_goes_to():
    assert layer_of("aot_eager", None) == CONVERSION
    assert layer_of("aot_eager_decomp_partition", "decomposition") == CONVERSION
    assert layer_of("inductor", "post_grad_passes") == OPTIMISER
    assert layer_of("inductor", "lowerings") == KERNEL and layer_of("inductor", None) == KERNEL
    assert pass_name("lowerings", "convolution_12") == "convolution"
    assert pass_name("decomposition", "<OpOverload(op='aten.grid_sampler_2d', overload='default')>") == \
        "aten.grid_sampler_2d.default"
    assert Culprit("v", "inductor", None).identity is None  # no subsystem: the op stays the identity
    assert Culprit("v", "inductor", "lowerings", 4, "add_3").identity == "inductor:lowerings:add"
    words = in_words({"culprit_backend": "inductor", "culprit_subsystem": "post_grad_passes", "culprit_step": 3.0,
                      "culprit_info": "post_grad_custom_post_pass", "culprit_layer": OPTIMISER})
    assert "application 3 disabled: `post_grad_custom_post_pass`" in words
    assert "TORCHINDUCTOR_DISABLED_PASSES=POST_GRAD_CUSTOM_POST_PASS" in words
    assert "AOTAutograd, before Inductor" in in_words({"culprit_backend": "aot_eager", "culprit_layer": CONVERSION})


def test_each_variant_gets_one_option_set_from_a_target_option_space_the_same_every_time():
    spec = parse_backend("inductor@cpu", {"freezing": False})
    spec.option_space = {"epilogue_fusion": [False, True], "cpp.simdlen": [None, 256]}
    for cover in ("pairs", "draw"):
        spec.option_cover = cover
        drawn = [spec.for_variant(f"s#{i}", 0, "s", i, "inference") for i in range(40)]
        assert [d.options for d in drawn] == [spec.for_variant(f"s#{i}", 0, "s", i, "inference").options
                                              for i in range(40)]
        assert {d.options["epilogue_fusion"] for d in drawn} == {False, True}
        assert {d.options.get("cpp.simdlen") for d in drawn} == {None, 256}  # null: the default, left unset
        assert all(d.options["freezing"] is False and not d.option_space for d in drawn)
        assert spec.for_variant("s#0", 1, "s", 0, "inference").name == spec.name


def test_an_option_space_naming_an_unknown_option_is_one_line_naming_it():
    from gapfuzz.fuzzer.config.campaign import CampaignError, from_dict

    with pytest.raises(CampaignError, match=r"option_space.epilog_fusion: inductor has no option 'epilog_fusion'"):
        from_dict({"seeds": [{"source": "ops"}], "backends": {"targets": [
            {"backend": "inductor@cpu", "option_space": {"epilog_fusion": [True]}}]}}, "c.yaml")
    with pytest.raises(CampaignError, match="graph_optimization_level 'none'"):
        from_dict({"seeds": [{"source": "ops"}], "backends": {"targets": [
            {"backend": "onnxruntime@cpu", "option_space": {"graph_optimization_level": ["all", "none"]}}]}}, "c.yaml")


PLANTED = """
name: planted-passes
seeds:
  - {source: ops, include: ["ops/nn.functional.relu/float32/0", "ops/sub/float32/0", "ops/mul/float32/0",
                            "ops/add/float32/0", "ops/tanh/float32/0"]}
variants: {per_seed: 2, mutations: 1, mutators: [semantic]}
sizes: {per_seed: 0, widths: 0}
probes: {per_variant: 3}
backends:
  targets:
    - {class: "tests.stacks.planted_passes:MiscompilingInductor", device: cpu}
    - {class: "tests.stacks.planted_passes:FastMathEager", device: cpu}
    - {class: "tests.stacks.planted_passes:OwnPassCompiler", device: cpu}
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


@pytest.mark.ray
def test_each_planted_miscompilation_is_one_cluster_named_by_its_pass(tmp_path):

    from gapfuzz.analysis.api import load_run
    from gapfuzz.core.strict_yaml import load
    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.fuzzer.driver import Driver

    c = from_dict(load(PLANTED, "planted"), "planted")
    shared_ray()  # the session's embedded Ray (conftest)
    Driver(c, tmp_path / "run", progress=False).run()
    run = load_run(tmp_path / "run")
    found = run.clusters()
    compiled = found[found["backends"].map(lambda b: b == ["miscompiling-inductor@cpu"])]
    assert sorted(compiled["culprit"]) == ["inductor:joint_graph_passes:joint_custom_pre_pass",
                                           "inductor:post_grad_passes:post_grad_custom_post_pass",
                                           "inductor:pre_grad_passes:pre_grad_custom_pass"], compiled
    assert (compiled["culprit_layer"] == OPTIMISER).all() and (compiled["bisected"] >= 1).all()
    fast = found[found["backends"].map(lambda b: b == ["fast-math-eager@cpu"])]
    assert list(fast["culprit"]) == ["fast-math-eager:fast_math"], fast
    own = found[found["backends"].map(lambda b: b == ["own-pass-compiler@cpu"])]
    assert list(own["culprit"]) == ["own-pass-compiler:passes:swap_sub"], own
    records = run.records(["backend", "bisect_s", "bisect_error", "compiler", "compiler_passes"])
    ran = records[records["backend"] == "miscompiling-inductor@cpu"]
    assert (ran["compiler"] == "inductor").all()
    assert ran["compiler_passes"].map(lambda p: "post_grad_passes.post_grad_custom_post_pass" in list(p)).all()
    assert records["bisect_s"].notna().sum() <= 2 * 5  # once per (seed, backend, key), not per run
    report = json.dumps(list(found["culprit"].dropna()))
    assert "pre_grad_custom_pass" in report
    # gapfuzz explain: one cluster attributed again on demand, beside what the campaign said
    from gapfuzz.fuzzer.repro.attribute import attribute_cluster, lines

    (tmp_path / "run" / "campaign.yaml").write_text(c.to_yaml())
    again = attribute_cluster(tmp_path / "run", own["cluster"].iloc[0], allow_plugins=True)
    assert again.now["culprit"] == again.then["culprit"] == "own-pass-compiler:passes:swap_sub"
    assert again.cluster_now == own["cluster"].iloc[0] and "bug key now: " + again.cluster_now in lines(again)
    proc = gapfuzz("explain", tmp_path / "run", own["cluster"].iloc[0])  # a run folder's plug-ins are data
    assert proc.returncode == 2 and "--allow-plugins" in proc.stderr and "Traceback" not in proc.stderr


def test_a_bisection_over_its_budget_stops_unfinished_and_the_next_one_starts_afresh():
    import torch

    from gapfuzz.workers.judge.culprit import bisect
    from tests.stacks.planted_passes import MiscompilingInductor

    class M(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu(x) * (x - y) + y

    x, y = torch.randn(16), torch.randn(16)
    gm = torch.export.export(M(), (x, y)).run_decompositions().module()
    want = M()(x, y)

    def good():
        torch._dynamo.reset()
        with torch.no_grad():
            got = MiscompilingInductor(pre_grad_custom_pass=None, joint_custom_pre_pass=None).prepare(
                gm, (x, y), "cpu")(x, y)
        return torch.allclose(got, want)

    stopped = bisect(good, budget_s=0.0)
    assert stopped["bisect_error"].startswith("over its 0 s budget") and "culprit" not in stopped
    found = bisect(good, budget_s=600)
    assert found["culprit"] == "inductor:post_grad_passes:post_grad_custom_post_pass"


def test_a_located_defect_is_bisected_once_across_seeds_an_unlocated_one_once_per_seed():
    """The ledger shares a culprit by (backend, bug key): the same located defect on another seed
    inherits it; a divergence without a location has a provisional key, so its seed keeps its own."""
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.workers.judge.align import AlignLedger
    from gapfuzz.workers.judge.attribution import attribute_findings

    class Job:  # what attribute_findings asks of a variant's job; bisect counts the compiles it would pay
        probes, bisected = [], []

        def __init__(self, vid):
            self.vid = vid

        def over_budget(self, backend):
            return None

        def bisect(self, spec, probe, ref, failure):
            Job.bisected.append(self.vid)
            return {"culprit": "inductor:post_grad_passes:p", "culprit_backend": "inductor",
                    "culprit_subsystem": "post_grad_passes", "culprit_info": "p", "bisect_compiles": 9}

    specs, ledger = {"inductor@cpu": parse_backend("inductor@cpu")}, AlignLedger()
    for seed, op in (("ops/a", "aten.mul.Tensor"), ("ops/b", "aten.mul.Tensor"), ("ops/c", None),
                     ("ops/d", None)):
        o = RunRecord(campaign="c", variant_id=f"{seed}#0", seed_id=seed, probe="example",
                      **_divergence(op, compiler="inductor"))
        attribute_findings(Job(o.variant_id), [o], specs, {("eager@cpu", "example"): [0.0]}, "eager@cpu", seed,
                           ledger)
        assert o.culprit == "inductor:post_grad_passes:p"
    assert Job.bisected == ["ops/a#0", "ops/c#0", "ops/d#0"]
