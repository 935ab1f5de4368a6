"""torch.compile with Inductor: the compiled path users deploy with."""
from __future__ import annotations

import torch

from ..backend import Backend
from ..registry import register_backend
from .eager import to_device


def prepare_inductor(gm, example_inputs, device, options):
    """``mode`` (a torch.compile mode), ``dynamic`` (compile for dynamic shapes: a separate code
    generation path, with symbolic sizes) or Inductor config keys; compiles lazily, on the first call."""
    options = dict(options)
    mode, dynamic = options.pop("mode", None), bool(options.pop("dynamic", False))
    kwargs = {"mode": mode} if mode else {"options": options or None}
    return torch.compile(to_device(gm, device), backend="inductor", dynamic=dynamic, fullgraph=False, **kwargs), {}


@register_backend
class Inductor(Backend):
    """Options: ``mode`` (torch.compile mode), ``dynamic: true`` and any Inductor config key, e.g. ``freezing``."""

    name = "inductor"
    devices = ("cpu", "cuda", "xpu")
    trains = True  # AOTAutograd's joint graph, partitioned, forward and backward compiled
    compile_error_modules = ("torch._dynamo", "torch._inductor")  # compiles lazily, on the first call
    prepare_fn = staticmethod(prepare_inductor)

    @classmethod
    def known_options(cls):
        return ["mode", "dynamic", *inductor_config_keys()]


def inductor_config_keys() -> list[str]:
    """Every Inductor config key (``freezing``, ``cpp.threads``, ...): what ``options`` may set."""
    import torch._inductor.config as config

    return sorted(config.get_config_copy())


def prepare_aot_eager(gm, example_inputs, device, options):
    """AOTAutograd without code generation (``torch.compile(backend="aot_eager")``): Dynamo, the
    functionalised joint graph and its partition, run by eager kernels. ``dynamic`` as for Inductor."""
    options = dict(options)
    return torch.compile(to_device(gm, device), backend="aot_eager", dynamic=bool(options.pop("dynamic", False)),
                         fullgraph=False), {}


@register_backend
class AotEager(Backend):
    """The first step of Inductor's path, alone: a finding it shows is AOTAutograd's or a
    decomposition's, not code generation's. Option: ``dynamic: true``."""

    name = "aot-eager"
    devices = ("cpu", "cuda", "xpu")
    trains = True
    compile_error_modules = ("torch._dynamo", "torch._functorch")
    prepare_fn = staticmethod(prepare_aot_eager)

    @classmethod
    def known_options(cls):
        return ["dynamic"]
