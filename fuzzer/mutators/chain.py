"""Chains a compiler fuses, on graphs of every dtype: ``insert_integer`` puts integer and bool ops
(bitwise, shifts, clamps, casts between widths, comparisons feeding ``where``, reductions and index
ops) after any integer or bool value; ``grow_chain`` grows a graph at its ends, a producer before an
input and a consumer after an output, so that a one-operator seed becomes the elementwise-then-reduce
chain real models give (an int16 ``abs`` feeding ``amax``). The ops are ``dtype_ops``."""
from __future__ import annotations

import torch.fx as fx

from gapfuzz.fuzzer.mutators import register_mutator
from gapfuzz.fuzzer.mutators.base import Mutator, Rewrite, tensor_meta
from gapfuzz.fuzzer.mutators.dtype_ops import OPS, kind_of, ops_for


def _kind(n: fx.Node) -> str | None:
    tm = tensor_meta(n)
    return kind_of(tm.dtype) if tm is not None else None


def _values(variant) -> list[fx.Node]:
    """Nodes whose value is one tensor of a dtype the ops take: inputs, constants and calls."""
    return [n for n in variant.gm.graph.nodes if n.op in ("placeholder", "get_attr", "call_function") and _kind(n)]


def _outputs(variant) -> set[fx.Node]:
    out = next(n for n in variant.gm.graph.nodes if n.op == "output")
    return set(out.all_input_nodes)


class _Chain(Mutator):
    family = "structure"
    choice_param = "op"

    @classmethod
    def choices(cls) -> list[str]:
        return sorted(OPS)

    def pool(self, site: fx.Node, variant) -> list[str]:
        raise NotImplementedError

    def propose(self, variant, rng):
        sites = self.sites(variant)
        rng.shuffle(sites)
        for site in sites[:8]:  # an op that does not fit (a reduction of a 0-d value): another, then the next site
            tm, names = tensor_meta(site), self.pool(site, variant)
            for _ in range(3 if names else 0):
                op = self.choose(rng, names)
                extra = OPS[op].draw(tm.dtype, tuple(tm.shape), rng)
                if extra is not None:
                    return {"node": site.name, "op": op, **extra}
        return None

    def apply(self, variant, params):
        rw = Rewrite(variant)
        rw.splice_after(rw.node(params["node"]), lambda x: OPS[params["op"]].build(rw, x, params))
        return rw.finish()


@register_mutator
class InsertInteger(_Chain):
    """Insert an integer or bool op (bitwise, shift, clamp, cast, where, a reduction) after such a value."""

    name = "insert_integer"
    differentiable = False

    def sites(self, variant):
        return [n for n in _values(variant) if _kind(n) in ("int", "bool")]

    def pool(self, site, variant):
        return ops_for(_kind(site))


@register_mutator
class GrowChain(_Chain):
    """Grow a graph at its ends: an op of the input's dtype before an input, a reduction or index op after an output."""

    name = "grow_chain"

    def sites(self, variant):
        ends = _outputs(variant)
        return [n for n in _values(variant) if n.op == "placeholder" or n in ends]

    def pool(self, site, variant):
        return ops_for(_kind(site), consumer=site in _outputs(variant))
