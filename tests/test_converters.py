"""The converter stacks feed a model the inputs it was exported with, by the names it takes."""
from __future__ import annotations

import pytest
import torch
import torch.fx as fx

from workers.registry import parse_backend


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


def test_an_openvino_reproducer_compiles_as_the_pool_did():
    """A bfloat16 SwiGLU crashed OpenVINO only at one inference thread: the reproducer must ask for it."""
    from workers.backends import openvino

    code = openvino.OpenVino.repro
    namespace: dict = {}
    exec(code[code.index("def compile_config"):code.index("def run_backend")], namespace)
    for options in ({}, {"threads": 4, "INFERENCE_PRECISION_HINT": "f32"}):
        assert namespace["compile_config"](options) == openvino.compile_config(options)
    assert openvino.compile_config({})["INFERENCE_NUM_THREADS"] == "1"
    assert "compile_config(OPTIONS)" in code
