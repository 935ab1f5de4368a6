"""ONNX Runtime and OpenVINO: the ONNX model built with ``onnx.helper`` (no torch), the inputs and
expected values inline, run with the options of the campaign's run; for OpenVINO also the torch
module through its PyTorch frontend, where a conversion gap lives."""
from __future__ import annotations

import warnings

import torch

from gapfuzz.fuzzer.repro.reproducers.literals import inlinable, needs_nan_names, numpy_literal
from gapfuzz.fuzzer.repro.reproducers.onnx_code import helper_source
from gapfuzz.fuzzer.repro.reproducers.torch_code import function_source
from gapfuzz.workers.backends.host_arrays import placeholder_names, to_numpy
from gapfuzz.workers.backends.onnxruntime import _LEVELS, feed_order
from gapfuzz.workers.backends.openvino import compile_config

from .case import (
    Case,
    Script,
    _args_block,
    _compare_lines,
    _doc,
    _expected,
    _is_failure,
    _raises,
    compares,
    dropped_check,
)


def _onnx_model(case: Case, options: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(case.v.gm, tuple(t.cpu() for t in case.v.inputs), dynamo=True, verbose=False,
                                    opset_version=options.get("opset"), optimize=options.get("optimize", True))
    return program.model_proto


def _feed(model, case: Case) -> tuple[str, list]:
    real = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in real]
    order = feed_order(names, placeholder_names(case.v.gm))
    arrays = [to_numpy(case.v.inputs[i]) for i in order]
    items = [f"{n!r}: {numpy_literal(a)}" for n, a in zip(names, arrays)]
    return ("inputs = {" + ", ".join(items) + "}" if sum(map(len, items)) < 70 else
            "inputs = {\n" + "".join(f"    {x},\n" for x in items) + "}"), arrays


def _onnx_forms(case: Case, run: str, needs: str, imports: list, setup: list, rules: list,
                prepare: str = "") -> list[Script]:
    """The ONNX model built with onnx.helper (or shipped as model.onnx when it is not small), the inputs
    and expected values inline, then ``setup`` and ``run``. A failure at the compile stage only
    ``prepare``s (creates the session), so it needs no inputs."""
    try:
        model = _onnx_model(case, dict(case.options))
    except Exception:  # noqa: BLE001 - the exporter cannot take it: the generic reproducer will
        return []
    compile_only = _is_failure(case) and case.record.stage in ("convert", "compile") and prepare
    feed = exp = ""
    if not compile_only:
        expected = _expected(case) if compares(case) else []
        if not all(inlinable(t) and t.dtype != torch.bfloat16 for t in [*case.v.inputs, *expected]):
            return []  # the torch-based forms generate large inputs; numpy (no bfloat16) scripts carry literals
        feed = _feed(model, case)[0]
        exp = "expected = [" + ", ".join(numpy_literal(to_numpy(t)) for t in expected) + "]  # PyTorch eager" \
            if expected else ""
    built = helper_source(model)
    out = []
    for form, build, files in (("onnx.helper", built, {}),
                               ("model.onnx", 'model = onnx.load("model.onnx")',
                                {"model.onnx": model.SerializeToString()})):
        if build is None:
            continue
        head = ["import sys", "", *([] if compile_only else ["import numpy as np"]), *imports,
                "import onnx" if form == "model.onnx" else "from onnx import TensorProto, helper, numpy_helper"]
        if any(needs_nan_names(x) for x in (feed, exp, build)):
            head[0:2] = ["import sys", "from math import inf, nan", ""]
        body = [build, "", *[x for x in (feed, exp) if x], *setup]
        if _is_failure(case):
            body.append(_raises(prepare if compile_only else run, case))
        elif case.check == "raises":
            body += dropped_check(None, run, case)
        else:
            body += ["actual = " + run, *_compare_lines(case)]
        out.append(Script("\n".join([_doc(case, needs), *head, "", *body]).rstrip() + "\n", form, list(rules), files))
    return out


def onnxruntime(case: Case) -> list[Script]:
    level = _LEVELS[case.options.get("graph_optimization_level", "all")]
    setup = ["opts = ort.SessionOptions()", f"opts.graph_optimization_level = ort.GraphOptimizationLevel.{level}",
             f"opts.intra_op_num_threads = {int(case.options.get('threads', 1))}"]
    session = "ort.InferenceSession(model.SerializeToString(), opts, providers=['CPUExecutionProvider'])"
    forms = _onnx_forms(case, session + ".run(None, inputs)", "onnx and onnxruntime (no torch)",
                        ["import onnxruntime as ort"], setup,
                        ["the ONNX model built with onnx.helper, run with the session options that showed the bug"],
                        prepare=session)
    if _is_failure(case) and case.record.stage == "convert":  # the exporter's gap: torch.onnx's own script
        export = (f"torch.onnx.export(Model(), inputs, dynamo=True, opset_version={case.options.get('opset')!r}, "
                  f"optimize={case.options.get('optimize', True)!r})")
        forms += from_torch(case, "torch.onnx.export", "torch, onnx and onnxscript (the exporter)", [], export, "",
                             ["the torch module exported by torch.onnx (dynamo=True) as the run exported it"])
    return forms


def openvino(case: Case) -> list[Script]:
    config = compile_config(dict(case.options))
    compiled = f"ov.Core().compile_model(ov.Core().read_model(model.SerializeToString(), b''), 'CPU', {config!r})"
    run = f"list({compiled}(list(inputs.values())).values())"
    frontend = f"ov.Core().compile_model(ov.convert_model(torch.export.export(Model(), inputs)), 'CPU', {config!r})"
    return _onnx_forms(case, run, "onnx and openvino (no torch)", ["import openvino as ov"], [],
                       ["the model built with onnx.helper, read and compiled by OpenVINO with the properties of "
                        "the run"], prepare=compiled) + \
        from_torch(case, "openvino from torch", "torch and openvino", ["import openvino as ov"], frontend,
                    "([a.numpy() for a in inputs])",
                    ["the torch module converted by OpenVINO's PyTorch frontend (ov.convert_model), compiled with "
                     "the properties of the run"])


def from_torch(case: Case, form: str, needs: str, imports: list, prepare: str, call: str, rules: list,
                actual: str = "list({}.values())") -> list[Script]:
    """The torch module handed to the stack by ``prepare`` (then called with ``call``), as plain torch
    calls, then as the graph's own ATen calls (a conversion gap may live in the ATen form only)."""
    out = []
    for suffix, plain in (("", True), (", ATen calls", False)):
        script = _torch_module_form(case, form + suffix, plain, needs, imports, prepare, call, rules, actual)
        if script is not None and all(script.text != s.text for s in out):
            out.append(script)
    return out


def _torch_module_form(case: Case, form: str, plain: bool, needs: str, imports: list, prepare: str, call: str,
                       rules: list, actual: str) -> Script | None:
    try:
        fn, weights = function_source(case.v.gm, case.v.inputs, plain=plain)
    except TypeError:
        return None
    args = _args_block(case.v, weights, split=True)
    expected = _expected(case) if compares(case) else []
    if args is None or any(t.dtype == torch.bfloat16 for t in expected) or (not _is_failure(case) and not call):
        return None
    exp = "" if not compares(case) else \
        "expected = [" + ", ".join(numpy_literal(to_numpy(t)) for t in expected) + "]  # PyTorch eager" if \
        all(inlinable(t) for t in expected) and "special(" not in args else \
        "expected = [t.numpy() for t in torch.utils._pytree.tree_leaves(f(*inputs, *weights))]  # PyTorch eager"
    text = [_doc(case, needs), "import sys", *(["from math import inf, nan"] if needs_nan_names(args + exp) else []),
            "", *([] if _is_failure(case) else ["import numpy as np"]), *imports, "import torch", "", "", fn, "", "",
            args, *([exp] if exp else []), "", "",
            "class Model(torch.nn.Module):  # the weights are the model's constants", "    def forward(self, *inputs):",
            "        return f(*inputs, *weights)",
            "", ""]
    if _is_failure(case):
        text.append(_raises(prepare + call, case))
    elif case.check == "raises":
        text += dropped_check("f(*inputs, *weights)", prepare + call, case)
    else:
        text += ["actual = " + actual.format(prepare + call), *_compare_lines(case)]
    return Script("\n".join(text).rstrip() + "\n", form, rules)
