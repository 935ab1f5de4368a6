"""PyTorch's compilers (Inductor, aot-eager): the graph as plain torch calls under ``torch.compile``,
judged by PyTorch's own rule for fuzzer reports: ``torch._dynamo.utils.same`` at its default tolerance
against a float64 run (``fp64_ref``), ``fallback_random=True`` where random operators run."""
from __future__ import annotations

import torch

from gapfuzz.fuzzer.repro.reproducers.literals import needs_nan_names
from gapfuzz.fuzzer.repro.reproducers.torch_code import function_source

from .case import Case, Script, _args_block, _doc, _is_failure, _raises, compares, dropped_check, index_only


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
        args = _args_block(case.v, weights)
        if args is None:
            return out
        mode = case.mode
        ran = str(case.record.torch_version or torch.__version__).split("+")[0]  # the release it ran under
        lines = [_doc(case, f"torch {ran}"), "import sys",
                 *(["from math import inf, nan"] if needs_nan_names(args) else []), "", "import torch",
                 *(["from torch._dynamo.utils import same"] if compares(case) else []),
                 "", "", fn, "", "", args]
        random = any(getattr(n.target, "_nondeterministic_seeded", False) for n in case.v.gm.graph.nodes)
        if random:
            lines += ["import torch._inductor.config", "",
                      "torch._inductor.config.fallback_random = True  # random ops draw as eager does"]
        compiled = _compile_call(case)
        if _is_failure(case):
            lines.append(_raises(f"{compiled}(*args)", case))
        elif case.check == "raises":
            lines += ["", *dropped_check("f(*args)", f"{compiled}(*args)", case)]
        else:
            if mode.compile_helper:  # a training step's: the forward, then a plain backward
                lines += ["", "", *mode.compile_helper, "", ""]
            call = lambda fn, a: mode.compile_call.format(fn=fn, args=a)  # noqa: E731
            wide = "[a.double() if a.is_floating_point() else a for a in args]"
            lines += [f"expected = {call('f', 'args')}  # eager",
                      f"fp64 = {call('f', wide)}",
                      f"actual = {call(compiled, 'args')}",
                      "for e, a in zip(torch.utils._pytree.tree_leaves(expected), "
                      "torch.utils._pytree.tree_leaves(actual)):",
                      "    bad = ~torch.isclose(a, e, rtol=1e-4, atol=1e-4, equal_nan=True) "
                      "if e.is_floating_point() else a != e",
                      '    print(f"{int(bad.sum())} of {e.numel()} differ at {bad.nonzero()[:4].tolist()}: '
                      'eager {e[bad][:4].tolist()}, compiled {a[bad][:4].tolist()}")',
                      "sys.exit(0 if same(expected, actual, fp64_ref=fp64, equal_nan=True) else 1)"]
        rules = ["eager's own error on the same inputs, checked in the script"] if case.check == "raises" else \
            ["PyTorch's rules for fuzzer reports: torch._dynamo.utils.same at its default tolerance, "
             "with a float64 reference (fp64_ref)"] + (["fallback_random=True"] if random else [])
        script = Script("\n".join(lines).rstrip() + "\n", form, rules)
        if index_only(case):
            script.notes.append("index-only: only indices differ (argmax, a sort's order, max's indices); under "
                                "PyTorch's rules this is not offered as a report unless values differ too")
        out.append(script)
    return out
