"""Reproducers in each stack's own public API, as its maintainers write them, without gapfuzz.

- Inductor and aot-eager: the graph as plain torch calls, ``torch.compile`` with the run's options,
  judged by PyTorch's own accuracy rule (``torch._dynamo.utils.same`` at its default tolerance,
  against a float64 run as ``fp64_ref``), ``fallback_random=True`` where random operators run.
- ONNX Runtime: the ONNX model built with ``onnx.helper`` (no torch), the session options of the run,
  the expected values inline.
- OpenVINO: the same ONNX model read by OpenVINO, compiled with the run's properties; or, where the
  bug lives in its PyTorch frontend, ``ov.convert_model`` of the torch module.

Each writer returns candidate ``Script`` forms, most native first; ``fuzzer.repro`` keeps the first one
that shows the bug in a fresh process. Inputs are literals (``literals``); expected values are PyTorch
eager's on the CPU, computed here. Exit status 1 while the bug is present.
"""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from core.bugs import Mode, Status, Symptom
from core.ir import Variant
from workers.backends.host_arrays import placeholder_names, to_numpy
from workers.backends.onnxruntime import _LEVELS, feed_order
from workers.backends.openvino import compile_config
from workers.registry import BackendSpec

from .literals import SPECIAL_HELPER, generated, inlinable, needs_nan_names, numpy_literal, torch_literal
from .onnx_code import helper_source
from .torch_code import function_source

log = logging.getLogger("gapfuzz.fuzzer")
INDEX_OPS = {"argmax", "argmin", "sort", "topk", "kthvalue", "mode", "max", "min", "median", "nanmedian", "cummax",
             "cummin", "nonzero", "unique", "sort_stable"}


@dataclass
class Case:
    """What a reproducer shows: the final graph on one backend, the record's bug and how it is checked."""

    v: Variant
    target: BackendSpec
    record: dict
    title: str
    check: str  # "nonfinite" (NaN/Inf pattern), "exact" (integers), "close" (within tolerance)
    tolerance: tuple = (1.3e-6, 1e-5)  # (rtol, atol) at the output's dtype
    options: dict = field(default_factory=dict)  # the run's backend options
    error_type: str = ""
    phrase: str = ""  # the fixed start of the failure's message template


@dataclass
class Script:
    text: str
    form: str  # how the bug is shown: "torch.compile", "onnx.helper", "onnx file", "openvino from torch", ...
    rules: list = field(default_factory=list)  # the vendor's rules the script meets
    files: dict = field(default_factory=dict)  # name -> bytes, shipped beside repro.py
    notes: list = field(default_factory=list)  # what a report must say (index-only, ...)

    @property
    def lines(self) -> int:
        return self.text.count("\n")


def check_of(record: dict, symptom: str) -> str:
    if symptom in (Symptom.NONFINITE, Symptom.GRAD_NONFINITE):
        return "nonfinite"
    return "exact" if symptom == Symptom.INTEGER or str(record.get("output_dtype") or "").startswith(
        ("int", "uint", "bool")) else "close"


def _doc(case: Case, needs: str) -> str:
    r = case.record
    return (f'"""{case.title}\n\nFound by gapfuzz (campaign {r.get("campaign")}, variant {r.get("variant_id")}). '
            f'Needs {needs}.\nExit status 1 while the bug is present, 0 once it is fixed."""')


def _is_failure(case: Case) -> bool:
    return case.record["status"] not in (Status.MISMATCH, Status.OK)


def _raises(call: str, case: Case, indent: str = "") -> str:
    """Lines that run ``call`` and exit 1 on the recorded failure, 3 on another."""
    matches = f"type(e).__name__ == {case.error_type!r}" + (f" and {case.phrase!r} in str(e)" if case.phrase else "")
    return "\n".join(indent + x for x in (
        "try:", f"    {call}", "except Exception as e:", '    print(f"{type(e).__name__}: {e}")',
        f"    sys.exit(1 if {matches} else 3)", 'print("no error: the bug is not present")', "sys.exit(0)"))


def index_only(case: Case) -> bool:
    """A divergence whose outputs are all indices (argmax, a sort's order, max's indices)."""
    if _is_failure(case):
        return False
    out = next(n for n in case.v.gm.graph.nodes if n.op == "output").args[0]
    for a in torch.utils._pytree.tree_leaves(out):
        while isinstance(a, torch.fx.Node) and not hasattr(a.target, "_opname") and a.args:
            a = a.args[0]  # through getitem to the op
        val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
        if getattr(getattr(a, "target", None), "_opname", None) not in INDEX_OPS or \
                (isinstance(val, torch.Tensor) and val.dtype != torch.int64):
            return False
    return True


# ------------------------------------------------------------------- PyTorch: torch.compile
def _args_block(v: Variant, fn_weights: list) -> str | None:
    """``args = (...)``: inputs then weights, as literals, or seeded-random with their special values
    where too large to inline (the script then defines ``special``)."""
    tensors = list(v.inputs) + [v.tensors()[w] for w in fn_weights]
    items = [torch_literal(t.detach()) if inlinable(t) else generated(t, i) for i, t in enumerate(tensors)]
    if None in items:
        return None
    text = "args = (\n" + "".join(f"    {x},\n" for x in items) + ")" if sum(map(len, items)) > 70 else \
        f"args = ({', '.join(items)}{',' if len(items) == 1 else ''})"
    return (SPECIAL_HELPER + "\n\n\n" + text) if "special(" in text else text


def _compile_call(case: Case) -> str:
    options = dict(case.options)
    mode, dynamic = options.pop("mode", None), options.pop("dynamic", None)
    backend = "aot_eager" if case.target.stack == "aot-eager" else "inductor"
    kw = [f'backend="{backend}"'] + ([f"mode={mode!r}"] if mode else []) + (["dynamic=True"] if dynamic else []) + \
        ([f"options={options!r}"] if options and not mode and backend == "inductor" else [])
    return f"torch.compile(f, {', '.join(kw)})"


def torch_compile(case: Case) -> list[Script]:
    order = [("torch.compile", True), ("torch.compile, ATen calls", False)]
    out = []
    for form, plain in order:
        try:
            fn, weights = function_source(case.v.gm, case.v.inputs, plain=plain)
        except TypeError:
            return []
        args = _args_block(case.v, [w for w in weights])
        if args is None:
            return out
        training = case.v.mode == Mode.TRAINING
        lines = [_doc(case, f"torch {torch.__version__.split('+')[0]}"), "import sys",
                 *(["from math import inf, nan"] if needs_nan_names(args) else []), "", "import torch",
                 "from torch._dynamo.utils import same", "", "", fn, "", "", args]
        random = any(getattr(n.target, "_nondeterministic_seeded", False) for n in case.v.gm.graph.nodes)
        if random:
            lines.append("torch._inductor.config.fallback_random = True  # random ops draw as eager does")
        compiled = _compile_call(case)
        if _is_failure(case):
            lines.append(_raises(f"{compiled}(*args)", case))
        else:
            if training:
                lines += ["", "", "def grads(fn, args):  # the forward, then a plain backward of a fixed projection",
                          "    args = [a.detach().requires_grad_(a.is_floating_point()) for a in args]",
                          "    out = fn(*args)",
                          "    out.backward(torch.randn(out.shape, generator=torch.Generator().manual_seed(0),"
                          " dtype=out.dtype))",
                          "    return out.detach(), *[a.grad for a in args if a.requires_grad]", "", ""]
                call = lambda fn, a: f"grads({fn}, {a})"  # noqa: E731
            else:
                call = lambda fn, a: f"{fn}(*{a})"  # noqa: E731
            wide = "[a.double() if a.is_floating_point() else a for a in args]"
            lines += [f"expected = {call('f', 'args')}  # eager",
                      f"fp64 = {call('f', wide)}",
                      f"actual = {call(compiled, 'args')}",
                      "for e, a in zip(torch.utils._pytree.tree_leaves(expected), torch.utils._pytree.tree_leaves(actual)):",
                      "    bad = ~torch.isclose(a, e, rtol=1e-4, atol=1e-4, equal_nan=True) if e.is_floating_point() else a != e",
                      '    print(f"{int(bad.sum())} of {e.numel()} differ at {bad.nonzero()[:4].tolist()}: '
                      'eager {e[bad][:4].tolist()}, compiled {a[bad][:4].tolist()}")',
                      "sys.exit(0 if same(expected, actual, fp64_ref=fp64, equal_nan=True) else 1)"]
        rules = ["PyTorch's rules for fuzzer reports: torch._dynamo.utils.same at its default tolerance, "
                 "with a float64 reference (fp64_ref)"] + (["fallback_random=True"] if random else [])
        script = Script("\n".join(lines).rstrip() + "\n", form, rules)
        if index_only(case):
            script.notes.append("index-only: only indices differ (argmax, a sort's order, max's indices); under "
                                "PyTorch's rules this is not offered as a report unless values differ too")
        out.append(script)
    return out


# ------------------------------------------------------------------- ONNX Runtime and OpenVINO
def _expected(case: Case) -> list:
    with torch.no_grad():
        out = case.v.gm(*[t.clone() for t in case.v.inputs])
    return [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _compare_lines(case: Case) -> list[str]:
    rtol, atol = case.tolerance
    test = {"nonfinite": "(np.isnan(a) != np.isnan(e)) | ((np.isinf(a) | np.isinf(e)) & (a != e))",
            "exact": "a != e",
            "close": f"~np.isclose(a, e, rtol={rtol!r}, atol={atol!r}, equal_nan=True)"}[case.check]
    return ["present = False",
            "for e, a in zip(expected, actual):",
            f"    bad = {test}",
            '    print(f"{bad.sum()} of {bad.size} differ at {np.argwhere(bad)[:4].tolist()}: '
            'expected {e[bad][:4].tolist()}, got {a[bad][:4].tolist()}")',
            "    present |= bool(bad.any())",
            "sys.exit(int(present))"]


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
    compile_only = _is_failure(case) and case.record.get("stage") in ("convert", "compile") and prepare
    feed = exp = ""
    if not compile_only:
        expected = [] if _is_failure(case) else _expected(case)
        if not all(inlinable(t) and t.dtype != torch.bfloat16 for t in [*case.v.inputs, *expected]):
            return []  # the torch-based forms generate large inputs; numpy (no bfloat16) scripts carry literals
        feed = _feed(model, case)[0]
        exp = "expected = [" + ", ".join(numpy_literal(to_numpy(t)) for t in expected) + "]  # PyTorch eager" \
            if expected else ""
    built = helper_source(model)
    out = []
    for form, build, files in (("onnx.helper", built, {}),
                               ("model.onnx", 'model = onnx.load("model.onnx")', {"model.onnx": model.SerializeToString()})):
        if build is None:
            continue
        head = ["import sys", "", *([] if compile_only else ["import numpy as np"]), *imports,
                "import onnx" if form == "model.onnx" else "from onnx import TensorProto, helper, numpy_helper"]
        if any(needs_nan_names(x) for x in (feed, exp, build)):
            head[0:2] = ["import sys", "from math import inf, nan", ""]
        body = [build, "", *[x for x in (feed, exp) if x], *setup]
        if _is_failure(case):
            body.append(_raises(prepare if compile_only else run, case))
        else:
            body += ["actual = " + run, *_compare_lines(case)]
        out.append(Script("\n".join([_doc(case, needs), *head, "", *body]).rstrip() + "\n", form, list(rules), files))
    return out


def onnxruntime(case: Case) -> list[Script]:
    level = _LEVELS[case.options.get("graph_optimization_level", "all")]
    setup = ["opts = ort.SessionOptions()", f"opts.graph_optimization_level = ort.GraphOptimizationLevel.{level}",
             f"opts.intra_op_num_threads = {int(case.options.get('threads', 1))}"]
    session = "ort.InferenceSession(model.SerializeToString(), opts, providers=['CPUExecutionProvider'])"
    return _onnx_forms(case, session + ".run(None, inputs)", "onnx and onnxruntime (no torch)",
                       ["import onnxruntime as ort"], setup,
                       ["the ONNX model built with onnx.helper, run with the session options that showed the bug"],
                       prepare=session)


def openvino(case: Case) -> list[Script]:
    config = compile_config(dict(case.options))
    compiled = f"ov.Core().compile_model(ov.Core().read_model(model.SerializeToString(), b''), 'CPU', {config!r})"
    run = f"list({compiled}(list(inputs.values())).values())"
    return _onnx_forms(case, run, "onnx and openvino (no torch)", ["import openvino as ov"], [],
                       ["the model built with onnx.helper, read and compiled by OpenVINO with the properties of "
                        "the run"], prepare=compiled) + _openvino_from_torch(case, config)


def _openvino_from_torch(case: Case, config: dict) -> list[Script]:
    try:
        fn, weights = function_source(case.v.gm, case.v.inputs)
    except TypeError:
        return []
    args = _args_block(case.v, weights)
    expected = _expected(case)
    if args is None or any(t.dtype == torch.bfloat16 for t in expected):
        return []
    exp = "expected = [" + ", ".join(numpy_literal(to_numpy(t)) for t in expected) + "]  # PyTorch eager" if \
        all(inlinable(t) for t in expected) and "special(" not in args else \
        "expected = [t.numpy() for t in torch.utils._pytree.tree_leaves(f(*args))]  # PyTorch eager"
    n = len(case.v.inputs)
    text = [_doc(case, "torch and openvino"), "import sys", *(["from math import inf, nan"] if needs_nan_names(
            args + exp) else []), "", "import numpy as np", "import openvino as ov", "import torch", "", "", fn, "", "",
            args, f"inputs, weights = args[:{n}], args[{n}:]  # weights are the model's constants", exp, "", "",
            "class Model(torch.nn.Module):", "    def forward(self, *inputs):", "        return f(*inputs, *weights)",
            "", ""]
    compile_ = (f"ov.Core().compile_model(ov.convert_model(torch.export.export(Model(), inputs)), 'CPU', {config!r})"
                "([a.numpy() for a in inputs])")
    if _is_failure(case):
        text.append(_raises(compile_, case))
    else:
        text += [f"actual = list({compile_}.values())", *_compare_lines(case)]
    return [Script("\n".join(text).rstrip() + "\n", "openvino from torch",
                   ["the torch module converted by OpenVINO's PyTorch frontend (ov.convert_model), compiled with the "
                    "properties of the run"])]


WRITERS = {"inductor": torch_compile, "aot-eager": torch_compile, "onnxruntime": onnxruntime, "openvino": openvino}


def native_scripts(case: Case) -> list[Script]:
    """The candidate reproducers of ``case`` in its stack's own API, most native first; none for a stack
    without a writer (a plug-in: the generic reproducer imports its class). A graph a writer cannot
    express gives none, never an error: the generic reproducer stands."""
    writer = WRITERS.get(case.target.stack)
    if writer is None or case.target.device != "cpu" and case.target.stack in ("onnxruntime", "openvino"):
        return []
    try:
        return writer(case)
    except Exception as e:  # noqa: BLE001 - a writer's gap costs the native form, not the reproducer
        log.warning("no %s reproducer in its own API: %s: %s", case.target.stack, type(e).__name__, e)
        return []
