"""Ops that keep a tensor's shape and dtype, per kind of dtype (integer, bool, floating), for the
mutators that grow chains (``chain``): elementwise ops a compiler fuses, and reductions and index ops
broadcast back onto their input. Constants are valid for the dtype: shifts below its width, divisors
non-zero (and never -1, whose quotient of the minimum overflows), bounds inside its range."""
from __future__ import annotations

import operator
import random
from dataclasses import dataclass
from typing import Callable

import torch
import torch.fx as fx

from gapfuzz.fuzzer.mutators.base import Rewrite, aten
from gapfuzz.fuzzer.mutators.insert_unary import UNARY

INTEGER = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)
FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
SMALL = (-7, -3, -2, -1, 1, 2, 3, 5, 7, 100)
DIVISORS = (2, 3, 5, 7, -3)


def kind_of(dtype) -> str | None:
    """"int", "bool" or "float" for a dtype the ops below take; None for any other."""
    return "bool" if dtype == torch.bool else "int" if dtype in INTEGER else "float" if dtype in FLOATING else None


def _in_range(dtype, values) -> list:
    info = torch.iinfo(dtype)
    return [c for c in values if info.min <= c <= info.max]


def _const(dtype, rng: random.Random, values=SMALL, edges: bool = True):
    if dtype == torch.bool:
        return rng.choice([True, False])
    info = torch.iinfo(dtype)
    return rng.choice(_in_range(dtype, values) + ([info.min, info.max] if edges else []))


@dataclass(frozen=True)
class Op:
    kinds: tuple  # the dtype kinds it takes
    build: Callable  # (rw, x, params) -> the node that replaces x
    draw: Callable = lambda dtype, shape, rng: {}  # parameters, or None where the value does not fit
    consumer: bool = False  # a reduction or an index op: needs a dimension


def _scalar(target, values=SMALL, edges=True):
    return Op(("int", "bool") if target is not aten.remainder.Scalar else ("int",),
              lambda rw, x, p: rw.call(target, x, p["c"]),
              lambda dt, s, rng: {"c": _const(dt, rng, values, edges)})


def _shift(target):
    return Op(("int",), lambda rw, x, p: rw.call(target, x, p["c"]),
              lambda dt, s, rng: {"c": rng.randrange(torch.iinfo(dt).bits)})


def _cast_back(rw: Rewrite, x: fx.Node, p: dict) -> fx.Node:
    there = rw.call(aten._to_copy.default, x, dtype=getattr(torch, p["via"]))
    return rw.call(aten._to_copy.default, there, dtype=getattr(torch, p["dtype"]))


def _draw_cast(dtype, shape, rng):
    others = [str(d).removeprefix("torch.") for d in (*INTEGER, torch.bool) if d != dtype]
    return {"via": rng.choice(others), "dtype": str(dtype).removeprefix("torch.")}


def _where(rw: Rewrite, x: fx.Node, p: dict) -> fx.Node:
    return rw.call(aten.where.self, rw.call(aten.gt.Scalar, x, p["c"]), x, rw.call(aten.bitwise_not.default, x))


def _reduced(reduce):
    """``x - reduce(x, dim, keepdim)``: the reduction broadcast back, so shape and dtype stay."""
    def build(rw: Rewrite, x: fx.Node, p: dict) -> fx.Node:
        return rw.call(aten.sub.Tensor, x, reduce(rw, x, p))
    return build


def _values(target, *extra):
    return lambda rw, x, p: rw.call(operator.getitem, rw.call(target, x, p["dim"], *extra), 0)


def _dim(dtype, shape, rng):
    return {"dim": rng.randrange(len(shape))} if len(shape) and all(shape) else None


def _dim_dtype(dtype, shape, rng):
    d = _dim(dtype, shape, rng)
    return None if d is None else {**d, "dtype": str(dtype).removeprefix("torch.")}


_INT, _ANY = ("int",), ("int", "float")
OPS: dict[str, Op] = {
    # elementwise, integer and bool
    "abs": Op(_INT, lambda rw, x, p: rw.call(aten.abs.default, x)),
    "neg": Op(_INT, lambda rw, x, p: rw.call(aten.neg.default, x)),
    "sign": Op(_INT, lambda rw, x, p: rw.call(aten.sign.default, x)),
    "square": Op(_INT, lambda rw, x, p: rw.call(aten.mul.Tensor, x, x)),
    "bitwise_not": Op(("int", "bool"), lambda rw, x, p: rw.call(aten.bitwise_not.default, x)),
    "logical_not": Op(("bool",), lambda rw, x, p: rw.call(aten.logical_not.default, x)),
    "and": _scalar(aten.bitwise_and.Scalar),
    "or": _scalar(aten.bitwise_or.Scalar),
    "xor": _scalar(aten.bitwise_xor.Scalar),
    "add": Op(_INT, lambda rw, x, p: rw.call(aten.add.Scalar, x, p["c"]), lambda dt, s, rng: {"c": _const(dt, rng)}),
    "mul": Op(_INT, lambda rw, x, p: rw.call(aten.mul.Scalar, x, p["c"]),
              lambda dt, s, rng: {"c": _const(dt, rng, edges=False)}),
    "remainder": _scalar(aten.remainder.Scalar, DIVISORS, edges=False),
    "floor_div": Op(_INT, lambda rw, x, p: rw.call(aten.div.Scalar_mode, x, p["c"], rounding_mode=p["mode"]),
                    lambda dt, s, rng: {"c": rng.choice(_in_range(dt, DIVISORS)),
                                        "mode": rng.choice(["floor", "trunc"])}),
    "rshift": _shift(aten.bitwise_right_shift.Tensor_Scalar),
    "lshift": _shift(aten.bitwise_left_shift.Tensor_Scalar),
    "clamp": Op(_INT, lambda rw, x, p: rw.call(aten.clamp.default, x, p["lo"], p["hi"]),
                lambda dt, s, rng: dict(zip(("lo", "hi"), sorted(rng.sample(_in_range(dt, SMALL), 2))))),
    "clamp_min": Op(_INT, lambda rw, x, p: rw.call(aten.clamp_min.default, x, p["c"]),
                    lambda dt, s, rng: {"c": _const(dt, rng, edges=False)}),
    "clamp_max": Op(_INT, lambda rw, x, p: rw.call(aten.clamp_max.default, x, p["c"]),
                    lambda dt, s, rng: {"c": _const(dt, rng, edges=False)}),
    "where": Op(_INT, _where, lambda dt, s, rng: {"c": _const(dt, rng, edges=False)}),
    "cast": Op(("int", "bool"), _cast_back, _draw_cast),
    # reductions and index ops, broadcast back onto their input
    "amax": Op(_ANY, _reduced(lambda rw, x, p: rw.call(aten.amax.default, x, [p["dim"]], True)), _dim, True),
    "amin": Op(_ANY, _reduced(lambda rw, x, p: rw.call(aten.amin.default, x, [p["dim"]], True)), _dim, True),
    "sum": Op(_ANY, _reduced(lambda rw, x, p: rw.call(aten.sum.dim_IntList, x, [p["dim"]], True,
                                                      dtype=getattr(torch, p["dtype"]))), _dim_dtype, True),
    "argmax": Op(_ANY, _reduced(lambda rw, x, p: rw.call(aten.gather.default, x, p["dim"], rw.call(
        aten.argmax.default, x, p["dim"], True))), _dim, True),
    "sort": Op(_ANY, _values(aten.sort.default), _dim, True),
    "cummax": Op(_ANY, _values(aten.cummax.default), _dim, True),
    "cumsum": Op(_ANY, lambda rw, x, p: rw.call(aten.cumsum.default, x, p["dim"], dtype=getattr(torch, p["dtype"])),
                 _dim_dtype, True),
    "any": Op(("bool",), lambda rw, x, p: rw.call(aten.logical_xor.default, x, rw.call(
        aten.any.dim, x, p["dim"], True)), _dim, True),
    "all": Op(("bool",), lambda rw, x, p: rw.call(aten.logical_and.default, x, rw.call(
        aten.all.dim, x, p["dim"], True)), _dim, True),
}
FLOAT_UNARY = ("abs", "neg", "relu", "tanh", "sigmoid", "sin", "floor", "round", "square", "erf")
OPS.update({f"float_{name}": Op(("float",), lambda rw, x, p, t=UNARY[name]: rw.call(t, x)) for name in FLOAT_UNARY})


def ops_for(kind: str, consumer: bool | None = None) -> list[str]:
    """The names of the ops that take ``kind``; with ``consumer``, only those that are (or are not)
    reductions and index ops."""
    return sorted(n for n, op in OPS.items() if kind in op.kinds and consumer in (None, op.consumer))
