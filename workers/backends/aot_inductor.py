"""AOTInductor: torch.export, then Inductor compiles a stand-alone package ahead of time."""
from __future__ import annotations

import os
import tempfile

from ..registry import Backend, register_backend
from .eager import to_device


@register_backend
class AotInductor(Backend):
    """Options: any Inductor config key (``inductor_configs``), e.g. ``max_autotune: true``."""

    name = "aot-inductor"
    devices = ("cpu", "cuda")
    repro = """
def run_backend(model, inputs, device):
    import os
    import tempfile
    inputs = tuple(t.to(device) for t in inputs)
    program = torch.export.export(model.to(device), inputs, strict=False)
    path = torch._inductor.aoti_compile_and_package(
        program, package_path=os.path.join(tempfile.mkdtemp(), "model.pt2"), inductor_configs=OPTIONS or None)
    return torch._inductor.aoti_load_package(path)(*inputs)
"""

    def prepare(self, gm, example_inputs, device):
        import torch

        gm, _ = to_device(gm, (), device)
        self.stage = "convert"
        ep = torch.export.export(gm, tuple(example_inputs), strict=False)
        self.stage = "compile"
        self._dir = tempfile.TemporaryDirectory(prefix="gapfuzz-aoti-")
        path = torch._inductor.aoti_compile_and_package(
            ep, package_path=os.path.join(self._dir.name, "model.pt2"), inductor_configs=dict(self.options) or None)
        runner = torch._inductor.aoti_load_package(path)
        self.info = {"package_bytes": os.path.getsize(path)}
        return runner
