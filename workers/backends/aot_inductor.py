"""AOTInductor: torch.export, then Inductor compiles a stand-alone package ahead of time."""
from __future__ import annotations

import os
import tempfile

import torch

from gapfuzz.core.bugs import Stage
from gapfuzz.workers.backends.eager import to_device
from gapfuzz.workers.backends.inductor_options import config_type, inductor_config_keys
from gapfuzz.workers.run.backend import Backend, stage
from gapfuzz.workers.run.registry import register_backend


def prepare_aot_inductor(gm, example_inputs, device, options):
    """Inductor config keys (``inductor_configs``); the package lives as long as the callable."""
    gm = to_device(gm, device)
    with stage(Stage.CONVERT):
        program = torch.export.export(gm, tuple(example_inputs), strict=False)
    folder = tempfile.TemporaryDirectory(prefix="gapfuzz-aoti-")
    path = torch._inductor.aoti_compile_and_package(
        program, package_path=os.path.join(folder.name, "model.pt2"), inductor_configs=dict(options) or None)
    runner = torch._inductor.aoti_load_package(path)

    def run(*inputs, _package=folder):
        return runner(*inputs)
    return run, {"package_bytes": os.path.getsize(path)}


@register_backend
class AotInductor(Backend):
    """Options: any Inductor config key (``inductor_configs``), e.g. ``max_autotune: true``."""

    name = "aot-inductor"
    distribution = "torch"  # its releases are torch's
    devices = ("cpu", "cuda")
    any_strides = None  # compiled for the example's strides alone: it reads another layout wrong, unchecked
    prepare_fn = staticmethod(prepare_aot_inductor)

    @classmethod
    def known_options(cls):
        return inductor_config_keys()

    @classmethod
    def option_type(cls, key: str):
        return config_type(key)
