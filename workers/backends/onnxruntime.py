"""Export to ONNX (torch.onnx, dynamo exporter) and run in ONNX Runtime, on the CPU or CUDA provider."""
from __future__ import annotations

from ..registry import Backend, device_unavailable_reason, register_backend
from .host_arrays import REPRO_HELPERS, from_numpy, placeholder_names, to_numpy

_PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
_LEVELS = {"disabled": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
           "all": "ORT_ENABLE_ALL"}


@register_backend
class OnnxRuntime(Backend):
    """Options: ``opset`` (exporter opset), ``optimize`` (exporter graph optimisation, default true),
    ``graph_optimization_level`` (disabled, basic, extended, all), ``threads`` (intra-op, default 1)."""

    name = "onnxruntime"
    devices = ("cpu", "cuda")
    module = "onnxruntime"
    input_device = "cpu"
    repro = REPRO_HELPERS + f"""
PROVIDERS = {_PROVIDERS!r}
LEVELS = {_LEVELS!r}
""" + """

def run_backend(model, inputs, device):
    import onnxruntime as ort
    program = torch.onnx.export(model, tuple(inputs), dynamo=True, opset_version=OPTIONS.get("opset"),
                                optimize=OPTIONS.get("optimize", True))
    so = ort.SessionOptions()
    level = LEVELS[OPTIONS.get("graph_optimization_level", "all")]
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    so.intra_op_num_threads = int(OPTIONS.get("threads", 1))  # as the pool ran it
    session = ort.InferenceSession(program.model_proto.SerializeToString(), so, providers=[PROVIDERS[device]])
    expected = {i.name for i in session.get_inputs()}
    feed = {n: to_numpy(t) for n, t in zip(ARG_NAMES, inputs) if n in expected}
    return [from_numpy(a) for a in session.run(None, feed)]
"""

    @classmethod
    def unavailable_reason(cls, device):
        why = super().unavailable_reason(device)
        if why:
            return why
        import importlib.util

        for mod in ("onnx", "onnxscript"):
            if importlib.util.find_spec(mod) is None:
                return f"python package {mod!r} is not installed (pip install {mod})"
        import onnxruntime as ort

        if _PROVIDERS[device] not in ort.get_available_providers():
            return f"ONNX Runtime has no {_PROVIDERS[device]} here"
        return device_unavailable_reason(device) if device != "cpu" else None

    def prepare(self, gm, example_inputs, device):
        import onnxruntime as ort
        import torch

        self.stage = "convert"
        program = torch.onnx.export(gm, tuple(t.cpu() for t in example_inputs), dynamo=True, verbose=False,
                                    opset_version=self.options.get("opset"), optimize=self.options.get("optimize", True))
        model = program.model_proto.SerializeToString()
        self.stage = "compile"
        so = ort.SessionOptions()
        so.intra_op_num_threads = int(self.options.get("threads", 1))
        level = self.options.get("graph_optimization_level", "all")
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _LEVELS[level])
        session = ort.InferenceSession(model, so, providers=[_PROVIDERS[device]])
        expected = {i.name for i in session.get_inputs()}
        names = placeholder_names(gm)
        self.info = {"opset": program.model_proto.opset_import[0].version, "provider": _PROVIDERS[device],
                     "graph_optimization_level": level, "onnx_inputs": len(expected)}

        def run(*inputs):
            feed = {n: to_numpy(t) for n, t in zip(names, inputs) if n in expected}
            return tuple(from_numpy(a) for a in session.run(None, feed))
        return run
