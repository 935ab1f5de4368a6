#!/usr/bin/env python
"""gapfuzz's shrinker against PyTorch's minifier on the same failing graphs and the same predicate.

    python scripts/bench_minifier.py

Each case is a real captured model and a stack with one known defect (an operator computed
wrongly, one node rounded to bfloat16, an operator without a lowering). Both tools get the
same predicate ("still the same bug": same verdict and symptom and operator, or the same error
template), counted per call; the table gives final call nodes and predicate calls side by side.
gapfuzz's figures are for its graph passes (truncate, delta debugging, drop outputs), the
counterpart of the minifier's strategies; its full pipeline (inputs and weights shrunk too)
is shown beside them.
"""
from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the test-only stacks live in tests/

import torch
import torch.fx as fx
from torch._functorch.fx_minifier import minifier

from gapfuzz.core.bugs import DIVERGENT, Stage, Status, Symptom, Verdict, bug_key
from gapfuzz.core.ir import Variant
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.fuzzer.repro.shrink.core import Shrinker, counted
from gapfuzz.fuzzer.repro.shrink.passes import DEFAULT_PASSES, delta_debug, drop_outputs, truncate
from gapfuzz.seeds import create_seed
from gapfuzz.seeds.capture import capture
from gapfuzz.workers.judge.verdict import judge_outputs
from gapfuzz.workers.run.executor import Executor
from gapfuzz.workers.run.registry import parse_backend

NUMERIC = {"status": Status.MISMATCH, "symptom": Symptom.NUMERIC, "verdict": Verdict.TARGET_DIVERGENT,
           "output_dtype": "float32"}
GELU = {**NUMERIC, "first_div_op": "aten.gelu.default"}
CASES = [  # seed, test stack (tests/stacks/numeric_backends.py), options, signature
    ("timm/test_vit", "MiscomputeOp", {}, GELU),
    ("timm/test_mambaout", "MiscomputeOp", {}, GELU),
    ("timm/test_coatnet", "MiscomputeOp", {}, GELU),
    # the rounded node's operator is the first divergent op that tier 2 reports, and the predicate
    # keeps it: without it, a graph of no operator "shows" the bug once that node became an input
    ("timm/test_coatnet", "RoundNodeToBf16", {"node": "conv2d_14"}, {**NUMERIC, "first_div_op": "aten.conv2d.default"}),
    ("timm/test_maxvit", "RoundNodeToBf16", {"node": "view_16"}, {**NUMERIC, "first_div_op": "aten.view.default"}),
    ("timm/test_convnext", "RoundNodeToBf16", {"node": "add_2"}, {**NUMERIC, "first_div_op": "aten.add.Tensor"}),
    ("timm/test_efficientnet_evos", "RaiseOnOp", {"op": "aten.silu.default"},
     {"status": Status.UNSUPPORTED, "stage": Stage.COMPILE, "error_type": "NotImplementedError",
      "message": "no lowering for aten.silu.default in node group of 1 nodes"}),
]


class InProcessBug:
    """The same-bug predicate (the cluster's bug key), run in this process (both tools pay the same per call)."""

    def __init__(self, stack: str, options: dict, cluster: dict):
        self.target = parse_backend("x@cpu", options, cls_path=f"tests.stacks.numeric_backends:{stack}")
        self.specs = [parse_backend("eager@cpu"), parse_backend("eager-fp64@cpu")]
        self.where = {"backend": self.target.name, "stack": self.target.stack, "device": "cpu"}
        self.key = bug_key({**self.where, **cluster})

    def __call__(self, v: Variant) -> bool:
        ex = Executor()
        try:
            ex.load("v", v.to_payload())
            ref, oracle, out = (ex.run("v", s, 1) for s in (*self.specs, self.target))
        except Exception:  # noqa: BLE001 - a candidate that cannot even load is not the bug
            return False
        if ref.status != Status.OK:
            return False
        fields = {**self.where, "status": out.status, "stage": out.stage, "error_type": out.error_type,
                  "message": out.message}
        if out.status == Status.OK:
            fields.update(judge_outputs(out.outputs, ref.outputs, oracle.outputs, Tolerances(), "tensor",
                                        ["out"]).columns())
            fields["status"] = Status.MISMATCH if fields["verdict"] in DIVERGENT else Status.OK
        return self.key.shown_by(bug_key(fields), v.ops)  # gapfuzz's own predicate, in this process


def call_nodes(gm: fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")


def run_case(seed, stack, options, signature):
    v = capture(create_seed(seed)).variant
    bug = InProcessBug(stack, options, signature)
    if not bug(v):
        print(f"skipped {seed} on {stack}: the whole graph does not show the bug", file=sys.stderr)
        return None
    t0 = time.perf_counter()
    ours, our_calls = counted(bug)
    graph_only = Shrinker(v, ours, max_calls=1000).run([truncate, delta_debug, drop_outputs])
    graph_calls = sum(our_calls.values())
    t1 = time.perf_counter()
    theirs, their_calls = counted(lambda gm, inps: bug(Variant(gm, tuple(inps), ("out",))))
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        small_gm, _ = minifier(v.gm, list(v.inputs), theirs, dump_state=lambda *a: None)
    t2 = time.perf_counter()
    full = Shrinker(graph_only, ours, max_calls=300).run(DEFAULT_PASSES)
    full_calls = sum(our_calls.values())
    print(f"{seed} on {stack}: gapfuzz graph passes {t1 - t0:.0f} s, PyTorch minifier {t2 - t1:.0f} s, "
          f"gapfuzz full {time.perf_counter() - t2:.0f} s", file=sys.stderr, flush=True)
    return {"seed": seed, "stack": stack, "nodes": v.node_count, "ours_nodes": graph_only.node_count,
            "ours_calls": graph_calls, "full_nodes": full.node_count, "full_calls": full_calls,
            "full_inputs": sum(t.numel() for t in full.inputs), "theirs_nodes": call_nodes(small_gm),
            "theirs_calls": sum(their_calls.values())}


def main() -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--match", default="", help="only the cases whose seed or stack contains this")
    a = p.parse_args()
    torch.set_num_threads(1)
    cases = [c for c in CASES if a.match in f"{c[0]} on {c[1]}"]
    rows = [r for r in (run_case(*case) for case in cases) if r is not None]
    head = f"{'case':44s} {'start':>5s} | {'gapfuzz graph passes':>21s} | {'PyTorch minifier':>17s} | gapfuzz full"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['seed'] + ' on ' + r['stack']:44s} {r['nodes']:5d} | "
              f"{r['ours_nodes']:4d} nodes {r['ours_calls']:4d} calls"
              f" | {r['theirs_nodes']:4d} nodes {r['theirs_calls']:4d} calls | {r['full_nodes']} nodes, "
              f"{r['full_calls']} calls, {r['full_inputs']} input elements")
    n = len(rows)
    print(f"\ntotals: gapfuzz {sum(r['ours_nodes'] for r in rows)} nodes in "
          f"{sum(r['ours_calls'] for r in rows)} calls; "
          f"PyTorch minifier {sum(r['theirs_nodes'] for r in rows)} nodes in "
          f"{sum(r['theirs_calls'] for r in rows)} calls "
          f"({n} cases)")
    no_larger = all(r["ours_nodes"] <= r["theirs_nodes"] for r in rows)
    no_more = all(r["ours_calls"] <= r["theirs_calls"] for r in rows)
    print(f"gapfuzz no larger in every case: {no_larger}; no more calls in every case: {no_more}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
