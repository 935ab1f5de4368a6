"""Divergences that are no defect, and the defects beside them that stay findings: amplified rounding at
a discontinuity (judged with each side against float64), a reduction within its error bound, a training
loss summed over outputs that all agree, PyTorch's own rule for torch.compile, and eager's gelu at +inf."""
from __future__ import annotations

import warnings

import pytest
import torch

from gapfuzz.core.tolerances import Tolerances
from gapfuzz.workers.judge.discontinuity import amplifies
from gapfuzz.workers.judge.pytorch_rule import torch_same
from gapfuzz.workers.judge.reduction import loss_within_bound, magnitudes, within_bound
from gapfuzz.workers.run.registry import parse_backend
from gapfuzz.workers.run.sandbox import Sandbox
from gapfuzz.workers.run.training import LOSS, projection
from tests.workers.test_verdicts import _plugin, _run, _variant

S = Tolerances()
aten = torch.ops.aten


@pytest.fixture(scope="module")
def sandbox():
    sb = Sandbox()
    yield sb
    sb.close()


# ------------------------------------------------------------------ amplified rounding
class LinearRound(torch.nn.Module):
    """A linear layer with outputs around 1e5, then round: two float32 orders of its 256-term dot
    products land a few ulps apart, and round makes a few of them 1 apart."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(14)
        self.lin = torch.nn.Linear(256, 32, bias=False)
        with torch.no_grad():
            self.lin.weight.copy_(torch.randn(32, 256, generator=g) * 6e3)

    def forward(self, x):
        return torch.round(self.lin(x))


def test_onnxruntime_rounding_a_linear_near_1e5_is_amplified_not_a_finding(sandbox):
    model, x = LinearRound(), torch.randn(4, 256, generator=torch.Generator().manual_seed(114))
    exact = torch.round(torch.nn.functional.linear(x.double(), model.lin.weight.double())).float()
    if not torch.equal(model(x), exact):  # the case needs eager exact here; another CPU's kernels may not be
        pytest.skip("eager's own float32 linear rounds away from float64 on this CPU")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = _run(sandbox, _variant(model, x), parse_backend("onnxruntime@cpu"))
    assert out.status == "mismatch" and out.max_abs_err == 1.0  # a few outputs differ by exactly one
    assert out.verdict == "amplified" and out.explanation == "amplified"
    assert out.first_div_op == "aten.round.default" and out.amplifier_node.startswith("round")


def _round_values(target_in, ref_in):
    return [torch.round(target_in), target_in], [torch.round(ref_in), ref_in]


def test_a_round_whose_inputs_are_the_same_bits_is_the_round_s_own_divergence():
    x = torch.tensor([0.5, 1.5, 2.5, 3.2])
    target, ref = _round_values(x, x)
    target[0] = torch.tensor([1.0, 2.0, 3.0, 3.0])  # half away from zero: the op's own doing
    assert not amplifies(target, ref)
    moved = x.clone()
    moved[0] = torch.nextafter(x[0], torch.tensor(1.0))
    target, ref = _round_values(moved, x)
    assert amplifies(target, ref)  # it differs only where its input does
    target[0][3] = 4.0
    assert not amplifies(target, ref)  # and not where the input is the same


class FloorToLong(torch.nn.Module):
    def forward(self, x):
        return torch.floor(x * 3.0).long()


def test_a_discontinuity_fed_worse_inputs_moves_the_finding_to_the_node_that_made_them(sandbox):
    v = _variant(FloorToLong(), torch.randn(64, generator=torch.Generator().manual_seed(1)) * 100)
    mul = next(n.name for n in v.gm.graph.nodes if n.op == "call_function" and "mul" in n.name)
    out = _run(sandbox, v, _plugin("RoundNodeToBf16", node=mul))
    assert out.symptom == "integer"  # the run shows integers; its cause is a float32 product rounded to bfloat16
    assert out.verdict == "target-divergent" and not out.amplified and out.explanation is None
    assert out.first_div_node == mul and out.node_symptom == "numeric"
    nudged = _variant(FloorToLong(), torch.arange(16, dtype=torch.float32))  # products on the steps of floor
    out = _run(sandbox, nudged, _plugin("NudgeOneUlp", node=mul))
    assert out.symptom == "integer" and out.verdict == "amplified" and out.amplifier_node.startswith("floor")


# ------------------------------------------------------------------ reductions by their error bound
class SumOf(torch.nn.Module):
    def forward(self, x):
        return torch.sum(x) * 2.0


def test_a_sum_in_another_order_is_reduction_order_and_a_dropped_block_is_a_finding(sandbox):
    x = torch.randn(4096, generator=torch.Generator().manual_seed(3)) * 4
    x = x - x.mean()  # a sum near 0 of terms near 4: many plain tolerances, well within its bound
    v = _variant(SumOf(), x)
    reordered = _run(sandbox, v, _plugin("SequentialSum"))
    assert reordered.status == "mismatch" and reordered.tol_ratio > 1  # past the plain tolerance
    assert reordered.explanation == "reduction-order" and 0 < reordered.explain_ratio <= 1
    assert reordered.first_div_op == "aten.sum.default"
    dropped = _run(sandbox, v, _plugin("BlockedSum"))
    assert dropped.verdict == "target-divergent" and dropped.explanation is None
    assert dropped.first_div_op == "aten.sum.default"


def test_mse_loss_over_512_broadcast_terms_is_judged_by_its_bound():
    a = torch.randn(512, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * 6.1
    b = torch.zeros(1, dtype=torch.float64)
    oracle = aten.mse_loss.default(a, b.expand_as(a))
    mag, n = magnitudes(aten.mse_loss.default, (a, b.expand_as(a)), {}, oracle)
    assert n == 512
    near = (oracle * (1 + 2.3e-6)).float()  # the 37.276054 against 37.27597
    assert S.tol(torch.float32)[0] * float(oracle) < abs(float(near.double() - oracle))  # past the plain rtol
    assert within_bound(near, oracle, mag, n, S) is not None
    assert within_bound((oracle * (1 + 2e-5)).float(), oracle, mag, n, S) is None


def test_a_training_loss_whose_outputs_all_agree_is_reduction_order():
    ref = torch.erf(torch.randn(1025, 1025, generator=torch.Generator().manual_seed(3)))
    oracle = ref.double()
    noise = torch.randint(-1, 2, ref.shape, generator=torch.Generator().manual_seed(4)).float()
    out = ref + noise * 6e-8 * ref.abs()  # every element within tolerance of eager's
    names = ["out", LOSS, "grad:input:x"]

    def loss(o):
        return (o.double() * projection(0, o).double()).sum().float()

    grad = torch.ones(3)
    found = loss_within_bound([out, loss(out) + 3e-4, grad], [ref, loss(ref), grad], [oracle, loss(oracle), grad],
                              names, S)
    assert found is not None and found <= 1  # -32.88336 against -32.88364 is within what agreeing outputs allow
    assert loss_within_bound([out, loss(out) + 500.0, grad], [ref, loss(ref), grad], [oracle, loss(oracle), grad],
                             names, S) is None
    wrong = out.clone()
    wrong[0, 0] += 1.0  # an output that does not agree: the loss is not what explains the run
    assert loss_within_bound([wrong, loss(wrong), grad], [ref, loss(ref), grad], [oracle, loss(oracle), grad],
                             names, S) is None


# ------------------------------------------------------------------ PyTorch's rule and eager's gelu
def test_pytorch_rule_accepts_a_rounding_flip_and_rejects_a_wrong_value():
    ref, fp64 = [torch.tensor([-98102.0, 3.0])], [torch.tensor([-98102.0, 3.0], dtype=torch.float64)]
    assert torch_same([torch.tensor([-98103.0, 3.0])], ref, fp64) is True
    assert torch_same([torch.tensor([-98102.0, 3.5])], ref, fp64) is False
    assert torch_same([torch.tensor([-98102.0, 3.0])], ref, None) is None


class Gelu(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_eager_s_gelu_at_inf_is_eager_s_finding(sandbox, dtype):
    """Eager's float32 and bfloat16 gelu (approximate='none') give NaN at +inf where float64 and Inductor
    give +inf: the finding is eager's, and nothing explains it away."""
    x = torch.tensor([float("inf"), -float("inf"), 1.0, -2.0], dtype=dtype)
    assert torch.isnan(torch.nn.functional.gelu(x)[0]) and torch.nn.functional.gelu(x.double())[0] == float("inf")
    out = _run(sandbox, _variant(Gelu(), x), parse_backend("inductor@cpu"))
    assert out.status == "mismatch" and out.verdict == "reference-divergent" and out.symptom == "nonfinite"
    assert out.explanation is None and out.torch_same is None


def test_a_broadcast_input_s_gradient_summed_in_another_order_is_within_its_bound():
    from gapfuzz.workers.backends.eager import prepare_eager_fp64
    from gapfuzz.workers.judge.reduction import gradients_within_bound
    from gapfuzz.workers.run.training import train_step

    graph = torch.fx.Graph()
    b = graph.placeholder("b")
    graph.output((graph.call_function(aten.expand.default, (b, [512])),))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    fed = (torch.tensor([0.75]),)
    oracle = train_step(prepare_eager_fp64(gm, fed, "cpu", {})[0], [], fed)  # out, loss, grad of b
    exact = float(oracle[2])

    def target(grad):
        return [oracle[0].float(), oracle[1].float(), torch.tensor([grad], dtype=torch.float32)]
    off = 1e-4  # past the plain tolerance of a gradient near 20, within 512 terms' bound
    assert off > 1e-5 + 1.3e-6 * abs(exact)
    assert gradients_within_bound(gm, fed, target(exact + off), oracle, S) is not None
    assert gradients_within_bound(gm, fed, target(exact + 1e-2), oracle, S) is None


def test_a_run_whose_case_was_being_located_takes_the_amplified_location_found_since():
    from types import SimpleNamespace

    from gapfuzz.core.bugs import bug_key
    from gapfuzz.results.schema import RunRecord
    from gapfuzz.workers.judge.align import AlignLedger, Location, align_case
    from gapfuzz.workers.judge.chain import inherit_late

    o = RunRecord("c", "s#1", "s", "onnxruntime@cpu", stack="onnxruntime", device="cpu", probe="example",
                  status="mismatch", stage="compare", verdict="target-divergent", symptom="numeric",
                  output_dtype="float32")
    case = align_case("s", bug_key(o.key_fields()), "float32")
    ledger = AlignLedger()
    assert ledger.claim(case, "s#0") is None  # another variant locates the case
    ledger.claim(case, "s#1").inherit(o)
    assert o.align_error == "not run: being located on s#0" and o.first_div_op is None
    ledger.settle(case, Location("s#0", "round_1", "aten.round.default", amplified=True, explanation="amplified"))
    inherit_late(SimpleNamespace(request=SimpleNamespace(seed_id="s"), settings=SimpleNamespace(ledger=ledger)), [o])
    assert o.first_div_op == "aten.round.default" and o.verdict == "amplified" and o.explanation == "amplified"
