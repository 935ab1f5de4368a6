"""torch.compile with Inductor: the compiled path users deploy with."""
from __future__ import annotations

import torch

from ..registry import Backend, register_backend
from .eager import to_device


@register_backend
class Inductor(Backend):
    """Options: ``mode`` (torch.compile mode) and any Inductor config key, e.g. ``freezing``."""

    name = "inductor"
    devices = ("cpu", "cuda", "xpu")
    compile_error_modules = ("torch._dynamo", "torch._inductor")  # compiles lazily, on the first call
    repro = """
def run_backend(model, inputs, device):
    options = dict(OPTIONS)
    mode = options.pop("mode", None)
    kwargs = {"mode": mode} if mode else {"options": options or None}
    compiled = torch.compile(model.to(device), backend="inductor", dynamic=False, **kwargs)
    return compiled(*[t.to(device) for t in inputs])
"""

    def prepare(self, gm, example_inputs, device):
        options = dict(self.options)
        mode = options.pop("mode", None)
        gm, _ = to_device(gm, (), device)
        kwargs = {"mode": mode} if mode else {"options": options or None}
        return torch.compile(gm, backend="inductor", dynamic=False, fullgraph=False, **kwargs)
