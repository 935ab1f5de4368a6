"""Convert with OpenVINO's PyTorch frontend (from torch.export) and compile for its CPU or GPU plugin.

OpenVINO picks its own inference precision (bfloat16 on CPUs with AMX or AVX512-BF16); the
precision it actually used is recorded with every run. Give ``INFERENCE_PRECISION_HINT: f32`` in
the options (and a label) to run the same stack at full precision beside it.
"""
from __future__ import annotations

import inspect

from ..registry import Backend, register_backend
from .host_arrays import REPRO_HELPERS, from_numpy, placeholder_names, to_numpy

_PLUGINS = {"cpu": "CPU", "xpu": "GPU"}


def compile_config(options: dict) -> dict:
    """Compile properties from the backend's options. ``threads`` (default 1, as in a pool's sandbox)
    becomes INFERENCE_NUM_THREADS: some defects appear only at one thread count, so a reproducer
    must compile exactly as the pool did."""
    config = {k: str(v) for k, v in options.items() if k != "threads"}
    config["INFERENCE_NUM_THREADS"] = str(options.get("threads", 1))
    return config


@register_backend
class OpenVino(Backend):
    """Options: any OpenVINO compile property, e.g. ``INFERENCE_PRECISION_HINT: f32``; ``threads``."""

    name = "openvino"
    devices = ("cpu", "xpu")
    module = "openvino"
    input_device = "cpu"
    repro = REPRO_HELPERS + f"""
PLUGINS = {_PLUGINS!r}


""" + inspect.getsource(compile_config) + """

def run_backend(model, inputs, device):
    import openvino as ov
    ov_model = ov.convert_model(torch.export.export(model, tuple(inputs), strict=False))
    compiled = ov.Core().compile_model(ov_model, PLUGINS[device], compile_config(OPTIONS))
    print("OpenVINO inference precision:", compiled.get_property("INFERENCE_PRECISION_HINT"))
    by_name = dict(zip(ARG_NAMES, inputs))
    ports = [p.get_any_name() for p in compiled.inputs]
    result = compiled.create_infer_request().infer([to_numpy(by_name.get(n, t)) for n, t in zip(ports, inputs)])
    return [from_numpy(result[out]) for out in compiled.outputs]
"""

    @classmethod
    def unavailable_reason(cls, device):
        why = super().unavailable_reason(device) if device == "cpu" else None
        if why or device not in cls.devices:
            return why or f"openvino does not run on {device}"
        import importlib.util

        if importlib.util.find_spec("openvino") is None:
            return "python package 'openvino' is not installed (pip install openvino)"
        import openvino as ov

        if _PLUGINS[device] not in ov.Core().available_devices:
            return f"OpenVINO has no {_PLUGINS[device]} device here"
        return None

    def prepare(self, gm, example_inputs, device):
        import openvino as ov
        import torch

        self.stage = "convert"
        model = ov.convert_model(torch.export.export(gm, tuple(t.cpu() for t in example_inputs), strict=False))
        self.stage = "compile"
        compiled = ov.Core().compile_model(model, _PLUGINS[device], compile_config(self.options))
        self.info = {"inference_precision": str(compiled.get_property("INFERENCE_PRECISION_HINT")),
                     "execution_mode": str(compiled.get_property("EXECUTION_MODE_HINT")), "plugin": _PLUGINS[device]}
        names = placeholder_names(gm)
        request = compiled.create_infer_request()
        ports = [p.get_any_name() for p in compiled.inputs]

        def run(*inputs):
            by_name = dict(zip(names, inputs))
            feed = [to_numpy(by_name[n]) if n in by_name else to_numpy(t) for n, t in zip(ports, inputs)]
            result = request.infer(feed)
            return tuple(from_numpy(result[out]) for out in compiled.outputs)
        return run
