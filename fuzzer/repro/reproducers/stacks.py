"""Reproducers in each stack's own public API, as its maintainers write them, without gapfuzz.

- Inductor and aot-eager: the graph as plain torch calls, ``torch.compile`` with the run's options,
  judged by PyTorch's own accuracy rule (``torch._dynamo.utils.same`` at its default tolerance,
  against a float64 run as ``fp64_ref``), ``fallback_random=True`` where random operators run.
- ONNX Runtime: the ONNX model built with ``onnx.helper`` (no torch), the session options of the run,
  the expected values inline.
- OpenVINO: the same ONNX model read by OpenVINO, compiled with the run's properties; or, where the
  bug lives in its PyTorch frontend, ``ov.convert_model`` of the torch module.

Each writer returns candidate ``Script`` forms, most native first; ``fuzzer.repro.minimise`` keeps the first one
that shows the bug in a fresh process. Inputs are literals (``literals``); expected values are PyTorch
eager's on the CPU, computed here. Exit status 1 while the bug is present.
"""
from __future__ import annotations

import logging

import torch

from gapfuzz.fuzzer.repro.reproducers.case import Case, Script, _is_failure
from gapfuzz.fuzzer.repro.reproducers.onnx_stacks import onnxruntime, openvino
from gapfuzz.fuzzer.repro.reproducers.plugin import plugin
from gapfuzz.fuzzer.repro.reproducers.pytorch import torch_compile

log = logging.getLogger("gapfuzz.fuzzer")


WRITERS = {"inductor": torch_compile, "aot-eager": torch_compile, "onnxruntime": onnxruntime, "openvino": openvino}


def native_scripts(case: Case) -> list[Script]:
    """The candidate reproducers of ``case`` in its stack's own API, most native first; none for a stack
    without a writer (a plug-in: the generic reproducer imports its class). A graph a writer cannot
    express gives none, never an error: the generic reproducer stands."""
    writer = WRITERS.get(case.target.stack)
    if case.target.device != "cpu" and case.target.stack in ("onnxruntime", "openvino"):
        return []
    try:
        if writer is None and case.target.backend_cls().prepare_fn is None and ":" in (case.class_path or ""):
            scripts = plugin(case, case.class_path)
        else:
            scripts = writer(case) if writer else []
    except Exception as e:  # noqa: BLE001 - a writer's gap costs the native form, not the reproducer
        log.warning("no %s reproducer in its own API: %s: %s", case.target.stack, type(e).__name__, e)
        return []
    for script in scripts:
        script.notes += undefined_by_spec(case)
    return scripts


_INTEGERS = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def undefined_by_spec(case: Case) -> list[str]:
    """What the stack's spec leaves undefined in this graph: a float-to-integer cast of a value out of the
    target's range (ONNX's Cast), which no stack is obliged to answer as eager does."""
    if case.target.stack not in ("onnxruntime", "openvino") or _is_failure(case):
        return []
    for n in case.v.gm.graph.nodes:
        dtype = n.kwargs.get("dtype") if n.op == "call_function" else None
        source = n.args[0] if n.args else None
        val = getattr(source, "meta", {}).get("val")
        if dtype in _INTEGERS and isinstance(val, torch.Tensor) and val.is_floating_point():
            return ["undefined by the spec: the graph casts floating values to an integer type, and ONNX leaves a "
                    "Cast of a value outside the target type's range (or NaN) undefined; not offered as a defect "
                    "unless the values cast are in range"]
    return []
