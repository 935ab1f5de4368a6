"""Data-dependent operators (nonzero, masked_select, x[mask], unique, item) inserted into real models.

Their output shapes depend on values, so a compiler must handle unbacked sizes: a path seeds of
real models rarely reach. The mask compares a node with one of its own elements (so ``>`` and
``>=`` differ on every input, at least there), and the result is folded back into the node at its
own shape, so the rest of the graph stays valid and the data-dependent value reaches the output:
its count, and its order too (nonzero's rows, masked_select's and ``x[mask]``'s elements, unique's
values), since a stack can return the right set in the wrong order. Sites of rank 2 or more are
preferred, where that order spans several dimensions (row-major, not column-major).
"""
from __future__ import annotations

import math
import operator
import random

import torch
import torch.fx as fx

from gapfuzz.fuzzer.mutators import register_mutator
from gapfuzz.fuzzer.mutators.base import Mutator, Rewrite, aten, dtype_of, float_nodes, same_layout, shape_of

COMPARE = {"gt": aten.gt.Tensor, "ge": aten.ge.Tensor, "lt": aten.lt.Tensor, "le": aten.le.Tensor}
MAX_NUMEL = 1 << 20  # nonzero and unique over a larger activation cost more than the model


def _threshold(rw: Rewrite, x: fx.Node, k: int) -> fx.Node:
    """Element ``k`` (row-major) of ``x``, a 0-dim tensor: a threshold that is one of its own values."""
    index = []
    for size in reversed(shape_of(x)):
        k, i = divmod(k, size)
        index.append(i)
    t = x
    for i in reversed(index):
        t = rw.call(aten.select.int, t, 0, i)
    return t


def _ranks(rw, like: fx.Node, x: fx.Node, n: int) -> fx.Node:
    """1/n, 2/n, ... one for each element of the 1-D ``like``, in x's dtype (counted in float32: exact)."""
    ones = rw.call(aten.ones_like.default, like, dtype=torch.float32)
    ranks = rw.call(aten.div.Tensor, rw.call(aten.cumsum.default, ones, 0), float(n))
    return rw.call(aten._to_copy.default, ranks, dtype=dtype_of(x))


def _masked_select(rw, x, mask, n):
    """x minus the selected values weighted by their rank, summed, over x's size: their count, values
    and order reach the output."""
    picked = rw.call(aten.masked_select.default, x, mask)
    total = rw.call(aten.sum.default, rw.call(aten.mul.Tensor, picked, _ranks(rw, picked, x, n)))
    return rw.call(aten.sub.Tensor, x, rw.call(aten.div.Tensor, total, float(n)))


def _masked_scatter(rw, x, mask, n):
    """The selected values written back in reverse order: their count and their order both matter."""
    picked = rw.call(aten.masked_select.default, x, mask)
    return rw.call(aten.masked_scatter.default, x, mask, rw.call(aten.flip.default, picked, [0]))


def _nonzero(rw, x, mask, n):
    """Each element at nonzero(mask) set to its row's rank over x's size, by index_put at nonzero's index
    columns: the count, the indices and the order of nonzero's rows all reach the output."""
    where = rw.call(aten.nonzero.default, mask)
    columns = [rw.call(aten.select.int, where, 1, d) for d in range(len(shape_of(x)))]
    return rw.call(aten.index_put.default, x, columns, _ranks(rw, columns[0], x, n))


def _bool_index(rw, x, mask, n):
    """``x[mask] = -x[mask].flip(0)``: boolean indexing, read and written back in reverse order."""
    picked = rw.call(aten.flip.default, rw.call(aten.index.Tensor, x, [mask]), [0])
    return rw.call(aten.index_put.default, x, [mask], rw.call(aten.neg.default, picked))


def _unique(rw, x, mask, n):
    """unique (with counts) of the last-dim index of every selected element: the running total of its
    counts in unique's order, added back at each value over x's size (counts and order both matter)."""
    last = len(shape_of(x)) - 1
    column = rw.call(aten.select.int, rw.call(aten.nonzero.default, mask), 1, last)
    found = rw.call(aten._unique2.default, column, True, False, True)
    values = rw.graph.call_function(operator.getitem, (found, 0))
    running = rw.call(aten.cumsum.default, rw.graph.call_function(operator.getitem, (found, 2)), 0)
    running = rw.call(aten._to_copy.default, running, dtype=dtype_of(x))
    hist = rw.call(aten.index_put.default, rw.call(aten.new_zeros.default, x, [shape_of(x)[-1]]), [values], running)
    return rw.call(aten.add.Tensor, x, rw.call(aten.div.Tensor, hist, float(n)))


def _item(rw, x, mask, n):
    """How many are selected, read out with ``item()`` as a Python number, added as a share of x's size."""
    count = rw.call(aten._local_scalar_dense.default, rw.call(aten.sum.default, mask))
    return rw.call(aten.add.Tensor, x, rw.graph.call_function(operator.truediv, (count, float(n))))


FORMS = {"masked_select": _masked_select, "masked_scatter": _masked_scatter, "nonzero": _nonzero,
         "bool_index": _bool_index, "unique": _unique, "item": _item}


@register_mutator
class InjectDataDependent(Mutator):
    """Insert nonzero, masked_select, x[mask], unique or item on a mask, folded back."""

    name = "inject_data_dependent"
    family = "injection"
    choice_param = "form"

    @classmethod
    def choices(cls) -> list[str]:
        return sorted(FORMS)

    def sites(self, variant):
        """Float nodes of 2 to MAX_NUMEL elements; those of rank >= 2 when there are any."""
        found = [n for n in float_nodes(variant) if (s := shape_of(n)) and 2 <= math.prod(s) <= MAX_NUMEL]
        return [n for n in found if len(shape_of(n)) >= 2] or found

    def draw(self, site, rng: random.Random):
        return {"form": self.choose(rng, sorted(FORMS)), "cmp": rng.choice(sorted(COMPARE)),
                "k": rng.randrange(math.prod(shape_of(site)))}

    def build(self, rw, x, params):
        mask = rw.call(COMPARE[params["cmp"]], x, _threshold(rw, x, params["k"]))
        return same_layout(rw, FORMS[params["form"]](rw, x, mask, math.prod(shape_of(x))), x)
