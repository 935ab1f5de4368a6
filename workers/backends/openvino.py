"""Convert with OpenVINO's PyTorch frontend (from torch.export) and compile for its CPU or GPU plugin.

OpenVINO picks its own inference precision (bfloat16 on CPUs with AMX or AVX512-BF16); the
precision it actually used is recorded with every run. Give ``INFERENCE_PRECISION_HINT: f32`` in
the options (and a label) to run the same stack at full precision beside it.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from gapfuzz.core.bugs import Stage
from gapfuzz.workers.backends.host_arrays import from_numpy, placeholder_names, to_numpy
from gapfuzz.workers.run.backend import Backend, OptionType, counting, is_integer, names_a_program, stage
from gapfuzz.workers.run.registry import register_backend

_PLUGINS = {"cpu": "CPU", "xpu": "GPU"}
THREADS = counting(default=1)
# a compile property is written as text (compile_config): a scalar; one naming a path or a library
# (WEIGHTS_PATH, CACHE_DIR) makes the plugin read or write there
PROPERTY = OptionType("a string, a number or a boolean", lambda v: isinstance(v, (str, bool, float)) or is_integer(v))
PATH_PROPERTY = OptionType(PROPERTY.allowed, PROPERTY.fits, runs=True)


def compile_config(options: dict) -> dict:
    """Compile properties from the backend's options. ``threads`` (default 1, as in a pool's sandbox)
    becomes INFERENCE_NUM_THREADS: some defects appear only at one thread count, so a reproducer
    must compile exactly as the pool did."""
    config = {k: str(v) for k, v in options.items() if k != "threads"}
    config["INFERENCE_NUM_THREADS"] = str(options.get("threads", 1))
    return config


def ov_input(ov, t):
    """What to feed for a tensor. numpy has no bfloat16 and OpenVINO takes a 2-byte float array for
    f16 (converting it silently, or refusing a 0-d one), so a bfloat16 tensor goes in as an
    ``ov.Tensor`` over a copy of its bits, typed bf16: the copy, because the plugin may write there."""
    if t.dtype == torch.bfloat16:
        bits = np.array(t.detach().cpu().contiguous().view(torch.uint16).numpy())
        return ov.Tensor(bits, shape=list(t.shape), type=ov.Type.bf16)
    return to_numpy(t)


def ov_output(ov, port, a):
    """A bf16 output comes back as a float16-typed array of bfloat16 bits."""
    if port.get_element_type() == ov.Type.bf16:
        return torch.from_numpy(np.asarray(a).view(np.uint16).copy()).view(torch.bfloat16)
    return from_numpy(a)


def prepare_openvino(gm, example_inputs, device, options):
    """Any OpenVINO compile property (``INFERENCE_PRECISION_HINT: f32``) and ``threads``."""
    import openvino as ov

    with stage(Stage.CONVERT):
        model = ov.convert_model(torch.export.export(gm, tuple(t.cpu() for t in example_inputs), strict=False))
    compiled = ov.Core().compile_model(model, _PLUGINS[device], compile_config(options))
    info = {"inference_precision": str(compiled.get_property("INFERENCE_PRECISION_HINT")),
            "execution_mode": str(compiled.get_property("EXECUTION_MODE_HINT")), "plugin": _PLUGINS[device]}
    names = placeholder_names(gm)
    request = compiled.create_infer_request()
    ports = [p.get_any_name() for p in compiled.inputs]

    def run(*inputs):
        by_name = dict(zip(names, inputs))
        result = request.infer([ov_input(ov, by_name.get(n, t)) for n, t in zip(ports, inputs)])
        return tuple(ov_output(ov, out, result[out]) for out in compiled.outputs)
    return run, info


@functools.lru_cache(maxsize=256)
def _plugin_refuses(key: str, text: str) -> str | None:
    """The CPU plugin's own word on compile property ``key`` = ``text``, from compiling a one-operation model
    with it (milliseconds); None when it takes it, or when OpenVINO is not installed here."""
    try:
        import openvino as ov
        import openvino.opset13 as ops
    except ImportError:
        return None
    p = ops.parameter([1], np.float32)
    try:
        ov.Core().compile_model(ov.Model([ops.relu(p)], [p]), "CPU", {key: text})
    except Exception as e:  # noqa: BLE001 - the plugin's refusal, whatever its type, is the answer
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        return f"{text!r} is refused by OpenVINO's CPU plugin: {(lines[-1] if lines else type(e).__name__)[:200]}"
    return None


@register_backend
class OpenVino(Backend):
    """Options: any OpenVINO compile property, e.g. ``INFERENCE_PRECISION_HINT: f32``; ``threads``."""

    name = "openvino"
    devices = ("cpu", "xpu")
    module = "openvino"
    input_device = "cpu"
    prepare_fn = staticmethod(prepare_openvino)
    unoptimised = (("snippets", {"SNIPPETS_MODE": "DISABLE"}),)  # the CPU plugin's fused-subgraph code generation

    @classmethod
    def known_options(cls):
        """``threads`` and the CPU plugin's compile properties (an install without OpenVINO takes any)."""
        try:
            import openvino as ov

            return ["threads", "SNIPPETS_MODE", *sorted(ov.Core().get_property("CPU", "SUPPORTED_PROPERTIES"))]
        except Exception:  # noqa: BLE001 - not installed here: the workers that run it will say
            return None

    @classmethod
    def option_type(cls, key: str) -> OptionType:
        if key == "threads":
            return THREADS
        return PATH_PROPERTY if names_a_program(key, "") else PROPERTY

    @classmethod
    def value_problem(cls, key: str, value, allow_exec: bool = False) -> str | None:
        """Beyond its type, what the CPU plugin itself says of the property's value (``Wrong value ...``)."""
        problem = super().value_problem(key, value, allow_exec)
        if problem or key == "threads" or cls.option_type(key).runs:
            return problem
        return _plugin_refuses(key, compile_config({key: value})[key])

    @classmethod
    def device_unavailable_reason(cls, device):
        """OpenVINO's own plugins decide (its GPU plugin is not torch's xpu)."""
        import openvino as ov

        if _PLUGINS[device] not in ov.Core().available_devices:
            return f"OpenVINO has no {_PLUGINS[device]} device here"
        return None
