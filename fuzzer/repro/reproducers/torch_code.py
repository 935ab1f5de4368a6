"""A variant's graph as a plain torch function, written as a maintainer would write it.

Each ATen call becomes the ordinary torch call (``torch.relu``, ``torch.nn.functional.gelu``) when
that call, on the node's own recorded inputs, gives the same result bit for bit; otherwise it stays
``torch.ops.aten.<op>.<overload>``. Weights become arguments of the function, like inputs, so the
script holds every value as a literal.
"""
from __future__ import annotations

import keyword
import operator
import re

import torch
import torch.fx as fx

from gapfuzz.fuzzer.repro.reproducers.literals import _number

_DTYPES = {getattr(torch, n): f"torch.{n}" for n in ("float64", "float32", "float16", "bfloat16", "int64", "int32",
                                                      "int16", "int8", "uint8", "bool", "complex64", "complex128")}
_NAMESPACES = (("torch", torch), ("torch.nn.functional", torch.nn.functional), ("torch.special", torch.special))


def identifier(name: str) -> str:
    name = re.sub(r"\W", "_", str(name)).strip("_") or "v"
    name = "v_" + name if name[0].isdigit() else name
    return name + "_" if keyword.iskeyword(name) or name in ("torch", "np", "sys", "f", "same") else name


def arg_text(a, names: dict) -> str:
    if isinstance(a, fx.Node):
        return names[a.name]
    if isinstance(a, (list, tuple)):
        inner = ", ".join(arg_text(x, names) for x in a)
        return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(a) == 1 else ''})"
    if isinstance(a, torch.dtype):
        return _DTYPES.get(a, f"torch.{str(a).removeprefix('torch.')}")
    if isinstance(a, torch.device):
        return repr(str(a))
    if isinstance(a, (torch.layout, torch.memory_format)):
        return f"torch.{str(a).removeprefix('torch.')}"
    if isinstance(a, float):
        text = _number(a)
        return text if text not in ("nan", "inf", "-inf") else f"float('{text}')"
    if a is None or isinstance(a, (bool, int, str)):
        return repr(a)
    raise TypeError(f"{type(a).__name__} argument")


def _same(a, b) -> bool:
    la, lb = torch.utils._pytree.tree_leaves(a), torch.utils._pytree.tree_leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype or x.stride() != y.stride() or \
                    not torch.equal(torch.nan_to_num(x), torch.nan_to_num(y)) or \
                    (x.is_floating_point() and not torch.equal(x.isnan(), y.isnan())):
                return False
        elif x != y and x == x:
            return False
    return True


def friendly_name(n: fx.Node, values: dict) -> str | None:
    """The public torch call that computes what ``n`` does on its recorded inputs, if one does."""
    target = n.target
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return None
    base = target._schema.name.split("::")[-1]
    if any(a.name not in values for a in n.all_input_nodes):
        return None  # after the node eager raised at: no values to check a name with
    load = lambda a: values[a.name] if isinstance(a, fx.Node) else a  # noqa: E731
    args, kwargs = fx.map_arg(n.args, load), fx.map_arg(n.kwargs, load)
    with torch.no_grad():
        try:
            expected = target(*args, **kwargs)
        except Exception:  # noqa: BLE001 - eager raises here (the check a stack dropped): the ATen call stays
            return None
        for text, ns in _NAMESPACES:
            fn = getattr(ns, base, None)
            if fn is None or not callable(fn) or base.endswith("_"):
                continue
            try:
                if _same(fn(*args, **kwargs), expected):
                    return f"{text}.{base}"
            except Exception:  # noqa: BLE001 - another signature: keep the ATen call
                continue
    return None


def all_values(gm: fx.GraphModule, inputs: tuple) -> dict:
    """Every node's value on eager, inputs and weights included; those before the node that raised, where
    eager raises."""
    values = {}

    class Recorder(fx.Interpreter):
        def run_node(self, n):
            values[n.name] = super().run_node(n)
            return values[n.name]

    with torch.no_grad():
        try:
            Recorder(gm).run(*inputs)
        except Exception:  # noqa: BLE001 - eager checks the input and raises: the values up to there
            pass
    return values


def function_source(gm: fx.GraphModule, inputs: tuple, name: str = "f", plain: bool = True) -> tuple[str, list]:
    """``def f(<inputs>, <weights>): ...`` for ``gm``, and the weights' names in argument order. With
    ``plain``, ATen calls become public torch calls where they agree bit for bit."""
    values = all_values(gm, inputs) if plain else {}
    names, params, body, weights, wparams = {}, [], [], [], []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            names[n.name] = identifier(n.target)
            params.append(names[n.name])
        elif n.op == "get_attr":
            names[n.name] = identifier(n.target)
            if n.target not in weights:
                weights.append(n.target)
                wparams.append(names[n.name])
    params += wparams  # inputs first, then weights
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        names[n.name] = identifier(n.name)
        if n.target is operator.getitem:
            body.append(f"{names[n.name]} = {arg_text(n.args[0], names)}[{arg_text(n.args[1], names)}]")
            continue
        if not isinstance(n.target, torch._ops.OpOverload):  # a symbolic size's arithmetic, an assertion
            raise TypeError(f"{n.target} is not an ATen operator")
        call = (friendly_name(n, values) if plain else None) or \
            f"torch.ops.aten.{n.target._opname}.{n.target._overloadname}"
        args = [arg_text(a, names) for a in n.args] + [f"{k}={arg_text(v, names)}" for k, v in n.kwargs.items()]
        body.append(f"{names[n.name]} = {call}({', '.join(args)})")
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    leaves = [arg_text(a, names) for a in torch.utils._pytree.tree_leaves(out)]
    ret = leaves[0] if len(leaves) == 1 else f"({', '.join(leaves)},)"
    if len(body) == 1 and len(leaves) == 1 and leaves[0] == body[0].split(" = ")[0]:
        body, ret = [], body[0].split(" = ", 1)[1]
    lines = [f"def {name}({', '.join(params)}):", *(f"    {b}" for b in body), f"    return {ret}"]
    return "\n".join(lines), weights
