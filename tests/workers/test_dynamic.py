"""Dynamic shapes that stay dynamic: a stack compiled with ``dynamic: true`` is called at other sizes
through the same compile (resize probes), and each record says whether its compile held symbolic sizes."""
from __future__ import annotations

import pytest
import torch

from gapfuzz.core.bugs import Status
from gapfuzz.workers.run.probes import RESIZE, Probe, ProbeSettings, make_inputs, roles
from gapfuzz.workers.run.resize import resize_probes
from tests.conftest import run_campaign

SOFTMAX = "ops/softmax/float32/1"  # softmax over the first dimension of a 5 x 5 matrix

CAMPAIGN = """
name: dyn
seed: 0
seeds:
  - {source: ops, include: ["ops/softmax/float32/1"]}
variants: {per_seed: 1}
sizes: {per_seed: 0, widths: 0}
backends:
  targets:
    - {class: "tests.stacks.dynamic_backends:HintBoundCompiled", device: cpu, options: {dynamic: true}}
    - {class: "tests.stacks.dynamic_backends:HintBoundCompiled", device: cpu, label: hint-static,
       options: {dynamic: false}}
    - {backend: inductor@cpu, label: inductor-dynamic, options: {dynamic: true}}
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


def _variant(seed_id: str):
    from gapfuzz.seeds import create_seed
    from gapfuzz.seeds.capture import capture

    return capture(create_seed(seed_id)).variant


def test_resize_probes_vary_every_size_of_one_length_where_the_graph_takes_it():
    v = _variant(SOFTMAX)
    settings = ProbeSettings(resize=True)
    probes = resize_probes(v.gm, v.inputs, settings, "v#0")
    assert [p.name for p in probes] == ["resize:0.0,0.1:4", "resize:0.0,0.1:6", "resize:0.0,0.1:1025"]
    assert not resize_probes(v.gm, v.inputs, ProbeSettings(), "v#0")  # only where a dynamic stack runs
    assert not resize_probes(v.gm, v.inputs, ProbeSettings(kinds=("example", "random"), resize=True), "v#0")
    example = v.inputs[0]
    for p in probes:
        fed = make_inputs(v.inputs, roles(v.gm, v.inputs), p)
        n = dict(p.params)["length"]
        assert fed[0].shape == (n, n) and fed[0].dtype == example.dtype
        k = min(n, 5)
        assert torch.equal(fed[0][:k, :k], example[:k, :k])  # the example's values where they fit
        again = make_inputs(v.inputs, roles(v.gm, v.inputs), Probe.from_recipe(p.recipe()))
        assert torch.equal(again[0], fed[0])  # replayed from its recipe
    big = make_inputs(v.inputs, roles(v.gm, v.inputs), probes[-1])[0]
    assert not torch.equal(big[5:10, :5], example)  # past the example's length: new values, not a repeat
    reshape = _variant("ops/reshape/float32/0")  # view(x, [25, 5]): its sizes are baked into the graph
    assert not resize_probes(reshape.gm, reshape.inputs, settings, "v#0")
    mm = _variant("ops/mm/float32/0")  # (5, 10) @ (10, 5): the rows and columns, then the reduced length
    assert [p.name for p in resize_probes(mm.gm, mm.inputs, settings, "v#0")] == [
        "resize:0.0,1.1:4", "resize:0.0,1.1:6", "resize:0.0,1.1:1025",
        "resize:0.1,1.0:9", "resize:0.1,1.0:11", "resize:0.1,1.0:1025"]


@pytest.mark.parametrize("dynamic", [True, False])
def test_a_dynamic_compile_runs_every_resized_input_set_without_compiling_again(dynamic):
    from torch._dynamo.utils import get_compilation_metrics

    from gapfuzz.workers.backends.inductor import prepare_aot_eager, symbolic_sizes

    v = _variant(SOFTMAX)
    probes = resize_probes(v.gm, v.inputs, ProbeSettings(resize=True), "v#0")
    torch._dynamo.reset()
    found: dict = {}
    try:
        with symbolic_sizes(found), torch.no_grad():
            fn, _ = prepare_aot_eager(v.gm, v.inputs, "cpu", {"dynamic": dynamic})
            fn(*v.inputs)
            for p in probes:
                fed = make_inputs(v.inputs, roles(v.gm, v.inputs), p)
                torch.testing.assert_close(fn(*fed)[0], v.gm(*fed)[0])
            compiles = len(get_compilation_metrics())
    finally:
        torch._dynamo.reset()
    assert found == {"symbolic": dynamic}
    assert compiles == (1 if dynamic else 1 + len(probes))  # static sizes: a compile per new size


@pytest.mark.ray
def test_a_fault_only_symbolic_sizes_reach_is_one_cluster_and_records_say_the_compile_was_symbolic(tmp_path,
                                                                                                   local_ray):
    run = run_campaign(CAMPAIGN, tmp_path / "dyn")
    records = run.records()
    shown = records[["backend", "probe", "status", "symbolic", "first_div_op"]].to_string()

    faulty = records[records["backend"] == "hint-bound@cpu"]
    wrong = faulty[faulty["status"] == Status.MISMATCH]
    assert sorted(wrong["probe"]) == ["resize:0.0,0.1:1025", "resize:0.0,0.1:6"], shown  # past the traced size
    assert (faulty[faulty["probe"] == "resize:0.0,0.1:4"]["status"] == Status.OK).all(), shown
    assert (faulty["symbolic"] == True).all(), shown  # noqa: E712
    assert wrong["first_div_op"].notna().all(), shown  # tier 2 compiled at the example's sizes first, as the run
    found = run.clusters(vendor=True)
    assert list(found["backends"]) == [["hint-bound@cpu"]], found[["cluster", "backends", "count"]]

    static = records[records["backend"] == "hint-static@cpu"]
    assert len(static) and (static["status"] == Status.OK).all(), shown
    assert not static["probe"].str.startswith(RESIZE).any() and (static["symbolic"] == False).all(), shown  # noqa: E712

    inductor = records[records["backend"] == "inductor-dynamic@cpu"]
    sizes = {p for p in inductor["probe"] if p.startswith(RESIZE)}
    assert {"resize:0.0,0.1:6", "resize:0.0,0.1:1025"} <= sizes, shown
    assert (inductor["status"] == Status.OK).all() and (inductor["symbolic"] == True).all(), shown  # noqa: E712
    assert records[records["backend"] == "eager@cpu"]["symbolic"].isna().all(), shown  # no Dynamo compile
