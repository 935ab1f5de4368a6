"""Write a minimal variant as a stand-alone ``repro.py``: plain PyTorch, no gapfuzz.

The graph becomes a ``torch.nn.Module`` whose forward is the graph's own code (calls to
``torch.ops.aten``); weights and inputs are loaded from ``inputs.pt`` with ``weights_only``;
the backend is driven by its own stand-alone snippet. The script exits 1 while the bug is present.
"""
from __future__ import annotations

import textwrap

import torch

from workers.ir import Variant
from workers.registry import BackendSpec

GENERIC_BACKEND = '''
def run_backend(model, inputs, device):
    import importlib
    module, _, name = CLASS_PATH.partition(":")
    backend = getattr(importlib.import_module(module), name)(**OPTIONS)
    return backend.prepare(torch.fx.symbolic_trace(model), tuple(inputs), device)(*inputs)
'''

MAIN = '''
TOLERANCES = {"float64": (1e-7, 1e-7), "float32": (1.3e-6, 1e-5), "float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5)}


def flat(out):
    return [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def tol_ratio(a, b):
    """max |a-b| / (atol + rtol |b|) at b's dtype default tolerance; inf for a NaN/Inf pattern change."""
    rtol, atol = TOLERANCES.get(str(b.dtype).removeprefix("torch."), (0.0, 0.0))
    a, b = a.double().cpu(), b.double().cpu()
    if a.shape != b.shape or not torch.equal(torch.isnan(a), torch.isnan(b)) or \\
            not torch.equal(a[torch.isinf(b)], b[torch.isinf(b)]):
        return float("inf")
    ok = torch.isfinite(a) & torch.isfinite(b)
    if not ok.any():
        return 0.0
    diff = (a[ok] - b[ok]).abs()
    return float((diff / (atol + rtol * b[ok].abs())).max()) if atol or rtol else float(diff.max() > 0) * float("inf")


def main():
    data = torch.load(INPUTS, weights_only=True)
    inputs = data["inputs"]
    model = Repro(data["weights"]).eval()
    with torch.no_grad():
        expected = flat(model(*[t.clone() for t in inputs]))
        print(f"reference (eager on the CPU): {[tuple(t.shape) for t in expected]}")
        try:
            actual = flat(run_backend(Repro(data["weights"]).eval(), [t.clone() for t in inputs], DEVICE))
        except Exception as e:
            print(f"{BACKEND} raised {type(e).__name__}: {e}")
            return 1
        if KIND != "mismatch":
            print(f"{BACKEND} ran without error: the bug is not present")
            return 0
        wide = {k: t.double() if t.is_floating_point() else t for k, t in data["weights"].items()}
        oracle = flat(Repro(wide).eval()(*[t.double() if t.is_floating_point() else t for t in inputs]))
    blamed = False
    for i, (e, a, o) in enumerate(zip(expected, actual, oracle)):
        o = o.to(e.dtype) if o.is_floating_point() and e.is_floating_point() else o
        ref_err, tgt_err = tol_ratio(e, o), tol_ratio(a.to(e.dtype) if a.dtype != e.dtype else a, o)
        print(f"output {i}: expected {e.flatten()[:6].tolist()}")
        print(f"output {i}: actual   {a.flatten()[:6].tolist()}")
        print(f"output {i}: max |actual - expected| = {(a.double().cpu() - e.double()).abs().max().item():.6g}; "
              f"distance from float64, in tolerances: reference {ref_err:.3g}, {BACKEND} {tgt_err:.3g}")
        blamed |= tgt_err > MULTIPLIER * ref_err + 1
    print(f"{BACKEND} is {'further' if blamed else 'no further'} from the float64 result than eager is")
    return 1 if blamed else 0


if __name__ == "__main__":
    sys.exit(main())
'''


def _forward_source(v: Variant) -> tuple[str, list[str]]:
    code = v.gm.graph.python_code(root_module="self")
    lines = [f"{name} = torch.{name}" if name in ("device", "dtype", "layout") else None
             for name in code.globals if name not in ("torch", "inf", "nan")]
    return textwrap.indent(code.src.strip(), "    "), [ln for ln in lines if ln]


def reproducer(v: Variant, target: BackendSpec, kind: str, title: str, header: str,
               multiplier: float = 3.0, inputs_file: str = "inputs.pt") -> str:
    """The text of repro.py for variant ``v`` on backend ``target``; ``kind`` is the record status."""
    cls = target.backend_cls()
    snippet = getattr(cls, "repro", None) or GENERIC_BACKEND
    forward, aliases = _forward_source(v)
    args = [n.name for n in v.gm.graph.nodes if n.op == "placeholder"]
    parts = [
        f'"""{title}\n\n{header}\n"""',
        "import sys\nfrom math import inf, nan\n\nimport torch\n",
        *aliases,
        f"BACKEND = {target.name!r}\nDEVICE = {target.device!r}\nOPTIONS = {dict(target.options)!r}\n"
        f"CLASS_PATH = {target.cls_path!r}\nARG_NAMES = {args!r}\nKIND = {kind!r}\nMULTIPLIER = {multiplier!r}\n"
        f"INPUTS = {inputs_file!r}\n",
        "\nclass Repro(torch.nn.Module):\n    def __init__(self, weights):\n        super().__init__()\n"
        "        for name, t in weights.items():\n            self.register_buffer(name, t)\n\n" + forward + "\n",
        snippet.strip() + "\n",
        MAIN.strip() + "\n",
    ]
    return "\n\n".join(p.rstrip() for p in parts) + "\n"


def save_inputs(v: Variant, path) -> None:
    torch.save({"inputs": [t.clone() for t in v.inputs],
                "weights": {k: t.detach().clone() for k, t in v.tensors().items()}}, path)
