"""Export to ONNX (torch.onnx, dynamo exporter) and run in ONNX Runtime, on the CPU or CUDA provider."""
from __future__ import annotations

import torch

from gapfuzz.core.bugs import Stage
from gapfuzz.workers.backends.host_arrays import from_numpy, placeholder_names, to_numpy
from gapfuzz.workers.run.backend import Backend, counting, device_unavailable_reason, one_of, stage, typed
from gapfuzz.workers.run.registry import register_backend

_PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
_LEVELS = {"disabled": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED",
           "all": "ORT_ENABLE_ALL"}


def feed_order(session_names: list, arg_names: list) -> list:
    """For each session input, the index of the argument that feeds it. By name first; the exporter
    renames an input that an output aliases to ``<name>_orig``; by position when names say nothing."""
    index = {n: i for i, n in enumerate(arg_names)}
    order = [index.get(n, index.get(n.removesuffix("_orig"))) for n in session_names]
    if None in order and len(session_names) == len(arg_names):
        return list(range(len(arg_names)))
    return [i for i in order if i is not None]


def ort_value(ort, t):
    """An OrtValue for a tensor: numpy has no bfloat16, so that one is made from its bits."""
    if t.dtype == torch.bfloat16:
        bits = t.detach().cpu().contiguous().view(torch.uint16).numpy()
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, onnx_element_type=16)  # BFLOAT16
    return ort.OrtValue.ortvalue_from_numpy(to_numpy(t))


def from_ort_value(v):
    if v.data_type() == "tensor(bfloat16)":
        return torch.from_dlpack(v).clone()
    return from_numpy(v.numpy())


def prepare_onnxruntime(gm, example_inputs, device, options):
    """``opset``, ``optimize`` (the exporter's, default true), ``graph_optimization_level``
    (disabled, basic, extended, all), ``threads`` (intra-op, default 1, as in a pool's sandbox)."""
    import onnxruntime as ort

    with stage(Stage.CONVERT):
        program = torch.onnx.export(gm, tuple(t.cpu() for t in example_inputs), dynamo=True, verbose=False,
                                    opset_version=options.get("opset"), optimize=options.get("optimize", True))
        model = program.model_proto.SerializeToString()
    so = ort.SessionOptions()
    so.intra_op_num_threads = int(options.get("threads", 1))
    level = options.get("graph_optimization_level", "all")
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _LEVELS[level])
    session = ort.InferenceSession(model, so, providers=[_PROVIDERS[device]])
    names = [i.name for i in session.get_inputs()]
    order = feed_order(names, placeholder_names(gm))
    info = {"opset": program.model_proto.opset_import[0].version, "provider": _PROVIDERS[device],
            "graph_optimization_level": level, "onnx_inputs": len(names)}

    def run(*inputs):
        feed = {n: ort_value(ort, inputs[i]) for n, i in zip(names, order)}
        return tuple(from_ort_value(v) for v in session.run_with_ort_values(None, feed))
    return run, info


@register_backend
class OnnxRuntime(Backend):
    """Options: ``opset`` (exporter opset), ``optimize`` (exporter graph optimisation, default true),
    ``graph_optimization_level`` (disabled, basic, extended, all), ``threads`` (intra-op, default 1)."""

    name = "onnxruntime"
    devices = ("cpu", "cuda")
    module = "onnxruntime"
    packages = ("onnx", "onnxscript")
    input_device = "cpu"
    prepare_fn = staticmethod(prepare_onnxruntime)
    unoptimised = (("graph_optimizations", {"graph_optimization_level": "disabled"}),
                   ("exporter_optimizer", {"graph_optimization_level": "disabled", "optimize": False}))

    # what prepare_onnxruntime reads; none names a program (ONNX Runtime's custom-op libraries are not options)
    option_types = {"opset": typed((int, type(None)), default=None), "optimize": typed(bool, default=True),
                    "graph_optimization_level": one_of(*_LEVELS, default="all"), "threads": counting(default=1)}

    @classmethod
    def known_options(cls):
        return list(cls.option_types)

    @classmethod
    def check_options(cls, options, allow_exec=False):
        level = options.get("graph_optimization_level", "all")
        if isinstance(level, str) and level not in _LEVELS:
            return f"graph_optimization_level {level!r} is not one of {', '.join(_LEVELS)}"
        return super().check_options(options, allow_exec)

    @classmethod
    def device_unavailable_reason(cls, device):
        import onnxruntime as ort

        if _PROVIDERS[device] not in ort.get_available_providers():
            return f"ONNX Runtime has no {_PROVIDERS[device]} here"
        return device_unavailable_reason(device)
