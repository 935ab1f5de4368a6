"""The converter stacks feed a model the inputs it was exported with, by the names it takes."""
from __future__ import annotations

import pytest
import torch
import torch.fx as fx

from gapfuzz.workers.run.registry import parse_backend


def _graph_with_an_input_named_input() -> fx.GraphModule:
    """torchvision's segmentation models take ``input``; FX names that placeholder ``input_1``."""
    g = fx.Graph()
    x, y = g.placeholder("input"), g.placeholder("scale")
    g.output(g.call_function(torch.ops.aten.mul.Tensor, (g.call_function(torch.ops.aten.relu.default, (x,)), y)))
    return fx.GraphModule(torch.nn.Module(), g)


@pytest.mark.parametrize("backend", ["onnxruntime@cpu", "openvino@cpu"])
def test_an_input_named_like_a_builtin_is_fed(backend):
    spec = parse_backend(backend)
    if spec.backend_cls().unavailable_reason("cpu"):
        pytest.skip(spec.backend_cls().unavailable_reason("cpu"))
    gm = _graph_with_an_input_named_input()
    assert [n.name for n in gm.graph.nodes if n.op == "placeholder"] == ["input_1", "scale"]
    inputs = (torch.randn(2, 8), torch.full((2, 8), 3.0))
    out = spec.create().prepare(gm, inputs, "cpu")(*inputs)
    torch.testing.assert_close(out[0], gm(*inputs))


@pytest.mark.parametrize("backend, seed", [("onnxruntime@cpu", "ops/H/bfloat16/0"),
                                           ("openvino@cpu", "ops/masked.norm/bfloat16/1")])
def test_bfloat16_inputs_and_an_input_an_output_aliases_are_fed(backend, seed):
    """numpy has no bfloat16 (ONNX Runtime refused the array, OpenVINO read it as f16), and the ONNX
    exporter renames an input that an output aliases (``H`` is a view) to ``<name>_orig``."""
    from gapfuzz.seeds import create_seed
    from gapfuzz.seeds.capture import capture

    spec = parse_backend(backend)
    if spec.backend_cls().unavailable_reason("cpu"):
        pytest.skip(spec.backend_cls().unavailable_reason("cpu"))
    v = capture(create_seed(seed)).variant
    assert v.inputs[0].dtype == torch.bfloat16
    out = spec.create().prepare(v.gm, tuple(v.inputs), "cpu")(*v.inputs)
    expected = v.gm(*v.inputs)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    assert out[0].dtype == torch.bfloat16
    torch.testing.assert_close(out[0], expected[0], atol=0.05, rtol=0.05)


def test_onnxruntime_feeds_by_name_then_by_the_exporter_s_renaming_then_by_position():
    from gapfuzz.workers.backends.onnxruntime import feed_order

    assert feed_order(["b", "a"], ["a", "b"]) == [1, 0]
    assert feed_order(["x_orig", "y"], ["x", "y"]) == [0, 1]
    assert feed_order(["p", "q"], ["x", "y"]) == [0, 1]
    assert feed_order(["y"], ["x", "y"]) == [1]  # an input the export dropped is not fed


def test_an_openvino_reproducer_compiles_as_the_pool_did(captured_vit):
    """A bfloat16 SwiGLU crashed OpenVINO only at one inference thread: the reproducer must ask for it,
    and it does, since it runs the pool's own prepare function, copied verbatim."""
    import inspect

    from gapfuzz.fuzzer.repro.code import reproducer
    from gapfuzz.workers.backends import openvino
    from gapfuzz.workers.run.registry import parse_backend

    record = {"status": "error", "stage": "compile", "variant_id": "v#0"}
    code = reproducer(captured_vit.variant, parse_backend("openvino@cpu", {"threads": 4}), record, "t", {})
    for fn in (openvino.prepare_openvino, openvino.compile_config, openvino.ov_input, openvino.ov_output):
        assert inspect.getsource(fn) in code
    namespace: dict = {}
    exec(inspect.getsource(openvino.compile_config), namespace)  # noqa: S102 - gapfuzz's own source, as a reproducer copies it
    assert namespace["compile_config"]({})["INFERENCE_NUM_THREADS"] == "1"
    assert "OPTIONS = {'threads': 4}" in code and "PREPARE = prepare_openvino" in code
