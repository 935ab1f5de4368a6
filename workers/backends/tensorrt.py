"""Torch-TensorRT's dynamo path: torch.export, then TensorRT engines for supported subgraphs (CUDA only)."""
from __future__ import annotations

from ..registry import Backend, register_backend
from .eager import to_device


@register_backend
class TorchTensorRT(Backend):
    """Options: ``precision`` (float32, float16 or bfloat16 enabled for TensorRT), ``min_block_size``."""

    name = "tensorrt"
    devices = ("cuda",)
    module = "torch_tensorrt"
    repro = """
def run_backend(model, inputs, device):
    import torch_tensorrt
    inputs = tuple(t.to(device) for t in inputs)
    program = torch.export.export(model.to(device), inputs, strict=False)
    precision = getattr(torch, OPTIONS.get("precision", "float32"))
    compiled = torch_tensorrt.dynamo.compile(program, inputs=list(inputs), enabled_precisions={precision},
                                             min_block_size=int(OPTIONS.get("min_block_size", 1)))
    return compiled(*inputs)
"""

    def prepare(self, gm, example_inputs, device):
        import torch
        import torch_tensorrt

        gm, _ = to_device(gm, (), device)
        self.stage = "convert"
        ep = torch.export.export(gm, tuple(example_inputs), strict=False)
        self.stage = "compile"
        precision = getattr(torch, self.options.get("precision", "float32"))
        compiled = torch_tensorrt.dynamo.compile(ep, inputs=list(example_inputs), enabled_precisions={precision},
                                                 min_block_size=int(self.options.get("min_block_size", 1)))
        self.info = {"precision": str(precision).removeprefix("torch.")}
        return compiled
