"""Training mode: forward, a projected loss and backward, compared output by output and gradient by
gradient; a backward-only defect is found in training alone, as one cluster naming the op's gradient."""
from __future__ import annotations

import pytest
import torch

from gapfuzz.core.bugs import Kind, Symptom, Verdict
from gapfuzz.core.ir import Variant
from gapfuzz.core.modes import Mode
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.workers.judge.verdict import judge_outputs
from gapfuzz.workers.run.training import Trainer, lift_parameters, loss_of, training_output_names
from tests.conftest import shared_ray

aten = torch.ops.aten
PLANTED = """
name: planted-backward
mode: [inference, training]
seeds:
  - {source: ops, include: ["ops/tanh/float32/0", "ops/sigmoid/float32/0", "ops/mul/float32/0"]}
variants: {per_seed: 2, mutations: 1, mutators: [semantic]}
sizes: {per_seed: 0, widths: 0}
probes: {per_variant: 3}
backends:
  targets: [{class: "tests.stacks.planted_backward:WrongTanhBackward", device: cpu}, onnxruntime@cpu]
pools: {cpu: {workers: 2}}
run: {repeats: 1}
"""


def _linear_tanh():
    """tanh(linear(x, w, b)) as an ATen graph with its weights as get_attr targets (a capture's form)."""
    torch.manual_seed(0)
    root = torch.nn.Module()
    root.register_parameter("w", torch.nn.Parameter(torch.randn(3, 4), requires_grad=False))
    root.register_parameter("b", torch.nn.Parameter(torch.randn(3), requires_grad=False))
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(aten.linear.default, (x, g.get_attr("w"), g.get_attr("b")))
    g.output((g.call_function(aten.tanh.default, (y,)),))
    return torch.fx.GraphModule(root, g), (torch.randn(2, 4),)


def test_a_training_step_returns_outputs_loss_and_every_gradient_as_autograd_computes_them():
    gm, inputs = _linear_tanh()
    names = training_output_names(gm, inputs, ("out",))
    assert names == ("out", "loss", "grad:w", "grad:b", "grad:input:x")
    trainer = Trainer(gm, "cpu")
    out = trainer.prepare(type("Plain", (), {"prepare": lambda self, g, ex, dev: g})(), inputs, "cpu")(*inputs)
    x = inputs[0].clone().requires_grad_(True)
    w, b = gm.w.detach().clone().requires_grad_(True), gm.b.detach().clone().requires_grad_(True)
    y = torch.tanh(x @ w.T + b)
    loss = loss_of([y])
    gw, gb, gx = torch.autograd.grad(loss, [w, b, x])
    for got, want in zip(out, [y, loss, gw, gb, gx]):
        torch.testing.assert_close(got, want.detach())
    assert not torch.allclose(gw, torch.autograd.grad((x @ w.T + b).tanh().sum(), [w])[0])  # not out.sum()
    assert gm.w.grad is None and not inputs[0].requires_grad  # the caller's tensors are left alone


def test_parameters_become_the_first_inputs_of_the_lifted_graph():
    gm, inputs = _linear_tanh()
    lifted = lift_parameters(gm, ["w", "b"])
    placeholders = [n.name for n in lifted.graph.nodes if n.op == "placeholder"]
    assert placeholders == ["param_w", "param_b", "x"]
    assert not any(n.op == "get_attr" for n in lifted.graph.nodes)
    torch.testing.assert_close(lifted(gm.w, gm.b, *inputs), gm(*inputs))
    doubled = lifted(2 * gm.w, gm.b, *inputs)[0]
    assert not torch.allclose(doubled, gm(*inputs)[0])  # the lifted graph reads its inputs, not its weights


def test_a_gradient_that_alone_differs_is_the_grad_symptom():
    names = ["out", "loss", "grad:w", "grad:input:x"]
    ref = [torch.ones(3), torch.tensor(2.0), torch.full((3,), 0.5), torch.full((3,), 0.25)]
    oracle = [t.double() for t in ref]
    wrong = [*ref[:3], torch.full((3,), 0.3)]
    figures = judge_outputs(wrong, ref, oracle, Tolerances(), "tensor", names).columns()
    assert figures["verdict"] == Verdict.TARGET_DIVERGENT and figures["symptom"] == Symptom.GRAD
    assert figures["worst_output"] == 3
    forward_wrong = [torch.full((3,), 1.5), *ref[1:]]
    assert judge_outputs(forward_wrong, ref, oracle, Tolerances(), "tensor", names).symptom == Symptom.NUMERIC


def test_a_stack_that_cannot_train_gets_no_training_run_and_training_needs_a_stack_that_does():
    from gapfuzz.fuzzer.config.campaign import CampaignError, from_dict
    from gapfuzz.fuzzer.config.plan import plan

    c = from_dict({"mode": ["inference", "training"], "seeds": [{"source": "ops"}],
                   "sizes": {"per_seed": 0, "widths": 0},
                   "backends": {"targets": ["inductor@cpu", "onnxruntime@cpu",
                                            {"backend": "eager@cpu", "label": "eager-train", "mode": "training"}]}})
    work = plan(c, ["ops/tanh/float32/0"], set())
    by_mode = {w.mode: set().union(*w.missing.values()) for w in work}
    assert by_mode[Mode.INFERENCE] == {"eager@cpu", "eager-fp64@cpu", "inductor@cpu", "onnxruntime@cpu"}
    assert by_mode[Mode.TRAINING] == {"eager@cpu", "eager-fp64@cpu", "inductor@cpu", "eager-train@cpu"}
    with pytest.raises(CampaignError, match="no target stack trains"):
        from_dict({"mode": "training", "seeds": [{"source": "ops"}], "backends": {"targets": ["onnxruntime@cpu"]}})


@pytest.mark.ray
def test_a_wrong_backward_is_found_in_training_alone_as_one_cluster_and_reproduced(tmp_path):

    from gapfuzz.analysis.api import load_run
    from gapfuzz.core.strict_yaml import load
    from gapfuzz.fuzzer.config.campaign import from_dict
    from gapfuzz.fuzzer.driver import Driver
    from gapfuzz.fuzzer.repro.minimise import reproduce_cluster

    c = from_dict(load(PLANTED, "planted"), "planted")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "campaign.yaml").write_text(c.to_yaml())  # what gapfuzz run saves, for repro
    shared_ray()  # the session's embedded Ray (conftest)
    Driver(c, tmp_path / "run", progress=False).run()
    run = load_run(tmp_path / "run")
    records = run.records(["variant_id", "backend", "mode", "worst_output", "status"])
    trained = records[records["mode"] == Mode.TRAINING]
    assert set(trained["backend"]) == {"eager@cpu", "eager-fp64@cpu", "wrong-tanh-backward@cpu"}  # ORT: no record
    assert trained["variant_id"].str.endswith(":train").all()
    assert set(records[records["mode"] == Mode.INFERENCE]["backend"]) >= {"onnxruntime@cpu"}
    found = run.clusters()
    assert len(found) == 1, found[["cluster", "kind", "symptom", "first_div_op", "modes"]]
    cluster = found.iloc[0]
    assert cluster["kind"] == Kind.DISCREPANCY and cluster["symptom"] == Symptom.GRAD
    assert cluster["first_div_op"] == "aten.tanh.default" and cluster["modes"] == ["training"]
    assert "aten.tanh_backward" in cluster["grad_ops"]
    wrong = records[(records["status"] == "mismatch")]
    assert set(wrong["worst_output"]) == {"grad:input:tensors_0"} and (wrong["mode"] == Mode.TRAINING).all()
    result = reproduce_cluster(tmp_path / "run", cluster["cluster"], max_calls=40, allow_plugins=True)
    assert result.status == "reproducible" and result.failures == 3
    code = (tmp_path / "run" / "repros" / cluster["cluster"] / "repro.py").read_text()
    assert "MODE = 'training'" in code and "def train_step" in code
    report = (tmp_path / "run" / "repros" / cluster["cluster"] / "report.md").read_text()
    assert "the bug is present (" in report and "Traceback" not in report  # failed for the bug, not by a crash


def test_with_train_layers_dropout_draws_alike_on_every_stack_and_batch_norm_statistics_are_outputs():
    import operator

    from gapfuzz.fuzzer.generate import captured
    from gapfuzz.workers.judge.compare import compare
    from gapfuzz.workers.run.backend_run import to_host
    from gapfuzz.workers.run.registry import parse_backend
    from gapfuzz.workers.run.training import draws_randomly, output_names

    info, cap = captured("timm/test_resnet", None, use_cache=False, train_layers=True)
    running = [n for n in cap.variant.output_names if n.startswith("running:")]
    assert "running:conv1.1.running_mean" in running and len(running) % 3 == 0  # mean, var, batches tracked
    eval_names = captured("timm/test_resnet", None, use_cache=False)[1].variant.output_names
    assert not any(n.startswith("running:") for n in eval_names)

    root = torch.nn.Module()
    root.register_parameter("w", torch.nn.Parameter(torch.randn(64), requires_grad=False))
    g = torch.fx.Graph()
    x = g.placeholder("x")
    dropped = g.call_function(operator.getitem, (g.call_function(aten.native_dropout.default, (x, 0.3, True)), 0))
    g.output((g.call_function(aten.mul.Tensor, (dropped, g.get_attr("w"))),))
    gm, inputs = torch.fx.GraphModule(root, g), (torch.randn(8, 64),)
    assert draws_randomly(gm)
    outs = {b: to_host(Trainer(gm, "cpu").prepare(parse_backend(b).create(), inputs, "cpu")(*inputs))
            for b in ("eager@cpu", "aot-eager@cpu", "inductor@cpu")}
    assert (outs["eager@cpu"][0] == 0).any()  # some elements were dropped
    for b in ("aot-eager@cpu", "inductor@cpu"):
        assert compare(outs[b], outs["eager@cpu"], Tolerances()).passed, b
    assert len(outs["eager@cpu"]) == len(output_names(Variant(gm, inputs, ("out",), mode=Mode.TRAINING)))


def test_a_gradient_whose_nan_pattern_alone_differs_is_grad_nonfinite():
    names = ["out", "loss", "grad:w"]
    ref = [torch.ones(3), torch.tensor(2.0), torch.tensor([0.5, float("nan"), 0.5])]
    wrong = [*ref[:2], torch.tensor([0.5, 0.0, 0.5])]
    figures = judge_outputs(wrong, ref, [t.double() for t in ref], Tolerances(), "tensor", names).columns()
    assert figures["symptom"] == Symptom.GRAD_NONFINITE and figures["verdict"] == Verdict.TARGET_DIVERGENT
