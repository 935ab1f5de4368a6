"""Minimised reproducers: a mis-computed operator shrinks to a few nodes and reproduces on its own."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fuzzer.campaign import from_dict
from fuzzer.repro import BLOCK_GAPFUZZ, reproduce
from fuzzer.shrink.core import Shrinker
from seeds import create_seed
from seeds.capture import capture

pytestmark = pytest.mark.ray  # starts sandboxes, though not Ray itself


def _run_dir(tmp_path, target: dict):
    c = from_dict({"name": "t", "seeds": [{"source": "timm", "include": ["test_vit"]}],
                   "backends": {"targets": [target]}}, "t")
    run = tmp_path / "run"
    run.mkdir()
    (run / "campaign.yaml").write_text(c.to_yaml())
    return run, c


def test_miscomputed_operator_shrinks_to_at_most_three_nodes_and_reproduces_alone(tmp_path):
    run, c = _run_dir(tmp_path, {"class": "tests.numeric_backends:MiscomputeOp", "device": "cpu"})
    v = capture(create_seed("timm/test_vit")).variant
    record = {"campaign": "t", "variant_id": "timm/test_vit#0", "seed_id": "timm/test_vit", "seed_source": "timm",
              "family": "vision_transformer", "backend": "miscompute@cpu", "status": "mismatch", "stage": "compare",
              "symptom": "numeric", "verdict": "target-divergent", "first_div_op": "aten.gelu.default",
              "output_kind": "class_logits", "output_dtype": "float32", "graph_hash": v.graph_hash,
              "recipe": '{"mutations":[],"rng":0,"seed":"timm/test_vit"}'}
    result = reproduce(run, record, tmp_path / "repro", max_calls=120)
    assert result.status == "reproducible", result
    assert result.nodes_before > 100 and result.nodes_after <= 3
    folder = tmp_path / "repro"
    assert {"repro.py", "inputs.pt", "report.md", "shrink.json"} <= {p.name for p in folder.iterdir()}
    code = (folder / "repro.py").read_text()
    assert "fuzzer" not in code and "workers" not in code and "aten.gelu.default" in code
    proc = subprocess.run([sys.executable, "-c", BLOCK_GAPFUZZ + "import runpy; runpy.run_path('repro.py', "
                           "run_name='__main__')"], cwd=folder, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = (folder / "report.md").read_text()
    for part in ("## Summary", "## Reproduce", "## Expected and actual", "## How it was found", "## Environment",
                 "PyTorch version"):
        assert part in report


def test_shrinker_consider_skips_seen_and_larger_candidates():
    v = capture(create_seed("timm/test_resnet")).variant
    calls = []
    sh = Shrinker(v, lambda cand: calls.append(cand) or True)
    assert not sh.consider(v)  # already seen
    from fuzzer.shrink.passes import cut_after

    first = next(n.name for n in v.gm.graph.nodes if n.op == "call_function")
    small = cut_after(v, first)
    assert sh.consider(small) and sh.current is small and len(calls) == 1
    assert not sh.consider(small) and not sh.consider(v) and len(calls) == 1  # seen, then larger: no call


def test_discrepancy_signature_keeps_who_the_oracle_blames():
    from fuzzer.shrink.predicate import Signature
    from workers.outcome import RunOutcome

    def outcome(verdict):
        return RunOutcome(backend="t", stack="t", device="cpu", status="mismatch", figures={"verdict": verdict, "symptom": "numeric"})

    ours = Signature.of({"status": "mismatch", "symptom": "numeric", "verdict": "reference-divergent"})
    assert ours.matches(outcome("reference-divergent"), [])
    assert not ours.matches(outcome("target-divergent"), [])
    legacy = Signature.of({"status": "mismatch", "symptom": "numeric"})  # records without a verdict
    assert legacy.matches(outcome("target-divergent"), []) and not legacy.matches(outcome("ill-conditioned"), [])


def test_verify_does_not_wait_for_a_child_the_reproducer_left_behind(tmp_path):
    """A crashing stack may leave a forked child holding the output pipes; verify reads the exit
    status of the reproducer itself and kills what it left."""
    import time

    from fuzzer.repro import verify

    (tmp_path / "repro.py").write_text(
        "import os, sys, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(600)\n"
        "open('child.pid', 'w').write(str(pid))\n"
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

    from fuzzer.shrink.passes import as_inputs, cut_after, cut_output
    from workers.ir import Variant

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
