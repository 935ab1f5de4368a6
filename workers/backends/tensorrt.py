"""Torch-TensorRT's dynamo path: torch.export, then TensorRT engines for supported subgraphs (CUDA only)."""
from __future__ import annotations

import torch

from gapfuzz.core.bugs import Stage
from gapfuzz.workers.backends.eager import to_device
from gapfuzz.workers.run.backend import Backend, counting, one_of, stage
from gapfuzz.workers.run.registry import register_backend


def prepare_tensorrt(gm, example_inputs, device, options):
    """``precision`` (float32, float16 or bfloat16 enabled for TensorRT), ``min_block_size``."""
    import torch_tensorrt

    gm = to_device(gm, device)
    with stage(Stage.CONVERT):
        program = torch.export.export(gm, tuple(example_inputs), strict=False)
    precision = getattr(torch, options.get("precision", "float32"))
    compiled = torch_tensorrt.dynamo.compile(program, inputs=list(example_inputs), enabled_precisions={precision},
                                             min_block_size=int(options.get("min_block_size", 1)))
    return compiled, {"precision": str(precision).removeprefix("torch.")}


@register_backend
class TorchTensorRT(Backend):
    """Options: ``precision`` (float32, float16 or bfloat16 enabled for TensorRT), ``min_block_size``."""

    name = "tensorrt"
    devices = ("cuda",)
    module = "torch_tensorrt"
    distribution = "torch-tensorrt"
    any_strides = True  # its runtime makes every input contiguous before an engine reads it: no new engine
    prepare_fn = staticmethod(prepare_tensorrt)

    option_types = {"precision": one_of("float32", "float16", "bfloat16", default="float32"),
                    "min_block_size": counting(default=1)}

    @classmethod
    def known_options(cls):
        return list(cls.option_types)
