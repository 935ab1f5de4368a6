"""What each input of a graph is to its probes: a value (floating), a mask (bool), an integer used as a
number, or an index (any other integral input: its values must stay valid indices).

An integer input is a number when every operator reading it computes with its values (arithmetic, any
pointwise operator, a reduction, a cast): then its extremes reach those operators as a mutated chain
has them (``abs`` then ``amax`` of an int16). Read by anything else (an index, a count, a shape), it is
an index, and only probes that keep it valid, or that ask for eager's bounds checks, change it.
"""
from __future__ import annotations

import torch
import torch.fx as fx

aten = torch.ops.aten

# int inputs used only by these (or by pointwise operators and reductions) stay numbers
_ARITHMETIC = {aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor, aten.div.Tensor_mode,
               aten.remainder.Tensor, aten.fmod.Tensor, aten.neg.default, aten.abs.default, aten.sum.default,
               aten.sum.dim_IntList, aten.cumsum.default, aten.prod.default, aten.maximum.default,
               aten.minimum.default, aten.clamp.default, aten.bitwise_and.Tensor, aten.bitwise_or.Tensor,
               aten.bitwise_xor.Tensor, aten.bitwise_not.default, aten.eq.Tensor, aten.ne.Tensor, aten.lt.Tensor,
               aten.le.Tensor, aten.gt.Tensor, aten.ge.Tensor, aten.mean.default, aten.amax.default,
               aten.amin.default, aten.sign.default, aten.square.default, aten.pow.Tensor_Scalar,
               aten.floor_divide.default, aten.lcm.default, aten.gcd.default, aten.bitwise_left_shift.Tensor,
               aten.bitwise_right_shift.Tensor, aten.add.Scalar, aten.mul.Scalar, aten.sub.Scalar,
               aten._to_copy.default}
_NUMERIC_TAGS = (torch.Tag.pointwise, torch.Tag.reduction)
# the dtypes a relation probe relates (the operations it needs exist for them on every device)
_RELATABLE = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8, torch.int8, torch.int16,
              torch.int32, torch.int64)


def _numeric_user(user: fx.Node) -> bool:
    if user.op != "call_function":
        return False
    target = user.target
    return target in _ARITHMETIC or any(tag in getattr(target, "tags", ()) for tag in _NUMERIC_TAGS)


def roles(gm: fx.GraphModule, inputs: tuple) -> list[str]:
    """Per input: value (floating), mask (bool), integer (a number) or index (anything else integral)."""
    out = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, t in zip(placeholders, inputs):
        if not isinstance(t, torch.Tensor):
            out.append("index")
        elif t.is_floating_point() or t.is_complex():
            out.append("value")
        elif t.dtype == torch.bool:
            out.append("mask")
        else:
            numeric = node.users and all(_numeric_user(u) for u in node.users)
            out.append("integer" if numeric else "index")
    return out


def related_group(inputs: tuple, input_roles: list[str]) -> list[int]:
    """The positions of the first two or more inputs used as numbers (floating or integer; not an index,
    not a mask) of one shape and dtype: the ones a relation probe relates, the later to the first."""
    groups: dict[tuple, list[int]] = {}
    for i, (t, role) in enumerate(zip(inputs, input_roles)):
        if role in ("value", "integer") and isinstance(t, torch.Tensor) and t.dtype in _RELATABLE and t.numel():
            groups.setdefault((tuple(t.shape), t.dtype), []).append(i)
    return next((g for g in groups.values() if len(g) >= 2), [])
