"""Precision and layout: low-precision islands, whole-model dtypes, memory formats, strides, batch."""
from __future__ import annotations

import torch
import torch.fx as fx

from gapfuzz.fuzzer.mutators import register_mutator
from gapfuzz.fuzzer.mutators.base import Mutator, Rejected, Rewrite, aten, call_nodes, dtype_of, pick, shape_of

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
_SHAPE_ARG_OPS = {aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.expand.default,
                  aten.zeros.default, aten.ones.default, aten.full.default, aten.empty.memory_format,
                  aten.new_zeros.default, aten.new_ones.default, aten.new_full.default, aten.new_empty.default}


def _cast(rw: Rewrite, x, dtype: torch.dtype):
    return rw.call(aten._to_copy.default, x, dtype=dtype)


@register_mutator
class LowPrecisionNode(Mutator):
    """Run one float32 node in float16 or bfloat16 and cast its result back."""

    name = "low_precision_node"
    family = "precision"

    def sites(self, variant):
        return [n for n in call_nodes(variant) if dtype_of(n) == torch.float32 and
                any(dtype_of(a) == torch.float32 for a in n.all_input_nodes)]

    def draw(self, site, rng):
        return {"dtype": rng.choice(["float16", "bfloat16"])}

    def apply(self, variant, params):
        rw = Rewrite(variant)
        n, low = rw.node(params["node"]), DTYPES[params["dtype"]]
        with rw.graph.inserting_before(n):
            casts = {a: _cast(rw, a, low) for a in n.all_input_nodes if dtype_of(a) == torch.float32}
        n.args = fx.map_arg(n.args, lambda a: casts.get(a, a))
        n.kwargs = fx.map_arg(n.kwargs, lambda a: casts.get(a, a))
        # back to the input's dtype, whatever it becomes
        rw.splice_after(n, lambda n: rw.call(aten.type_as.default, n, next(iter(casts))))
        return rw.finish()


@register_mutator
class WholeDtype(Mutator):
    """Run the whole float32 variant in float16, bfloat16 or float64: weights, inputs and dtype arguments."""

    name = "whole_dtype"
    family = "precision"

    def propose(self, variant, rng):
        if not any(t.dtype == torch.float32 for t in [*variant.inputs, *variant.tensors().values()]):
            return None
        return {"dtype": rng.choice(sorted(DTYPES))}

    def apply(self, variant, params):
        rw, to = Rewrite(variant), DTYPES[params["dtype"]]
        for name, t in variant.tensors().items():
            if t.dtype == torch.float32:
                rw.set_tensor(name, t.to(to))
        rw.inputs = tuple(t.to(to) if t.dtype == torch.float32 else t for t in rw.inputs)
        for n in rw.graph.nodes:
            n.args = _swap_dtype(n.args, to)
            n.kwargs = _swap_dtype(n.kwargs, to)
        return rw.finish()


def _swap_dtype(a, to):
    if a is torch.float32:
        return to
    if isinstance(a, (list, tuple)):
        return type(a)(_swap_dtype(x, to) for x in a)
    if isinstance(a, dict):
        return {k: _swap_dtype(v, to) for k, v in a.items()}
    return a


class _Layout(Mutator):
    """Same values, another memory layout: a backend must not care."""

    family = "precision"
    preserves_semantics = True


@register_mutator
class ChannelsLast(_Layout):
    """Store 4-d inputs and weights channels-last (NHWC strides)."""

    name = "channels_last"

    def propose(self, variant, rng):
        four_d = [t for t in [*variant.inputs, *variant.tensors().values()] if t.dim() == 4]
        return {"inputs": True, "weights": rng.random() < 0.5} if four_d else None

    def apply(self, variant, params):
        rw = Rewrite(variant)
        cl = torch.channels_last
        rw.inputs = tuple(t.contiguous(memory_format=cl) if params["inputs"] and t.dim() == 4 else t
                          for t in rw.inputs)
        if params["weights"]:
            for name, t in variant.tensors().items():
                if t.dim() == 4:
                    rw.set_tensor(name, t.contiguous(memory_format=cl))
        if all(a is b for a, b in zip(rw.inputs, variant.inputs)) and not rw.tensors:
            raise Rejected("nothing to convert")
        return rw.finish()


@register_mutator
class StridedInput(_Layout):
    """Make an input non-contiguous: a transposed buffer, or every other element of a larger one."""

    name = "strided_input"

    def propose(self, variant, rng):
        sites = [i for i, t in enumerate(variant.inputs) if t.dim() >= 1 and t.numel() > 1]
        i = pick(rng, sites)
        return None if i is None else {"input": i, "how": rng.choice(["transpose", "step"])}

    def apply(self, variant, params):
        rw = Rewrite(variant)
        i = params["input"]
        t = rw.inputs[i]
        if params["how"] == "transpose" and t.dim() >= 2:
            new = t.transpose(-1, -2).contiguous().transpose(-1, -2)
        else:
            wide = torch.zeros((*t.shape[:-1], t.shape[-1] * 2), dtype=t.dtype)
            wide[..., ::2] = t
            new = wide[..., ::2]
        rw.inputs = tuple(new if k == i else x for k, x in enumerate(rw.inputs))
        return rw.finish()


def _fed_by_inputs(graph: fx.Graph) -> set:
    fed = set()
    for n in graph.nodes:
        if n.op == "placeholder" or any(a in fed for a in n.all_input_nodes):
            fed.add(n)
    return fed


@register_mutator
class ChangeBatch(Mutator):
    """Grow the batch (inputs repeated) and rewrite shape arguments that spell the old batch size."""

    name = "change_batch"
    family = "precision"

    def propose(self, variant, rng):
        sizes = {t.shape[0] if t.dim() else 0 for t in variant.inputs}
        if len(sizes) != 1 or 0 in sizes:  # every input batched alike (a 0-d or empty one is not)
            return None
        return {"batch": rng.choice([b for b in (2, 3, 4) if b != next(iter(sizes))])}

    def apply(self, variant, params):
        rw, new = Rewrite(variant), params["batch"]
        old = rw.inputs[0].shape[0]
        rw.inputs = tuple(torch.cat([t] * (new // old + 1))[:new] for t in rw.inputs)
        fed = _fed_by_inputs(rw.graph)
        for n in rw.graph.nodes:
            batched = n in fed or n.target is aten.expand.default  # expand(weight, [B, ...]) spells the batch too
            if batched and n.target in _SHAPE_ARG_OPS and shape_of(n) and shape_of(n)[0] == old:
                idx = 1 if n.target not in (aten.zeros.default, aten.ones.default, aten.full.default,
                                            aten.empty.memory_format) else 0
                shape = list(n.args[idx])
                if shape and shape[0] == old:
                    shape[0] = new
                    n.args = (*n.args[:idx], shape, *n.args[idx + 1:])
        return rw.finish()
