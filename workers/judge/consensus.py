"""Consensus: when independent stacks agree with each other and eager is the one apart.

The float64 oracle is eager widened, so it shares eager's own quirks: ``torch.sign(nan)`` is 0 in
both, NaN in ONNX Runtime, OpenVINO and numpy. Blaming each vendor for it files one PyTorch
behaviour as several vendor bugs. When at least two targets of different stacks are each
target-divergent on a probe and agree with each other, their runs are ``reference-suspect``
(``core.bugs``: one cluster, filed against PyTorch), with the stacks that agree
(``consensus``) and, for a one-operator graph numpy has, whether numpy gives their answer too
(``numpy_agrees``); where numpy computes it as eager does, the targets share a defect and stay
target-divergent. For a NaN/Inf divergence, agreeing on where the output is finite is agreement.
"""
from __future__ import annotations

import numpy as np
import torch

from gapfuzz.core.bugs import Symptom, Verdict
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.workers.judge.compare import compare

# Operators whose result is the dtype's own representation (the next representable value, a bit view, a
# split into mantissa and exponent, a scaling by a power of two that overflows at the dtype's range): a
# float64 run answers another question, so no oracle judges a graph holding one. Eager at the same dtype
# is the reference; a target apart from it is blamed unless other stacks agree with it (and numpy does
# not side with eager): the consensus below. A campaign adds operators with ``compare.dtype_bound_ops``.
DTYPE_BOUND_OPS = ("aten.nextafter", "aten.frexp", "aten.view.dtype", "aten.ldexp")


# Operators that move or select values, or only touch the sign bit: their results are exact by contract,
# a NaN's sign and payload and a zero's sign included. A graph of these alone is also compared bit for bit:
# a difference within tolerance there is ``strict`` (a class of its own, ranked below any past tolerance).
BIT_EXACT_OPS = ("aten.clone", "aten.view", "aten._unsafe_view", "aten.reshape", "aten.permute", "aten.transpose",
                 "aten.t", "aten.expand", "aten.slice", "aten.select", "aten.cat", "aten.stack", "aten.flip",
                 "aten.roll", "aten.index", "aten.gather", "aten.index_select", "aten.where", "aten.abs", "aten.neg",
                 "aten.copysign", "aten.squeeze", "aten.unsqueeze", "aten.split", "aten.split_with_sizes",
                 "aten.unbind", "aten.narrow", "aten.repeat", "aten.alias", "aten.detach", "aten.take",
                 "aten.masked_select", "aten.diagonal", "aten.movedim", "aten.unfold", "aten.as_strided")


def _named(op: str, names) -> bool:
    """Whether ATen operator ``op`` (with its overload) is one of ``names`` (packets or overloads)."""
    return any(op == n or op.startswith(n + ".") for n in names)


def bit_exact(ops) -> bool:
    """Whether every operator of a graph holding ``ops`` is exact by contract (``BIT_EXACT_OPS``)."""
    ops = [op for op in ops if op.startswith("aten.")]
    return bool(ops) and all(_named(op, BIT_EXACT_OPS) for op in ops)


def dtype_bound(ops, extra: tuple = ()) -> bool:
    """Whether a graph holding ``ops`` (ATen names with overloads) is judged without the oracle."""
    return any(_named(op, (*DTYPE_BOUND_OPS, *extra)) for op in ops)


NUMPY = {  # ATen operator (its packet) -> the numpy function that computes it, argument for argument
    "aten.sign": np.sign, "aten.abs": np.abs, "aten.neg": np.negative, "aten.exp": np.exp, "aten.log": np.log,
    "aten.sqrt": np.sqrt, "aten.sin": np.sin, "aten.cos": np.cos, "aten.tan": np.tan, "aten.tanh": np.tanh,
    "aten.floor": np.floor, "aten.ceil": np.ceil, "aten.trunc": np.trunc, "aten.reciprocal": np.reciprocal,
    "aten.relu": lambda x: np.maximum(x, np.zeros((), x.dtype)), "aten.maximum": np.maximum,
    "aten.minimum": np.minimum, "aten.fmax": np.fmax, "aten.fmin": np.fmin, "aten.atan2": np.arctan2,
    "aten.remainder": np.remainder, "aten.fmod": np.fmod, "aten.floor_divide": np.floor_divide,
    "aten.isnan": np.isnan, "aten.isinf": np.isinf, "aten.signbit": np.signbit, "aten.round": np.round,
    "aten.nextafter": np.nextafter, "aten.ldexp": lambda x, e: np.ldexp(x, e.astype(np.int32)),
}


def numpy_outputs(gm: torch.fx.GraphModule, inputs: tuple) -> list | None:
    """The graph's output computed by numpy, when the graph is one operator of ``NUMPY`` applied to
    its inputs (tensors or plain numbers); None otherwise."""
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    if len(calls) != 1 or calls[0].kwargs:
        return None
    node = calls[0]
    fn = NUMPY.get(str(getattr(node.target, "overloadpacket", node.target)))
    if fn is None:
        return None
    values = {n.name: t for n, t in zip((n for n in gm.graph.nodes if n.op == "placeholder"), inputs)}
    args = []
    for a in node.args:
        if isinstance(a, torch.fx.Node):
            if a.name not in values or values[a.name].dtype == torch.bfloat16:
                return None
            args.append(values[a.name].detach().cpu().numpy())
        elif isinstance(a, (int, float, bool)):
            args.append(a)
        else:
            return None
    with np.errstate(all="ignore"):
        try:
            return [torch.from_numpy(np.asarray(fn(*args)))]
        except (TypeError, ValueError):
            return None


def find_consensus(runs: list, outputs: dict, stacks: dict, settings: Tolerances, numpy_answer=None) -> None:
    """``runs``: the target outcomes judged on one probe; ``outputs``: backend -> its outputs;
    ``stacks``: backend -> stack. Marks the target-divergent runs whose stacks agree ``reference-suspect``
    (their columns change); ``numpy_answer()`` gives numpy's outputs, or None, when asked."""
    divergent = [o for o in runs if o.verdict == Verdict.TARGET_DIVERGENT]
    if len({stacks[o.backend] for o in divergent}) < 2:
        return
    groups: list[list] = []
    for o in divergent:  # runs whose outputs agree, greedily: each joins the first group it agrees with
        for g in groups:
            if _agree(o, g[0], outputs[o.backend], outputs[g[0].backend], settings):
                g.append(o)
                break
        else:
            groups.append([o])
    agreed = [g for g in groups if len({stacks[o.backend] for o in g}) >= 2]
    if not agreed:
        return
    best = max(agreed, key=len)
    theirs = numpy_answer() if numpy_answer is not None else None
    numpy_agrees = None if theirs is None else _agree(best[0], best[0], _as(theirs, outputs[best[0].backend]),
                                                       outputs[best[0].backend], settings)
    if numpy_agrees is False:  # numpy computes the operator as eager does: the targets share a defect
        return
    names = ",".join(sorted({stacks[o.backend] for o in best}))
    for o in best:
        o.update(verdict=Verdict.REFERENCE_SUSPECT, consensus=names, numpy_agrees=numpy_agrees)


def _agree(a, b, out_a: list, out_b: list, settings: Tolerances) -> bool:
    """Two answers agree when they are close; or, for a NaN/Inf divergence from eager, when they have
    the same NaN and Inf positions (a NaN grid coordinate samples garbage: only *where* it is
    finite is an answer)."""
    if compare(out_a, out_b, settings).passed:
        return True
    if a.symptom != Symptom.NONFINITE or b.symptom != Symptom.NONFINITE:
        return False
    if len(out_a) != len(out_b):
        return False
    for x, y in zip(out_a, out_b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.is_floating_point():
            if x.shape != y.shape or not (torch.equal(x.isnan(), y.isnan()) and torch.equal(x.isinf(), y.isinf())):
                return False
        elif not compare([x], [y], settings).passed:
            return False
    return True


def _as(values: list, like: list) -> list:
    """numpy's outputs in the dtypes of the targets' (numpy widens a float16 sign to float16, a float32
    remainder by a Python float to float64)."""
    return [v.to(w.dtype) if isinstance(v, torch.Tensor) and isinstance(w, torch.Tensor) else v
            for v, w in zip(values, like)]
