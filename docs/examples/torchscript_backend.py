"""A third-party backend: TorchScript, traced, frozen and optimised for inference.

gapfuzz needs no change to run it. Put this file on PYTHONPATH and name the class in a campaign:

    backends:
      targets:
        - {class: "torchscript_backend:TorchScript", device: cpu, options: {optimize: true}}

or publish it under the ``gapfuzz.backends`` entry-point group of your package.
"""
from __future__ import annotations

import torch


class TorchScript:
    name = "torchscript"  # records name it torchscript@<device>
    devices = ("cpu", "cuda")

    def __init__(self, optimize: bool = True):
        self.optimize = optimize
        self.info = {}  # anything here is stored with each record

    @classmethod
    def available(cls, device: str) -> bool:
        return device == "cpu" or torch.cuda.is_available()

    def prepare(self, gm: torch.fx.GraphModule, example_inputs: tuple, device: str):
        """Compile once; the pool times this, then calls the result with bit-identical inputs."""
        traced = torch.jit.trace(gm.to(device).eval(), example_inputs, check_trace=False)
        frozen = torch.jit.freeze(traced)
        if self.optimize:
            frozen = torch.jit.optimize_for_inference(frozen)
        self.info = {"optimized": self.optimize}
        return frozen
