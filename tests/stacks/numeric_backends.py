"""Test-only stacks with one known numeric flaw each, loaded by module:Class.

They run eager after rewriting the graph they are given, so they also work on the prefix
graphs tier 2 compiles (they have no node-by-node mode: tier 2 bisects them).
"""
from __future__ import annotations

import math

import torch
import torch.fx as fx

from gapfuzz.workers.run.registry import Backend

aten = torch.ops.aten


def _after(gm: fx.GraphModule, name: str, build) -> fx.GraphModule:
    """A copy of ``gm`` where node ``name``'s users read ``build(graph, node)`` instead."""
    graph = fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    node = next((n for n in graph.nodes if n.name == name), None)
    if node is not None:
        with graph.inserting_before(node.next):
            new = build(graph, node)
        node.replace_all_uses_with(new, delete_user_cb=lambda u: u is not new and u not in new.all_input_nodes)
    graph.lint()
    return fx.GraphModule(gm, graph)


class RoundNodeToBf16(Backend):
    """Computes node ``node`` and rounds it to bfloat16: a kernel that loses precision."""

    name = "round-bf16"

    def prepare(self, gm, example_inputs, device):
        def build(g, n):
            low = g.call_function(aten._to_copy.default, (n,), {"dtype": torch.bfloat16})
            return g.call_function(aten._to_copy.default, (low,), {"dtype": torch.float32})
        return _after(gm, self.options["node"], build)


class NudgeOneUlp(Backend):
    """Moves node ``node``'s value one float32 ULP towards -inf: rounding-level noise."""

    name = "nudge-ulp"

    def prepare(self, gm, example_inputs, device):
        def build(g, n):
            down = g.call_function(aten.full_like.default, (n, -math.inf))
            return g.call_function(aten.nextafter.default, (n, down))
        return _after(gm, self.options["node"], build)


class Float64Compute(Backend):
    """Computes everything in float64 and rounds the outputs back: more exact than the reference."""

    name = "fp64-compute"

    def prepare(self, gm, example_inputs, device):
        from gapfuzz.workers.backends.eager import EagerFp64

        run = EagerFp64().prepare(gm, example_inputs, device)

        def call(*inputs):
            return tuple(o.to(t.dtype) if o.is_floating_point() else o for o, t in zip(run(*inputs), gm(*inputs)))
        return call


def _after_op(gm: fx.GraphModule, target: str, build) -> fx.GraphModule:
    """A copy of ``gm`` where every call of ``target`` is followed by ``build(graph, node)``."""
    for name in [n.name for n in gm.graph.nodes if n.op == "call_function" and str(n.target) == target]:
        gm = _after(gm, name, build)
    return gm


class NanToZeroInOneOp(Backend):
    """Op ``op`` (default ReLU) returns 0 where its result is NaN: wrong on special values only, like a
    kernel that clamps with max(x, 0) and loses NaN."""

    name = "nan-to-zero"

    def prepare(self, gm, example_inputs, device):
        def build(g, n):
            return g.call_function(aten.masked_fill.Scalar, (n, g.call_function(aten.isnan.default, (n,)), 0.0))
        return _after_op(gm, self.options.get("op", "aten.relu.default"), build)


class SaturateOverflow(Backend):
    """Every floating result that overflows to an infinity is the largest finite value instead: a
    saturating mode, as some NPUs have."""

    name = "saturate-overflow"

    def prepare(self, gm, example_inputs, device):
        def run(*inputs):
            return tuple(o.nan_to_num(nan=math.nan) if o.is_floating_point() else o for o in gm(*inputs))
        return run


def _retargeted(gm: fx.GraphModule, targets: tuple, fn) -> fx.GraphModule:
    """A copy of ``gm`` where every call of one of ``targets`` calls ``fn`` instead, same arguments."""
    graph = fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    for n in graph.nodes:
        if n.target in targets:
            n.target = fn
    graph.lint()
    return fx.GraphModule(gm, graph)


class SaturateIntegerAdd(Backend):
    """Integer ``add`` saturates at the dtype's limits instead of wrapping around: wrong at extremes only."""

    name = "saturate-int-add"

    def prepare(self, gm, example_inputs, device):
        return _retargeted(gm, (aten.add.Tensor,), _saturating_add)


def _saturating_add(a, b, alpha=1):
    out = aten.add.Tensor(a, b, alpha=alpha)
    if isinstance(out, torch.Tensor) and not out.is_floating_point() and out.dtype not in (torch.bool, torch.int64):
        info = torch.iinfo(out.dtype)
        wide = aten.add.Tensor(a.long() if isinstance(a, torch.Tensor) else a,
                               b.long() if isinstance(b, torch.Tensor) else b, alpha=alpha)
        out = wide.clamp(info.min, info.max).to(out.dtype)
    return out


class BlockedSum(Backend):
    """``sum`` over more than ``BLOCK`` elements keeps only the first block: a reduction kernel that
    drops its partial sums past the first block. Right at every size up to the block."""

    name = "blocked-sum"
    BLOCK = 1024

    def prepare(self, gm, example_inputs, device):
        return _retargeted(gm, (aten.sum.default, aten.sum.dim_IntList), _blocked_sum)


def _blocked_sum(x, dim=None, keepdim=False, dtype=None):
    out = (aten.sum.dim_IntList(x, dim or [], keepdim, dtype=dtype) if dim is not None
           else aten.sum.default(x, dtype=dtype))
    dims = list(range(x.dim())) if not dim else [d % max(x.dim(), 1) for d in dim]
    rows = (x.movedim(dims, list(range(x.dim() - len(dims), x.dim()))).flatten(x.dim() - len(dims)) if dims
            else x.reshape(1))
    if rows.shape[-1] <= BlockedSum.BLOCK:
        return out
    tail = rows[..., BlockedSum.BLOCK:].sum(-1, dtype=out.dtype)
    return out - tail.reshape(out.shape)


class SequentialSum(Backend):
    """A whole-tensor ``sum`` accumulated element by element in its own dtype: a legal order, less exact
    than eager's blocked one, within a sum's error bound (``workers.judge.reduction``)."""

    name = "sequential-sum"

    def prepare(self, gm, example_inputs, device):
        return _retargeted(gm, (aten.sum.default,), _sequential_sum)


def _sequential_sum(x, dtype=None):
    flat = x.flatten().to(dtype or x.dtype)
    acc = flat.new_zeros(())
    for v in flat:
        acc = acc + v
    return acc


class SlowEager(Backend):
    """Eager, after ``seconds`` of preparing: a stack slow enough to be stopped between two runs."""

    name = "slow-eager"

    def prepare(self, gm, example_inputs, device):
        import time

        time.sleep(float(self.options.get("seconds", 0.5)))
        return gm


class AddToOutputs(Backend):
    """Adds ``by`` to every floating output: as wrong as the reference can be, in the other direction."""

    name = "add-to-outputs"

    def prepare(self, gm, example_inputs, device):
        by = float(self.options.get("by", 2.0))

        def run(*inputs):
            return tuple(o + by if o.is_floating_point() else o for o in gm(*inputs))
        return run


class ReverseTies(Backend):
    """Sorts with ties broken the other way round (equal keys in reverse order): legal, different."""

    name = "reverse-ties"

    def prepare(self, gm, example_inputs, device):
        return _retargeted(gm, (aten.sort.default, aten.sort.stable), _reverse_sort)


def _reverse_sort(x, *args, **kwargs):
    dim = kwargs.pop("dim", args[0] if args else -1)
    descending = kwargs.pop("descending", args[1] if len(args) > 1 else False)
    flipped = x.flip(dim)
    values, idx = torch.sort(flipped, dim=dim, descending=descending, stable=True)
    return values, x.shape[dim] - 1 - idx


class MiscomputeOp(Backend):
    """Gets one operator wrong: gelu computed as x * sigmoid(1.702 x), an approximation off by ~1e-2."""

    name = "miscompute"

    def prepare(self, gm, example_inputs, device):
        graph = fx.Graph()
        graph.output(graph.graph_copy(gm.graph, {}))
        for n in graph.nodes:
            if n.target is aten.gelu.default:
                n.target, n.args, n.kwargs = _quick_gelu, (n.args[0],), {}
        graph.lint()
        return fx.GraphModule(gm, graph)


def _quick_gelu(x):
    return x * torch.sigmoid(1.702 * x)


class RaiseOnOp(Backend):
    """Refuses graphs holding operator ``op`` (default hardswish), like a compiler missing a lowering."""

    name = "raise-on-op"

    def prepare(self, gm, example_inputs, device):
        op = self.options.get("op", "aten.hardswish.default")
        if any(str(n.target) == op for n in gm.graph.nodes if n.op == "call_function"):
            raise NotImplementedError(f"no lowering for {op} in node group of {len(gm.graph.nodes)} nodes")
        return gm


class ZeroWeights(Backend):
    """Writes zeros into every weight it is given, then runs: a stack that scribbles on its inputs."""

    name = "zero-weights"

    def prepare(self, gm, example_inputs, device):
        with torch.no_grad():
            for t in [*gm.parameters(), *gm.buffers()]:
                if t.is_floating_point():
                    t.zero_()
        return gm
