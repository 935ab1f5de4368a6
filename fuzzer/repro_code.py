"""Write a minimal variant as a stand-alone ``repro.py``: plain PyTorch and the stack's package.

The graph becomes a ``torch.nn.Module`` whose forward is the graph's own code (calls to
``torch.ops.aten``), traced back into an fx graph as the pool saw it; weights and inputs are
loaded from ``inputs.pt`` with ``weights_only``. The backend is prepared by its own
``prepare_fn`` and the outputs are judged by the campaign's comparison code under the campaign's
``compare`` settings, all copied in verbatim (``source_copy``), so the script decides "the bug is
present" exactly as the campaign did. It exits 1 while the bug is present. Everything taken from
a record or a campaign file enters the script as a literal (``repr``), never as source.
"""
from __future__ import annotations

import textwrap

import torch

from core.bugs import Mode, Status
from core.ir import Variant
from workers.backends.eager import prepare_eager_fp64
from workers.compare import Settings
from workers.executor import to_host
from workers.registry import BackendSpec
from workers.judge import judge_outputs
from workers.training import draws_randomly, lift_parameters, output_names, train_step, trainable_parameters

from .source_copy import SourceCopy

HEADER = '''"""A reproducer written by gapfuzz: run it with `python repro.py` beside inputs.pt.

It needs only torch and the backend's own package. Exit status 1 while the bug is present.
"""
from __future__ import annotations

import sys
from math import inf, nan

import torch
'''

STR_ENUM = '''import enum

StrEnum = getattr(enum, "StrEnum", None) or type("StrEnum", (str, enum.Enum), {"__str__": str.__str__})
'''


# The functions below are copied into every reproducer, where they read its constants (CLASS_PATH,
# INPUTS, PREPARE, ...) and its Repro class; here they are never called.
def prepare_plugin(gm, example_inputs, device, options):
    """A third-party backend class, imported from where the campaign named it."""
    import importlib

    module, _, name = CLASS_PATH.partition(":")
    backend = getattr(importlib.import_module(module), name)(**options)
    return backend.prepare(gm, tuple(example_inputs), device), dict(getattr(backend, "info", None) or {})


def graph_module(weights):
    """The reproducer's module as an fx graph, which is what the backend was given; in training mode
    its parameters (PARAMS) are its first inputs."""
    gm = torch.fx.symbolic_trace(Repro(weights).eval())
    return lift_parameters(gm, PARAMS) if MODE == "training" else gm


def outputs_of(run, params, inputs):
    """The outputs of one call; in training mode also the loss and every gradient (``train_step``)."""
    if MODE == "training":
        return to_host(train_step(run, params, tuple(inputs)))
    return to_host(run(*inputs))


def main():
    if RANDOM:  # random ops (dropout): Inductor draws with eager's generator, train_step seeds it
        from torch._inductor import config as inductor_config

        inductor_config.fallback_random = True
    data = torch.load(INPUTS, weights_only=True)
    weights, inputs = data["weights"], data["inputs"]
    params = [weights[name] for name in PARAMS]
    print(FOUND["title"])
    with torch.no_grad():
        expected = outputs_of(graph_module(weights), params, [t.clone() for t in inputs])
        print(f"reference (eager on the CPU): {[tuple(t.shape) for t in expected if isinstance(t, torch.Tensor)]}")
        try:
            fed = tuple(t.to(INPUT_DEVICE) for t in inputs)
            fed_params = [p.to(INPUT_DEVICE) for p in params]
            run, info = PREPARE(graph_module(weights), (*fed_params, *fed), DEVICE, OPTIONS)
            if info:
                print(f"{BACKEND} reports: {info}")
            actual = outputs_of(run, fed_params, [t.clone() for t in fed])
        except Exception as e:
            print(f"{BACKEND} raised {type(e).__name__}: {e}")
            return 1
        if not DISCREPANCY:
            print(f"{BACKEND} ran without error: the bug is not present")
            return 0
        run_oracle, _ = prepare_eager_fp64(graph_module(weights), (*params, *inputs), "cpu", {})
        oracle = outputs_of(run_oracle, params, [t.clone() for t in inputs])
    figures = judge_outputs(actual, expected, oracle, Settings.from_dict(COMPARE), OUTPUT_KIND,
                            OUTPUT_NAMES, DETECTION_ADAPTER)
    shown = range(len(expected)) if len(expected) <= 4 else [figures.get("worst_output") or 0]
    for i in shown:
        e, a = expected[i], actual[i]
        if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor):
            name = OUTPUT_NAMES[i] if i < len(OUTPUT_NAMES) else i
            print(f"output {name}: expected {e.flatten()[:6].tolist()}")
            print(f"output {name}: actual   {a.flatten()[:6].tolist()}")
    print(f"{BACKEND}: {figures['symptom']}, max |actual - expected| = {figures['max_abs_err']:.6g}; distance "
          f"from float64 in tolerances: {BACKEND} {figures['err_vs_oracle']}, eager {figures['ref_err_vs_oracle']}; "
          f"verdict {figures['verdict']}")
    task_differs = (figures.get("task_agree") or 1.0) < 1.0
    present = figures["verdict"] == VERDICT and (SYMPTOM is None or figures["symptom"] == SYMPTOM) and (
        task_differs or not TASK_DIFFERS)
    print(f"the bug is {'present' if present else 'not present'} (the campaign's verdict: {VERDICT}, {SYMPTOM})")
    return 1 if present else 0


def _forward_source(v: Variant) -> tuple[str, list[str]]:
    code = v.gm.graph.python_code(root_module="self")
    lines = [f"{name} = torch.{name}" if name in ("device", "dtype", "layout") else None
             for name in code.globals if name not in ("torch", "inf", "nan")]
    return textwrap.indent(code.src.strip(), "    "), [ln for ln in lines if ln]


def reproducer(v: Variant, target: BackendSpec, record: dict, title: str, compare: dict, output_kind: str = "tensor",
               detection_adapter: bool = True, inputs_file: str = "inputs.pt") -> str:
    """The text of repro.py for variant ``v`` on backend ``target``, showing the bug of ``record``;
    ``compare`` is the campaign's compare settings (tolerances, multiplier, far)."""
    cls = target.backend_cls()
    copy = SourceCopy({"StrEnum": STR_ENUM})
    prepare = copy.add(cls.prepare_fn if cls.prepare_fn is not None else prepare_plugin)
    copy.add(main)  # and what it calls: the oracle, the judge, the comparison
    forward, aliases = _forward_source(v)
    discrepancy = record["status"] == Status.MISMATCH or record.get("task_agree") is not None and \
        record["task_agree"] < 1
    found = {"title": title, "campaign": record.get("campaign"), "variant": record.get("variant_id"),
             "seed": record.get("seed_id"), "backend": target.name}
    constants = {
        "FOUND": found, "BACKEND": target.name, "DEVICE": target.device,
        "INPUT_DEVICE": cls.input_device or target.device, "OPTIONS": dict(target.options),
        "CLASS_PATH": None if cls.prepare_fn is not None else plugin_path(target), "DISCREPANCY": bool(discrepancy), "VERDICT": record.get("verdict"),
        "SYMPTOM": record.get("symptom"), "TASK_DIFFERS": bool(record.get("task_agree") is not None and
                                                               record["task_agree"] < 1),
        "COMPARE": compare, "OUTPUT_KIND": output_kind, "OUTPUT_NAMES": list(output_names(v)),
        "MODE": str(v.mode), "PARAMS": trainable_parameters(v.gm) if v.mode == Mode.TRAINING else [],
        "RANDOM": v.mode == Mode.TRAINING and draws_randomly(v.gm),
        "DETECTION_ADAPTER": detection_adapter, "INPUTS": inputs_file,
    }
    literals = "\n".join(f"{k} = {_literal(val)!s}" for k, val in constants.items())
    parts = [
        HEADER.rstrip(),
        "\n".join(aliases),
        literals,
        "class Repro(torch.nn.Module):\n    def __init__(self, weights):\n        super().__init__()\n"
        "        for name, t in weights.items():\n            self.register_buffer(name, t)\n\n" + forward + "\n",
        copy.text(have=("import sys", "import torch")),
        f"PREPARE = {prepare}",
        'if __name__ == "__main__":\n    sys.exit(main())\n',
    ]
    return "\n\n\n".join(p.strip() for p in parts if p.strip()) + "\n"


def plugin_path(target: BackendSpec) -> str:
    """``module:Class`` of a backend whose run logic is its own class, not a ``prepare_fn``."""
    cls = target.backend_cls()
    plugin = cls.plugin or cls
    return target.cls_path or f"{plugin.__module__}:{plugin.__qualname__}"


def _literal(value) -> str:
    """A value from a record or campaign file as a Python literal (repr of plain data only)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_literal(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if isinstance(value, str):
        return repr(str(value))  # a str subclass (an enum) as the plain string
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    raise TypeError(f"{type(value).__name__} is not plain data for a reproducer")


def save_inputs(v: Variant, path) -> None:
    torch.save({"inputs": [t.clone() for t in v.inputs],
                "weights": {k: t.detach().clone() for k, t in v.tensors().items()}}, path)
