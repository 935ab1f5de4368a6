"""Reproducers keep the bug's conditions (layouts, the recipe's mutations, the campaign's timeout) and
hold only the check that shows it: a failure passes on its own exception alone."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gapfuzz.core.ir import Variant, clone_exact
from gapfuzz.fuzzer.config.campaign import from_dict
from gapfuzz.fuzzer.repro.code import layouts, reproducer, save_inputs
from gapfuzz.fuzzer.repro.minimise import reproduce, verify
from gapfuzz.fuzzer.repro.shrink.core import Shrinker
from gapfuzz.fuzzer.repro.shrink.passes import _narrowed, as_inputs, laid_out_like, with_tensor
from gapfuzz.seeds import create_seed
from gapfuzz.seeds.capture import capture
from gapfuzz.workers.run.registry import parse_backend

REPO = Path(__file__).resolve().parents[2]
GELU = "ops/nn.functional.gelu/float32/1"  # one operator on a 10 x 10 input


def _gapped(shape):
    wide = torch.zeros((*shape[:-1], 2 * shape[-1]))
    view = wide[..., ::2]
    view.copy_(torch.randn(shape))
    return view


def _laid_out_inputs():
    offset = torch.randn(40)[3:23:2]  # a gapped view that starts inside its storage
    channels_last = torch.randn(2, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    return _gapped((4, 6)), torch.randn(5, 7).t(), channels_last, offset


def _variant(inputs) -> Variant:
    v = capture(create_seed(GELU)).variant
    return v.with_graph(v.gm, tuple(inputs[:1]) + tuple(inputs[1:]))


def test_inputs_pt_keeps_each_inputs_sizes_strides_and_storage_offset(tmp_path):
    """inputs.pt used to hold ``clone()``s, which make a gapped view such as ``buffer[..., ::2]`` dense."""
    from gapfuzz.fuzzer.repro.checks import exact

    inputs = _laid_out_inputs()
    v = _variant(inputs)
    save_inputs(v, tmp_path / "inputs.pt")
    saved = torch.load(tmp_path / "inputs.pt", weights_only=True)["inputs"]
    assert layouts(saved) == layouts([clone_exact(t) for t in inputs])  # what every stack of the campaign was fed
    assert [t.stride() for t in saved] == [t.stride() for t in inputs] and not saved[0].is_contiguous()
    rebuilt = [exact(t, "cpu") for t in saved]  # as repro.py feeds them
    assert layouts(rebuilt) == layouts(saved) and all(torch.equal(a, b) for a, b in zip(rebuilt, inputs))
    assert exact(inputs[3], "cpu").storage_offset() == 3


def test_a_pass_that_makes_an_input_smaller_keeps_its_layout():
    inputs = _laid_out_inputs()
    v = _variant(inputs)
    for i, d, expected in ((0, 1, (4, 2)), (0, 0, (12, 2)), (1, 0, (1, 2)), (2, 1, (32, 1, 8, 2)), (3, 0, (2,))):
        t = _narrowed(v, i, d, 2).inputs[i]
        assert t.stride() == expected and torch.equal(t, inputs[i].narrow(d, 0, 2)), (i, d, t.stride())
    assert _narrowed(v, 3, 0, 2).inputs[3].storage_offset() == 3
    assert _narrowed(v, 2, 1, 2).inputs[2].is_contiguous(memory_format=torch.channels_last)
    broadcast = laid_out_like(torch.ones(3, 1).expand(3, 4).narrow(1, 0, 2), torch.ones(3, 1).expand(3, 4))
    assert broadcast.stride() == (1, 0)


def test_weights_and_values_a_pass_rebuilds_keep_their_layout():
    import torch.fx as fx

    root = torch.nn.Module()
    root.register_buffer("w", torch.randn(2, 3, 4, 4).contiguous(memory_format=torch.channels_last))
    graph = fx.Graph()
    x = graph.placeholder("x")
    w = graph.get_attr("w")
    step = graph.call_function(torch.ops.aten.slice.Tensor, (x, 1, 0, 8, 2))  # a gapped intermediate
    total = graph.call_function(torch.ops.aten.add.Tensor, (step, 1.0))
    graph.output((total, graph.call_function(torch.ops.aten.relu.default, (w,))))
    v = Variant(fx.GraphModule(root, graph), (torch.randn(4, 8),), ("a", "b"))
    simple = with_tensor(v, "w", torch.ones(2, 3, 4, 4))
    assert simple.tensors()["w"].is_contiguous(memory_format=torch.channels_last)
    fed = as_inputs(v, {step.name}, {step.name: v.inputs[0][:, ::2]})
    assert fed.inputs[-1].stride() == (8, 2)


def test_dropping_a_mutation_is_a_shrink_pass_through_consider_its_cache_and_its_budget():
    """Dropping mutations called the predicate itself once: no cache, no call budget, no statistics. It is a
    pass among the others now, named, counted and timed in shrink.json's statistics like them."""
    from gapfuzz.fuzzer.generate import replay
    from gapfuzz.fuzzer.recipe import Recipe
    from gapfuzz.fuzzer.repro.shrink.passes import dropping_mutations
    from gapfuzz.workers.run.probes import Probe

    transpose, step = (["strided_input", {"input": 0, "how": how}] for how in ("transpose", "step"))
    for verdict, calls, dropped in ((False, 1, 0), (True, 2, 2)):
        recipe = Recipe(GELU, [transpose, step])  # without the transpose: the same variant, seen, not called
        seen = []
        sh = Shrinker(replay(recipe), lambda c: seen.append(c) or verdict)
        sh.apply(dropping_mutations(recipe, None, Probe()))
        stats = sh.report()["passes"]["drop_mutations"]
        assert len(seen) == calls == sh.calls == stats["calls"] and stats["accepted"] == dropped
        assert stats["tried"] == 2 and stats["seconds"] > 0 and len(recipe.mutations) == 2 - dropped
    recipe = Recipe(GELU, [transpose, step])
    sh = Shrinker(replay(recipe), lambda c: pytest.fail("called past the budget"), max_calls=0)
    sh.apply(dropping_mutations(recipe, None, Probe()))
    assert sh.stats["drop_mutations"].tried == 2 and sh.stats["drop_mutations"].accepted == 0


def _run_dir(tmp_path, target: dict, **run):
    c = from_dict({"name": "t", "seeds": [{"source": "ops", "include": ["nn.functional.gelu"]}],
                   "backends": {"targets": [target]}, **({"run": run} if run else {})}, "t")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "campaign.yaml").write_text(c.to_yaml())
    return folder


def test_a_bug_that_needs_a_strided_input_is_reproduced_3_times_in_3(tmp_path):
    """A stack that reads a non-contiguous input as if it were dense: the strided_input mutation stays
    in the recipe, shrinking keeps the gaps and repro.py rebuilds them from the storage with as_strided."""
    run = _run_dir(tmp_path, {"class": "tests.stacks.repro_backends:IgnoresStrides", "device": "cpu"})
    record = {"campaign": "t", "variant_id": f"{GELU}#0", "seed_id": GELU, "backend": "ignores-strides@cpu",
              "status": "mismatch", "stage": "compare", "symptom": "numeric", "verdict": "target-divergent",
              "output_dtype": "float32", "mode": "inference",
              "recipe": json.dumps({"seed": GELU, "mutations": [["strided_input", {"input": 0, "how": "step"}]],
                                    "rng": 0})}
    result = reproduce(run, record, tmp_path / "repro", max_calls=40, allow_plugins=True)
    assert result.status == "reproducible" and result.failures == result.tries == 3, result
    assert result.mutations_dropped == 0 and result.stats["passes"]["drop_mutations"]["calls"] == 1
    code = (tmp_path / "repro" / "repro.py").read_text()
    assert result.form == "IgnoresStrides (plug-in)" and not (tmp_path / "repro" / "inputs.pt").exists()
    rebuilt = re.search(r"inputs = \((torch\.tensor\(.*\)\.as_strided\(.*\)),\)", code)  # the storage, re-strided
    saved = eval(rebuilt.group(1), {"torch": torch})  # noqa: S307 - the test's own reproducer
    assert saved.numel() < 100 and saved.stride()[-1] == 2, layouts([saved])  # smaller, and still gapped
    assert len(code.splitlines()) < 80, len(code.splitlines())


def _gelu():
    return capture(create_seed(GELU)).variant


def test_a_one_operator_divergence_reproducer_is_under_80_lines_and_prints_both_sides(tmp_path):
    v = _gelu()
    target = parse_backend("miscompute@cpu", cls_path="tests.stacks.numeric_backends:MiscomputeOp")
    record = {"status": "mismatch", "verdict": "target-divergent", "symptom": "numeric", "variant_id": "v#0"}
    code = reproducer(v, target, record, "t", {"tolerances": {}, "multiplier": 3.0, "far": 1000.0})
    assert len(code.splitlines()) < 80, len(code.splitlines())
    for absent in ("task_agreement", "greedy_nms", "iou", "ulp", "attribute", "prepare_eager_fp64", "train_step"):
        assert f"def {absent}(" not in code  # the campaign's judge stays behind: one plain comparison
    (tmp_path / "repro.py").write_text(code)
    save_inputs(v, tmp_path / "inputs.pt")
    failures, out = verify(tmp_path, tries=1, block_gapfuzz=False)
    assert failures == 1 and "max |actual - expected|" in out and "expected 2.85" in out, out


@pytest.mark.parametrize("options, reproduced", [
    ({"type": "ValueError", "message": "tile {n} does not fit"}, True),  # the same template, another number
    ({"type": "ValueError", "message": "no kernel for {n} threads"}, False),
    ({"type": "TypeError", "message": "tile {n} does not fit"}, False),
])
def test_a_failure_reproducer_exits_1_on_its_own_failure_and_3_on_another(tmp_path, options, reproduced):
    v = _gelu()
    record = {"status": "error", "stage": "run", "error_type": "ValueError", "message": "tile 64 does not fit",
              "backend": "raises@cpu", "variant_id": "v#0"}
    target = parse_backend("raises@cpu", options, cls_path="tests.stacks.repro_backends:Raises")
    code = reproducer(v, target, record, "t", {})
    assert len(code.splitlines()) < 90, len(code.splitlines())
    (tmp_path / "repro.py").write_text(code)
    save_inputs(v, tmp_path / "inputs.pt")
    failures, out = verify(tmp_path, tries=1, block_gapfuzz=False)
    assert failures == int(reproduced), out
    assert ("[exit status 1]" if reproduced else "[exit status 3]") in out and (
        reproduced or "a different failure" in out), out


def test_the_reproducers_template_is_core_templates():
    from gapfuzz.core.templates import template
    from gapfuzz.fuzzer.repro.checks import rules_used
    from gapfuzz.fuzzer.repro.checks import template as in_repro
    from tests.analysis.test_triage import SAME

    for message in [m for pair in SAME.values() for m in pair] + ["", "index 3 out of range\n\n  at 0x7f"]:
        assert in_repro(message) == template(message) == in_repro(message, rules_used(message)), message


def test_a_hang_is_reproduced_when_it_outlasts_the_campaigns_timeout(tmp_path):
    v = _gelu()
    record = {"status": "timeout", "stage": "run", "cause": "limit:timeout 2s", "error_type": "timeout",
              "backend": "hangs@cpu", "variant_id": "v#0"}
    target = parse_backend("hangs@cpu", cls_path="tests.stacks.repro_backends:Hangs")
    save_inputs(v, tmp_path / "inputs.pt")
    (tmp_path / "repro.py").write_text(reproducer(v, target, record, "t", {}, timeout_s=600))
    assert verify(tmp_path, tries=1, timeout=3, block_gapfuzz=False, hang_reproduces=True)[0] == 1
    failures, out = verify(tmp_path, tries=1, timeout=3, block_gapfuzz=False)
    assert failures == 0 and "no result within 3 s: not the bug" in out, out
    (tmp_path / "repro.py").write_text(reproducer(v, target, record, "t", {}, timeout_s=1))
    failures, out = verify(tmp_path, tries=1, timeout=120, block_gapfuzz=False)  # its own watchdog: exit 1
    assert failures == 1 and "Timeout (0:00:01)" in out and "[exit status 1]" in out, out


def test_reproduce_verifies_a_hang_with_the_campaigns_timeout(tmp_path):
    import time

    run = _run_dir(tmp_path, {"class": "tests.stacks.repro_backends:Hangs", "device": "cpu"}, timeout_s=3)
    record = {"campaign": "t", "variant_id": f"{GELU}#0", "seed_id": GELU, "backend": "hangs@cpu", "stack": "hangs",
              "device": "cpu", "status": "timeout", "stage": "run", "cause": "limit:timeout 3s",
              "error_type": "timeout", "recipe": json.dumps({"seed": GELU, "mutations": [], "rng": 0})}
    t0 = time.perf_counter()
    result = reproduce(run, record, tmp_path / "repro", max_calls=2, tries=2, allow_plugins=True)
    assert result.status == "reproducible" and result.failures == 2, result
    assert result.stopped_at == result.reason == "" and list(result.stages) == [  # each stage timed, in order
        "folder", "key", "campaign", "release", "recipe", "replay", "settings", "predicate", "confirm", "shrink",
        "explain", "write", "verify", "across", "report"]
    assert time.perf_counter() - t0 < 300  # verify waited 3 s a run, not its old 600
    assert "TIMEOUT_S = 3.0" in (tmp_path / "repro" / "repro.py").read_text()


def test_a_reproduction_names_the_stage_that_stopped_it_and_why_in_shrink_json(tmp_path, monkeypatch):
    """A representative that no longer shows its bug stops at confirm; a stage that fails once the folder is
    the reproducer's is named in shrink.json with its error, which is raised as before."""
    from gapfuzz.fuzzer.repro.replayed import Replayed

    run = _run_dir(tmp_path, {"class": "tests.stacks.repro_backends:Raises", "device": "cpu"})  # raises ValueError
    record = {"campaign": "t", "variant_id": f"{GELU}#0", "seed_id": GELU, "backend": "raises@cpu", "stack": "raises",
              "device": "cpu", "status": "error", "stage": "run", "error_type": "KeyError", "message": "no such key",
              "recipe": json.dumps({"seed": GELU, "mutations": [], "rng": 0})}
    result = reproduce(run, record, tmp_path / "repro", max_calls=4, tries=1, allow_plugins=True)
    saved = json.loads((tmp_path / "repro" / "shrink.json").read_text())
    assert result.status == saved["status"] == "not-reproduced" and result.predicate_calls >= 1, result
    assert saved["stopped_at"] == "confirm" and "did not show its bug again" in saved["reason"], saved
    assert "confirm" in saved["stages"] and "shrink" not in saved["stages"]
    assert not (tmp_path / "repro" / "repro.py").exists()

    def broken(self, fresh):
        raise RuntimeError("no sandbox here")
    monkeypatch.setattr(Replayed, "same_bug", broken)
    with pytest.raises(RuntimeError, match="no sandbox here"):
        reproduce(run, record, tmp_path / "repro", allow_plugins=True)
    saved = json.loads((tmp_path / "repro" / "shrink.json").read_text())
    assert saved["stopped_at"] == "predicate" and saved["reason"] == "RuntimeError: no sandbox here", saved


def test_repro_lengths_prints_each_reproducers_lines_the_median_and_the_largest(tmp_path):
    for name, n in (("c-a", 50), ("d-b", 70), ("d-c", 90)):
        (tmp_path / "repros" / name).mkdir(parents=True)
        (tmp_path / "repros" / name / "repro.py").write_text("x = 1\n" * n)
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "repro-lengths"), str(tmp_path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "median 70 lines, largest 90 (d-c)" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("fault, reproduced", [("segfault", True), ("raise", False)])
def test_a_crash_reproducer_counts_its_signal_and_not_an_exception(tmp_path, fault, reproduced):
    from gapfuzz.core.bugs import bug_key
    from gapfuzz.fuzzer.repro.minimise import reproduced_by

    v = _gelu()
    record = {"status": "crash", "stage": "run", "cause": "signal:SIGSEGV", "error_type": "SIGSEGV",
              "backend": "faulty@cpu", "variant_id": "v#0"}
    target = parse_backend("faulty@cpu", {"fault": fault}, cls_path="tests.stacks.faulty_backend:Faulty")
    (tmp_path / "repro.py").write_text(reproducer(v, target, record, "t", {}))
    save_inputs(v, tmp_path / "inputs.pt")
    codes = reproduced_by(record, bug_key(record))
    assert codes == (1, -11)
    failures, out = verify(tmp_path, tries=1, block_gapfuzz=False, reproduced=codes)
    assert failures == int(reproduced) and ("[exit status -11]" if reproduced else "a different failure") in out, out
