"""What a reproducer shows (``Case``), what it is (``Script``), and the pieces every writer shares:
the docstring, the failure check, the arguments as literals, eager's expected values and the check."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gapfuzz.core.bugs import FAILED, Status, Symptom
from gapfuzz.core.codegen import comment, docstring
from gapfuzz.core.ir import Variant
from gapfuzz.core.modes import RunMode
from gapfuzz.core.tolerances import DEFAULT_TOLERANCES
from gapfuzz.fuzzer.repro.record import record_of
from gapfuzz.fuzzer.repro.reproducers.literals import SPECIAL_HELPER, generated, inlinable, torch_literal
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.run.registry import BackendSpec

INDEX_OPS = {"argmax", "argmin", "sort", "topk", "kthvalue", "mode", "max", "min", "median", "nanmedian", "cummax",
             "cummin", "nonzero", "unique", "sort_stable"}


@dataclass
class Case:
    """What a reproducer shows: the final graph on one backend, the record's bug and how it is checked."""

    v: Variant
    target: BackendSpec
    record: RunRecord  # a row of one is typed on the way in
    title: str
    check: str  # "nonfinite" (NaN/Inf pattern), "exact" (integers), "close" (within tolerance), "raises"
    tolerance: tuple = DEFAULT_TOLERANCES["float32"]  # (rtol, atol) at the output's dtype
    options: dict = field(default_factory=dict)  # the run's backend options
    error_type: str = ""
    phrase: str = ""  # the fixed start of the failure's message template
    class_path: str = ""  # a plug-in stack's ``module:Class``
    timeout_s: float = 300.0  # the campaign's: a hang is a run that outlasts it

    mode: RunMode = field(init=False)  # the variant's, asked once

    def __post_init__(self):
        self.record = record_of(self.record)
        self.mode = self.v.mode


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


def compares(case: Case) -> bool:
    """Whether the reproducer compares outputs with eager's (not a failure, nor a check eager makes)."""
    return not _is_failure(case) and case.check != "raises"


def check_of(record: RunRecord, symptom: str) -> str:
    if str(symptom).startswith(Symptom.MISSING_ERROR):
        return "raises"  # eager checks the input and raises; the stack returns
    if symptom in (Symptom.NONFINITE, Symptom.GRAD_NONFINITE):
        return "nonfinite"
    return "exact" if symptom == Symptom.INTEGER or str(record.output_dtype or "").startswith(
        ("int", "uint", "bool")) else "close"


def _doc(case: Case, needs: str) -> str:
    r = case.record
    return docstring(f'{case.title}\n\nFound by gapfuzz (campaign {r.campaign}, variant {r.variant_id}). '
                     f'Needs {needs}.\nExit status 1 while the bug is present, 0 once it is fixed.')


def _is_failure(case: Case) -> bool:
    return case.record.status in FAILED


def _raises(call: str, case: Case, indent: str = "") -> str:
    """Lines that run ``call`` and exit 1 on the recorded failure, 3 on another; for a hang, a watchdog
    that prints the stacks and exits 1 once the run outlasts the campaign's timeout."""
    matches = f"type(e).__name__ == {case.error_type!r}" + (f" and {case.phrase!r} in str(e)" if case.phrase else "")
    watchdog = ("import faulthandler", "", f"TIMEOUT_S = {float(case.timeout_s)!r}  # the campaign's timeout",
                "faulthandler.dump_traceback_later(TIMEOUT_S, exit=True)  # a hang: the stacks, exit 1", "") \
        if case.record.status == Status.TIMEOUT else ()
    return "\n".join(indent + x if x else x for x in (
        *watchdog,
        "try:", f"    {call}", "except Exception as e:", '    print(f"{type(e).__name__}: {e}")',
        f"    sys.exit(1 if {matches} else 3)", 'print("no error: the bug is not present")', "sys.exit(0)"))


def dropped_check(eager: str | None, target: str, case: Case) -> list[str]:
    """Lines for a missing check: eager raises on these inputs (run with ``eager``, or quoted where the
    script has no torch), the stack's ``target`` call returns: exit 1; it raises too: exit 0."""
    said = ((case.record.message or "").splitlines() or [""])[0]
    lines = [comment(f"PyTorch eager raises here: {said}")]
    if eager:
        lines += ["try:", f"    {eager}", "except Exception as e:",
                  '    print(f"eager raises {type(e).__name__}: {e}")',
                  "else:", '    print("eager no longer raises on these inputs: not the bug")', "    sys.exit(3)"]
    return lines + ["try:", f"    result = {target}", "except Exception as e:",
                    '    print(f"the stack raises too ({type(e).__name__}: {e}): the bug is not present")',
                    "    sys.exit(0)", 'print(f"the stack returns without raising: {result}")', "sys.exit(1)"]


def index_only(case: Case) -> bool:
    """A divergence whose outputs are all indices (argmax, a sort's order, max's indices)."""
    if not compares(case):
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


def _args_block(v: Variant, fn_weights: list, split: bool = False) -> str | None:
    """``args = (...)``: inputs then weights, as literals, or seeded-random with their special values
    where too large to inline (the script then defines ``special``); with ``split``, ``inputs = (...)``
    and ``weights = (...)`` apart."""
    tensors = list(v.inputs) + [v.tensors()[w] for w in fn_weights]
    items = [torch_literal(t.detach()) if inlinable(t) else generated(t, i) for i, t in enumerate(tensors)]
    if None in items:
        return None
    n = len(v.inputs)
    groups = [("inputs", items[:n]), ("weights", items[n:])] if split else [("args", items)]
    text = "\n".join(_tuple(name, group) for name, group in groups)
    return (SPECIAL_HELPER + "\n\n\n" + text) if "special(" in text else text


def _tuple(name: str, items: list) -> str:
    if len(items) > 1 and sum(map(len, items)) > 70:
        return f"{name} = (\n" + "".join(f"    {x},\n" for x in items) + ")"
    return f"{name} = ({', '.join(items)}{',' if len(items) == 1 else ''})"


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
            "    e, a = np.atleast_1d(e, a)",
            f"    bad = {test}",
            '    print(f"{bad.sum()} of {bad.size} differ at {np.argwhere(bad)[:4].tolist()}: '
            'expected {e[bad][:4].tolist()}, got {a[bad][:4].tolist()}")',
            "    present |= bool(bad.any())",
            "sys.exit(int(present))"]


