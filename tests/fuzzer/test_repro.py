"""Minimised reproducers: a mis-computed operator shrinks to a few nodes and reproduces on its own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gapfuzz.core.bugs import bug_key
from gapfuzz.fuzzer.config.campaign import from_dict
from gapfuzz.fuzzer.repro.minimise import reproduce
from gapfuzz.fuzzer.repro.shrink.core import Shrinker
from gapfuzz.seeds import create_seed
from gapfuzz.seeds.capture import capture

pytestmark = pytest.mark.ray  # starts sandboxes, though not Ray itself


def _run_dir(tmp_path, target: dict):
    c = from_dict({"name": "t", "seeds": [{"source": "timm", "include": ["test_vit"]}],
                   "backends": {"targets": [target]}}, "t")
    run = tmp_path / "run"
    run.mkdir()
    (run / "campaign.yaml").write_text(c.to_yaml())
    return run, c


def test_miscomputed_operator_shrinks_to_at_most_three_nodes_and_reproduces_alone(tmp_path):
    run, c = _run_dir(tmp_path, {"class": "tests.stacks.numeric_backends:MiscomputeOp", "device": "cpu"})
    v = capture(create_seed("timm/test_vit")).variant
    record = {"campaign": "t", "variant_id": "timm/test_vit#0", "seed_id": "timm/test_vit", "seed_source": "timm",
              "family": "vision_transformer", "backend": "miscompute@cpu", "status": "mismatch", "stage": "compare",
              "symptom": "numeric", "verdict": "target-divergent", "first_div_op": "aten.gelu.default",
              "output_kind": "class_logits", "output_dtype": "float32", "tol_ratio": 4000.0, "graph_hash": v.graph_hash,
              "recipe": '{"mutations":[],"rng":0,"seed":"timm/test_vit"}'}
    result = reproduce(run, record, tmp_path / "repro", max_calls=120, allow_plugins=True)
    assert result.status == "reproducible", result
    assert result.nodes_before > 100 and result.nodes_after <= 3
    folder = tmp_path / "repro"
    assert {"repro.py", "report.md", "shrink.json"} <= {p.name for p in folder.iterdir()}  # inputs inline
    code = (folder / "repro.py").read_text()
    assert "import gapfuzz" not in code and "from gapfuzz" not in code and "gelu" in code
    assert json.loads((folder / "shrink.json").read_text())["candidates_bisected"] == 0
    # a plug-in stack is its own class, which the reproducer imports from where the campaign named it, on one screen
    assert result.form.startswith("MiscomputeOp (plug-in)") and \
        "from tests.stacks.numeric_backends import MiscomputeOp" in code and result.lines < 40, code
    proc = subprocess.run([sys.executable, "repro.py"], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert proc.returncode == 1 and " differ at " in proc.stdout, proc.stdout + proc.stderr
    report = (folder / "report.md").read_text()
    for part in ("## Summary", "## Reproduce", "## Expected and actual", "## How it was found", "## Environment",
                 "torch "):
        assert part in report
    assert len(report.splitlines()) < 120 and "flags" not in report.lower()  # no page of CPU flags


def test_a_bug_only_a_probe_shows_is_reproduced_with_that_probe_s_inputs(tmp_path):
    """ReLU that drops NaN: the example inputs hold no NaN, the NaN probe does, and so must inputs.pt."""
    run, c = _run_dir(tmp_path, {"class": "tests.stacks.numeric_backends:NanToZeroInOneOp", "device": "cpu"})
    from gapfuzz.workers.run.probes import Probe

    probe = Probe.of("special", {"value": "nan", "pattern": "single"}, 12345)
    record = {"campaign": "t", "variant_id": "ops/nn.functional.relu/float32/0#0", "backend": "nan-to-zero@cpu",
              "seed_id": "ops/nn.functional.relu/float32/0", "status": "mismatch", "stage": "compare",
              "symptom": "nonfinite", "verdict": "target-divergent", "output_dtype": "float32", "probe": probe.name,
              "probe_recipe": probe.recipe(),
              "recipe": '{"mutations":[],"rng":0,"seed":"ops/nn.functional.relu/float32/0"}'}
    result = reproduce(run, record, tmp_path / "repro", max_calls=60, tries=1, allow_plugins=True)
    assert result.status == "reproducible" and result.nodes_after <= 2, result
    code = (tmp_path / "repro" / "repro.py").read_text()
    assert "nan" in code.split("inputs = ", 1)[1].split("\n")[0]  # the probe's NaN, inline
    assert "special:nan:single" in (tmp_path / "repro" / "report.md").read_text()


def test_shrink_candidates_are_judged_once_without_tier_2_explanations_or_bisection():
    """``core.bugs``: a candidate's run is not bisected. Each shrink candidate of an Inductor finding would
    otherwise be bisected (the campaign's ``compare.bisect``), costing a bisection per predicate call."""
    from gapfuzz.fuzzer.repro.replayed import candidate_settings

    c = from_dict({"seeds": [{"source": "timm", "include": ["test_resnet"]}],
                   "backends": {"targets": ["inductor@cpu"]}, "compare": {"bisect": True, "explain": True}})
    target = c.backends.targets[0]
    s = candidate_settings(c, c.reference, target)
    assert (s.bisect, s.explain, s.align, s.repeats, s.retry_faults) == (False, False, False, 1, False)
    assert s.ledger is None and s.probes is None and s.device_references == {}  # the predicate's own probe
    assert s.reference == "eager@cpu" and s.oracle == "eager-fp64@cpu" and s.compare == c.compare.settings
    assert s.timeout_s == c.run.timeout_s and s.detection_adapter == c.compare.detection_adapter


def test_shrinker_consider_skips_seen_and_larger_candidates():
    v = capture(create_seed("timm/test_resnet")).variant
    calls = []
    sh = Shrinker(v, lambda cand: calls.append(cand) or True)
    assert not sh.consider(v)  # already seen
    from gapfuzz.fuzzer.repro.shrink.passes import cut_after

    first = next(n.name for n in v.gm.graph.nodes if n.op == "call_function")
    small = cut_after(v, first)
    assert sh.consider(small) and sh.current is small and len(calls) == 1
    assert not sh.consider(small) and not sh.consider(v) and len(calls) == 1  # seen, then larger: no call


def test_isolation_takes_a_model_to_the_keyed_op_in_one_check_and_leaves_an_op_it_lacks_to_the_passes():
    from gapfuzz.fuzzer.repro.shrink.passes import isolating

    v = capture(create_seed("timm/test_resnet")).variant
    calls = []

    def holds_relu(cand):
        calls.append(cand.node_count)
        return "aten.relu.default" in cand.ops
    sh = Shrinker(v, holds_relu)
    assert sh.apply(isolating("aten.relu")) and sh.current.node_count == 1 and calls == [1]  # a failure's op
    assert sh.current.ops == ["aten.relu.default"]
    untouched = Shrinker(v, holds_relu)
    for op in ("aten.lgamma.default", "input:strided", "-"):  # not in the graph, an input, none: no check
        assert not untouched.apply(isolating(op)) and untouched.current is v
    assert calls == [1]


def test_an_input_shrinks_to_the_special_value_the_bug_needs_and_plain_values_become_zeros():
    from gapfuzz.fuzzer.repro.reproducers.literals import torch_literal
    from gapfuzz.fuzzer.repro.shrink.passes import VALUES

    v = capture(create_seed("ops/nn.functional.relu/float32/0")).variant
    x = torch.randn(2, 3, 10, 16, generator=torch.Generator().manual_seed(0))
    x[1, 2, 7, 11] = float("nan")
    v = v.with_graph(v.gm, (x,))

    def shows_nan(cand):  # the symptom: a NaN reaches the output
        return any(bool(o.isnan().any()) for o in torch.utils._pytree.tree_leaves(cand.gm(*cand.inputs)))
    final = Shrinker(v, shows_nan).run(VALUES)
    (t,) = final.inputs
    assert t.shape == (1, 1, 1, 1) and t.isnan().all(), t
    wide = torch.ones(4, 64)
    assert torch_literal(wide) == "torch.full((4, 64), 1, dtype=torch.float32)"  # one value, one short line
    from gapfuzz.fuzzer.repro.reproducers.literals import numpy_literal

    assert numpy_literal(wide.numpy() * 0.5) == "np.full((4, 64), 0.5, dtype=np.float32)"
    long = torch.randn(3, 40, generator=torch.Generator().manual_seed(1))
    text = torch_literal(long)
    assert max(map(len, text.splitlines())) <= 100 and torch.equal(eval(text, {"torch": torch}), long)  # noqa: S307


def test_the_reducer_keeps_a_divergence_only_while_its_bug_key_holds():
    def key(**fields):
        return bug_key({"backend": "t@cpu", "status": "mismatch", "symptom": "numeric", "output_dtype": "float32",
                        "tol_ratio": 50.0, **fields})

    ours = key(verdict="reference-divergent", first_div_op="aten.gelu.default")
    assert ours.shown_by(key(verdict="reference-divergent", tol_ratio=3.0), ["aten.gelu.default"])  # band may drop
    assert not ours.shown_by(key(verdict="target-divergent"), ["aten.gelu.default"])  # who float64 blames stays
    assert not ours.shown_by(key(verdict="reference-divergent"), ["aten.add.Tensor"])  # its op must stay
    # a located divergence's symptom is its node's, and the candidate's outputs must show that one: a
    # numeric bug does not shrink into a NaN-pattern one, nor the other way round
    assert not ours.shown_by(key(verdict="reference-divergent", symptom="nonfinite"), ["aten.gelu.default"])
    nan_bug = bug_key({"backend": "t@cpu", "status": "mismatch", "symptom": "value", "node_symptom": "nonfinite",
                       "verdict": "target-divergent", "first_div_op": "aten.conv2d.default", "output_dtype": "float32"})
    assert nan_bug.shown_by(key(verdict="target-divergent", symptom="nonfinite"), ["aten.conv2d.default"])
    assert not nan_bug.shown_by(key(verdict="target-divergent", symptom="numeric"), ["aten.conv2d.default"])
    # a divergence triage explains (bfloat16 precision) is not the unexplained defect
    assert not nan_bug.shown_by(key(verdict="target-divergent", symptom="nonfinite", explanation="bfloat16"),
                                ["aten.conv2d.default"])
    unlocated = key(verdict="reference-divergent")
    assert not unlocated.shown_by(key(verdict="reference-divergent", symptom="nonfinite"), ["aten.gelu.default"])
    assert not ours.shown_by(None, ["aten.gelu.default"])
    crash = bug_key({"backend": "t@cpu", "stack": "t", "device": "cpu", "status": "crash", "stage": "run",
                     "error_type": "SIGSEGV", "message": "Fatal Python error: Segmentation fault"})
    assert crash.shown_by(crash) and not crash.shown_by(key(verdict="target-divergent"))


class Cancellation(torch.nn.Module):
    """(x + 1e8) - 1e8: float32 loses x entirely, float64 keeps it."""

    def forward(self, x):
        return (x + 1e8) - 1e8


def _cancellation():
    from gapfuzz.seeds.capture import capture as cap
    from gapfuzz.seeds.spec import BuiltSeed, SeedInfo

    return cap(BuiltSeed(SeedInfo(id="test/cancel", source="test"), Cancellation(), (torch.ones(4),))).variant


@pytest.mark.parametrize("plugin, verdict", [("Float64Compute", "reference-divergent"),
                                             ("AddToOutputs", "ill-conditioned")])
def test_a_reproducer_exits_1_while_the_oracle_blames_as_its_cluster_did(tmp_path, plugin, verdict):
    """It used to exit 1 only when the target was further from float64 than eager: a reference-divergent
    or ill-conditioned cluster's reproducer said 'not reproduced' while the bug was there."""
    from gapfuzz.fuzzer.repro.code import reproducer, save_inputs
    from gapfuzz.fuzzer.repro.minimise import verify
    from gapfuzz.workers.run.registry import parse_backend

    v = _cancellation()
    target = parse_backend("x@cpu", cls_path=f"tests.stacks.numeric_backends:{plugin}")
    record = {"status": "mismatch", "verdict": verdict, "symptom": "numeric", "variant_id": "test/cancel#0"}
    (tmp_path / "repro.py").write_text(reproducer(v, target, record, "t", {"tolerances": {}, "multiplier": 3.0,
                                                                            "far": 1000.0}))
    save_inputs(v, tmp_path / "inputs.pt")
    failures, out = verify(tmp_path, tries=1, block_gapfuzz=False)
    assert failures == 1 and f"verdict {verdict}" in out and "the bug is present" in out, out


def test_the_reproducer_and_the_reducer_judge_with_the_campaigns_tolerances(tmp_path):
    """Both used to disagree: the reproducer had its own tolerance table."""
    from gapfuzz.core.tolerances import Tolerances
    from gapfuzz.fuzzer.repro.code import reproducer, save_inputs
    from gapfuzz.fuzzer.repro.minimise import verify
    from gapfuzz.fuzzer.repro.shrink.predicate import SameBug
    from gapfuzz.workers.run.registry import parse_backend
    from tests.helpers.judging import judge_settings

    v = _cancellation()
    target = parse_backend("x@cpu", {"by": 1e-3}, cls_path="tests.stacks.numeric_backends:AddToOutputs")
    ref, oracle = parse_backend("eager@cpu"), parse_backend("eager-fp64@cpu")
    record = {"status": "mismatch", "verdict": "ill-conditioned", "symptom": "numeric", "backend": target.name,
              "output_dtype": "float32", "tol_ratio": 88.0, "variant_id": "test/cancel#0"}
    key = bug_key(record)
    save_inputs(v, tmp_path / "inputs.pt")
    for tolerance, present in ((None, True), ([1e-2, 1e-2], False)):  # 1e-3 off: beyond the default, within 1e-2
        compare = {"tolerances": {"float32": tolerance} if tolerance else {}, "multiplier": 3.0, "far": 1.0}
        settings = judge_settings(ref.name, oracle.name, repeats=1, compare=Tolerances.from_dict(compare), align=False)
        same_bug = SameBug(target, ref, oracle, key, settings, "test/cancel")
        try:
            assert same_bug(v) is present, tolerance
        finally:
            same_bug.close()
        (tmp_path / "repro.py").write_text(reproducer(v, target, record, "t", compare))
        failures, out = verify(tmp_path, tries=1, block_gapfuzz=False)
        assert failures == int(present), out


def test_an_amplified_cluster_is_refused_with_one_line(tmp_path):
    from gapfuzz.fuzzer.repro.minimise import ReproError

    record = {"status": "mismatch", "verdict": "amplified", "symptom": "numeric", "backend": "inductor@cpu",
              "variant_id": "timm/x#1", "output_dtype": "float32"}
    with pytest.raises(ReproError, match="amplified rounding") as e:
        reproduce(tmp_path, record, tmp_path / "out")
    assert "\n" not in str(e.value) and not (tmp_path / "out").exists() and e.value.stage == "key"


def test_a_record_of_an_older_run_reads_typed_with_its_triage_columns_in_its_key():
    """The record is a ``RunRecord``: columns an older schema lacks take their defaults, what triage derived for
    the key (``dtype_specific``) still counts, and a nested column that does not read is named."""
    from gapfuzz.fuzzer.repro.record import ReproError, bug_of, record_of
    from gapfuzz.results.schema import RunRecord

    old = {"campaign": "t", "variant_id": "v#0", "seed_id": "v", "backend": "inductor@cpu", "status": "mismatch",
           "symptom": "numeric", "verdict": "target-divergent", "output_dtype": "float32", "schema_version": 1,
           "first_div_op": "aten.gelu.default", "recipe": '{"mutations":[],"rng":0,"seed":"v"}',
           "probe_recipe": float("nan"), "backend_options": None}
    r = record_of(old)
    assert isinstance(r, RunRecord) and record_of(r) is r and (r.mode, r.probe, r.probe_recipe) == (None, None, None)
    assert r.backend_options == {} and r.output_kind == "" and r.recipe == old["recipe"] and r.schema_version == 1
    assert bug_of(r) == bug_of(old) != bug_of({**old, "dtype_specific": True})  # its dtype, where triage says so
    for column in ("backend_options", "recipe"):
        with pytest.raises(ReproError, match=f"^v#0 on inductor@cpu: its record's {column} is not what gapfuzz "):
            record_of({**old, column: "{not json"})


def test_verify_does_not_wait_for_a_child_the_reproducer_left_behind(tmp_path):
    """A crashing stack may leave a forked child holding the output pipes; verify reads the exit
    status of the reproducer itself and kills what it left."""
    import time

    from gapfuzz.fuzzer.repro.minimise import verify

    (tmp_path / "repro.py").write_text(
        "import os, sys, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(600)\n"
        f"open({str(tmp_path / 'child.pid')!r}, 'w').write(str(pid))\n"
        "print('the bug is present')\n"
        "sys.exit(1)\n")
    failures, last = verify(tmp_path, tries=1, timeout=120)
    assert failures == 1 and "the bug is present" in last and "[exit status 1]" in last, last
    child = int((tmp_path / "child.pid").read_text())
    time.sleep(0.5)
    status = Path(f"/proc/{child}/status")
    assert not status.exists() or "State:\tZ" in status.read_text()  # gone, or dead and awaiting its reaper


def test_a_dead_random_op_is_cut_away_with_the_rest():
    """FX's dead-code elimination keeps a random op (an LSTM, for its dropout) whose result nobody uses; a
    reproducer kept a dead LSTM that way."""
    import torch
    import torch.fx as fx

    from gapfuzz.core.ir import Variant
    from gapfuzz.fuzzer.repro.shrink.passes import as_inputs, cut_after, cut_output

    aten = torch.ops.aten
    graph = fx.Graph()
    x = graph.placeholder("x")
    coin = graph.call_function(aten.bernoulli.p, (x, 0.5))
    relu = graph.call_function(aten.relu.default, (x,))
    total = graph.call_function(aten.add.Tensor, (coin, relu))
    graph.output((relu, total))
    v = Variant(fx.GraphModule(torch.nn.Module(), graph), (torch.randn(4),), ("a", "b"))
    values = {"x": v.inputs[0], relu.name: v.inputs[0].relu(), total.name: v.inputs[0].relu()}
    assert cut_output(v, relu.name).ops == cut_after(v, relu.name).ops == ["aten.relu.default"]
    assert as_inputs(v, {total.name}, values).ops == ["aten.relu.default"]  # the coin fed only the sum


def test_verify_runs_a_reproducer_where_no_file_of_its_folder_can_stand_in_for_torch(tmp_path):
    """A run folder is data: a ``torch.py`` beside ``repro.py`` is neither imported nor run."""
    from gapfuzz.fuzzer.repro.minimise import verify

    marker = tmp_path / "marker"
    (tmp_path / "torch.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (tmp_path / "repro.py").write_text("import sys\nimport torch\nprint(torch.__file__)\nsys.exit(1)\n")
    failures, last = verify(tmp_path, tries=1, timeout=120)
    assert failures == 1 and "site-packages" in last and not marker.exists(), last
