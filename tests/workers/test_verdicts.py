"""Three tiers and attribution: symptoms on constructed outputs, blame with the fp64 oracle,
the first divergent node, amplified rounding, and the detection adapter."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from gapfuzz.core.tolerances import Tolerances
from gapfuzz.seeds.capture import capture
from gapfuzz.seeds.spec import BuiltSeed, SeedInfo
from gapfuzz.workers.judge.align import AlignLedger, Location
from gapfuzz.workers.judge.compare import compare
from gapfuzz.workers.judge.task import task_agreement
from gapfuzz.workers.run.messages import RunRequest
from gapfuzz.workers.run.registry import parse_backend
from gapfuzz.workers.run.runner import run_variant
from gapfuzz.workers.run.sandbox import Sandbox
from tests.helpers.judging import judge_settings

S = Tolerances()


def _t(*v, dtype=torch.float32):
    return torch.tensor(v, dtype=dtype)


# ------------------------------------------------------------------ tier 1 on constructed outputs
def test_both_nan_agree_and_nan_against_a_number_does_not():
    assert compare([_t(1.0, math.nan)], [_t(1.0, math.nan)], S).passed
    c = compare([_t(1.0, math.nan)], [_t(1.0, 2.0)], S)
    assert c.symptom == "nonfinite" and c.nonfinite_mismatch == 1
    assert compare([_t(math.inf)], [_t(-math.inf)], S).symptom == "nonfinite"


def test_signed_zeros_agree_and_are_counted():
    c = compare([_t(0.0, -0.0)], [_t(-0.0, 0.0)], S)
    assert c.passed and c.signed_zero_mismatch == 2 and c.max_abs_err == 0


def test_shape_dtype_structure_and_integer_symptoms():
    assert compare([torch.zeros(2, 3)], [torch.zeros(3, 2)], S).symptom == "shape"
    assert compare([torch.zeros(2)], [torch.zeros(2), torch.zeros(2)], S).symptom == "structure"
    assert compare([torch.zeros(2)], [torch.zeros(2, dtype=torch.int64)], S).symptom == "dtype"
    c = compare([_t(1, 2, 3, dtype=torch.int64)], [_t(1, 2, 4, dtype=torch.int64)], S)
    assert c.symptom == "integer" and c.max_abs_err == 1
    assert compare([_t(True, False, dtype=torch.bool)], [_t(True, True, dtype=torch.bool)], S).symptom == "integer"


def test_dict_and_list_outputs_are_compared_leaf_by_leaf():
    ref = {"logits": torch.ones(2, 3), "aux": [torch.zeros(2), torch.arange(3)]}
    same = {"logits": torch.ones(2, 3), "aux": [torch.zeros(2), torch.arange(3)]}
    off = {"logits": torch.ones(2, 3), "aux": [torch.zeros(2) + 1e-2, torch.arange(3)]}
    flat = torch.utils._pytree.tree_leaves
    assert compare(flat(same), flat(ref), S).passed
    c = compare(flat(off), flat(ref), S)
    assert c.symptom == "numeric" and c.worst_output == 1 and c.mismatched_outputs == 1


def test_tolerance_figures():
    c = compare([_t(1.0 + 1e-4)], [_t(1.0)], S)
    assert c.tol_ratio > 1 and abs(c.tol_needed - 1e-4 / 2) < 1e-6
    assert compare([_t(1.0 + 1e-7)], [_t(1.0)], S).passed
    assert compare([_t(1.001, dtype=torch.float16)], [_t(1.0, dtype=torch.float16)], S).passed  # fp16's own rtol


# ------------------------------------------------------------------ attribution, tier 2, amplification
class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w1, self.w2 = torch.randn(16, 16, generator=g) / 4, torch.randn(16, 8, generator=g) / 4

    def forward(self, x):
        h = torch.tanh(x @ self.w1)
        h = torch.nn.functional.gelu(h @ self.w1 + h)
        return torch.softmax(h @ self.w2, -1)


def _variant(model, *args, kind="tensor"):
    return capture(BuiltSeed(SeedInfo(id="test/x", source="test", output_kind=kind), model, args)).variant


@pytest.fixture(scope="module")
def sandbox():
    sb = Sandbox()
    yield sb
    sb.close()


def _run(sandbox, variant, target, output_kind="tensor", **settings):
    specs = [parse_backend("eager@cpu"), parse_backend("eager-fp64@cpu"), target]
    judge = judge_settings("eager@cpu", "eager-fp64@cpu", repeats=1, timeout_s=120, **settings)
    request = RunRequest("v", "s", variant.to_payload(), specs, judge, output_kind, list(variant.output_names))
    outcomes, _ = run_variant(sandbox, request)
    return outcomes[2]


def _plugin(cls: str, **options):
    return parse_backend("x@cpu", options, cls_path=f"tests.stacks.numeric_backends:{cls}")


def test_a_float64_backend_is_never_blamed(sandbox):
    v = _variant(Small(), torch.randn(4, 16, generator=torch.Generator().manual_seed(1)) * 30)
    out = _run(sandbox, v, _plugin("Float64Compute"))
    assert out.status == "ok" and out.verdict in ("agree", "reference-divergent")


def test_a_node_rounded_to_bfloat16_is_blamed_and_located(sandbox):
    v = _variant(Small(), torch.randn(4, 16, generator=torch.Generator().manual_seed(1)))
    nodes = [n.name for n in v.gm.graph.nodes if n.op == "call_function"]
    chosen = next(n for n in nodes if n.startswith("tanh"))
    out = _run(sandbox, v, _plugin("RoundNodeToBf16", node=chosen))
    assert out.status == "mismatch" and out.verdict == "target-divergent"
    assert out.first_div_node == chosen
    assert out.align_prepares <= math.log2(len(nodes)) + 2


def test_a_case_is_located_once_and_named_by_the_runs_after_it(sandbox):
    v = _variant(Small(), torch.randn(4, 16, generator=torch.Generator().manual_seed(1)))
    chosen = next(n.name for n in v.gm.graph.nodes if n.name.startswith("tanh"))
    target = _plugin("RoundNodeToBf16", node=chosen)
    ledger = AlignLedger()
    first = _run(sandbox, v, target, ledger=ledger)
    assert first.first_div_node == chosen
    again = _run(sandbox, v, target, ledger=ledger)
    assert again.verdict == "target-divergent" and again.align_prepares is None
    assert again.align_error == "not run: inherited from v, located at aten.tanh.default"
    assert again.first_div_node == chosen  # the location travels with the case
    other = _run(sandbox, v, dataclasses.replace(target, label="other"), ledger=ledger)
    assert other.first_div_node == chosen  # another target's case does not count


def test_a_failed_location_lets_the_next_run_of_the_case_try():
    ledger = AlignLedger()
    assert ledger.claim("s|b|numeric|float32|2", "s#0") is None
    assert ledger.claim("s|b|numeric|float32|2", "s#1") == Location("s#0")
    ledger.settle("s|b|numeric|float32|2", Location("s#0"))
    assert ledger.claim("s|b|numeric|float32|2", "s#2") is None


def test_agreeing_runs_are_not_aligned(sandbox):
    v = _variant(Small(), torch.randn(4, 16))
    out = _run(sandbox, v, parse_backend("eager@cpu", label="copy"))
    assert out.verdict == "agree" and out.first_div_node is None


class FloorOfProduct(torch.nn.Module):
    def forward(self, x):
        return torch.floor(x * 1.0) + 0.5


def test_one_ulp_feeding_floor_is_amplified_not_blamed(sandbox):
    v = _variant(FloorOfProduct(), torch.arange(16, dtype=torch.float32))
    mul = next(n.name for n in v.gm.graph.nodes if n.op == "call_function" and "mul" in n.name)
    out = _run(sandbox, v, _plugin("NudgeOneUlp", node=mul))
    assert out.status == "mismatch"
    assert out.verdict == "amplified" and out.amplified and out.explanation == "amplified"
    assert out.amplifier_node.startswith("floor")


# ------------------------------------------------------------------ tier 3 and the detection adapter
class TiedDetector(torch.nn.Module):
    """Candidates with exactly tied scores, sorted inside the graph (as detectors do before NMS)."""

    def forward(self, x):
        boxes = torch.cat([torch.floor(x[:, :2] * 4) * 4, torch.floor(x[:, :2] * 4) * 4 + 16], 1)
        scores = torch.round(torch.sigmoid(x[:, 2]) * 2) / 2
        labels = (x[:, 3] > 0).long()
        order = torch.sort(scores, descending=True).indices
        return {"boxes": boxes[order], "scores": scores[order], "labels": labels[order]}


def test_detection_with_tied_scores_agrees_with_the_adapter_and_not_without(sandbox):
    x = torch.randn(48, 4, generator=torch.Generator().manual_seed(3))
    v = _variant(TiedDetector(), x, kind="boxes")
    on = _run(sandbox, v, _plugin("ReverseTies"), output_kind="boxes", detection_adapter=True)
    off = _run(sandbox, v, _plugin("ReverseTies"), output_kind="boxes", detection_adapter=False)
    assert on.status == "ok" and on.verdict == "agree" and on.task_agree == 1.0
    assert off.status == "mismatch" and off.task_agree < 1.0


def test_top1_agreement_tolerates_reference_near_ties():
    ref = torch.tensor([[1.0, 1.0 + 1e-7, 0.0], [3.0, 0.0, 1.0]])
    tgt = torch.tensor([[1.0 + 2e-7, 1.0, 0.0], [0.0, 3.0, 1.0]])
    got = task_agreement("class_logits", [tgt], [ref], ["logits"], band=3e-7)
    assert got["task_metric"] == "top1" and got["task_agree"] == 0.5 and got["top5_agree"] == 1.0


def test_identical_logits_agree_even_when_they_hold_nan():
    ref = torch.full((2, 100), float("nan"))  # argmax says 0, topk puts other NaNs first
    ref[1, ::2] = torch.arange(50.0)
    got = task_agreement("class_logits", [ref.clone()], [ref], ["logits"])
    assert got["task_agree"] == 1.0 and got["top5_agree"] == 1.0


def test_one_flipped_bool_or_an_index_one_off_is_the_target_s_divergence():
    """Integers and bools are exact: ``a > b`` computed as ``a >= b`` at one tie flips one element,
    and that alone (the oracle siding with the reference) is a finding, not within tolerance."""
    from gapfuzz.core.bugs import Verdict
    from gapfuzz.core.tolerances import Tolerances
    from gapfuzz.workers.judge.compare import attribute

    ref, flipped = torch.tensor([True, False, True]), torch.tensor([True, True, True])
    assert attribute([flipped], [ref], [ref], Tolerances()).verdict == Verdict.TARGET_DIVERGENT
    idx = torch.tensor([1, 2, 3])
    assert attribute([idx + torch.tensor([0, 0, 1])], [idx], [idx], Tolerances()).verdict == Verdict.TARGET_DIVERGENT
    assert attribute([idx], [idx + 1], [idx], Tolerances()).verdict == Verdict.REFERENCE_DIVERGENT
