"""A test-only stack whose faults need a data-dependent shape to show, loaded by
``tests.stacks.data_dependent_backend:DataDependentFaults``:

- ``nonzero``: drops its last index (one row short whenever anything is nonzero);
- ``masked_select``: ignores the last selected element.

Option ``faults`` (a list, default both) picks them; ``faults: []`` is the same stack without any,
which must show nothing.

``tests.stacks.data_dependent_backend:ColumnMajorNonzero`` orders instead of counting wrong: on an input of
rank 2 or more, nonzero (``aten.nonzero``, ``argwhere`` and ``nonzero(as_tuple=True)``) returns its
rows in column-major order (the first index varying fastest): the same indices, another order; on a
1-D input it is right.
"""
from __future__ import annotations

import math

import torch

from gapfuzz.workers.run.registry import Backend

from .numeric_backends import _retargeted

aten = torch.ops.aten
FAULTS = ("nonzero", "masked_select")


def _nonzero_drops_last(x):
    return aten.nonzero.default(x)[:-1]


def _masked_select_drops_last(x, mask):
    return aten.masked_select.default(x, mask)[:-1]


def _nonzero_column_major(x):
    rows = aten.nonzero.default(x)
    if x.dim() < 2:
        return rows
    place = torch.tensor([math.prod(x.shape[:d]) for d in range(x.dim())], dtype=rows.dtype, device=rows.device)
    return rows[torch.argsort((rows * place).sum(1), stable=True)]


def _nonzero_columns_column_major(x):
    return aten.nonzero_numpy.default(x) if x.dim() < 2 else tuple(_nonzero_column_major(x).unbind(1))


class ColumnMajorNonzero(Backend):
    name = "nonzero-order"

    def prepare(self, gm, example_inputs, device):
        gm = _retargeted(gm, (aten.nonzero.default, aten.argwhere.default), _nonzero_column_major)
        return _retargeted(gm, (aten.nonzero_numpy.default,), _nonzero_columns_column_major)


class DataDependentFaults(Backend):
    name = "dd-faults"

    def prepare(self, gm, example_inputs, device):
        faults = self.options.get("faults", list(FAULTS))
        if "nonzero" in faults:
            gm = _retargeted(gm, (aten.nonzero.default,), _nonzero_drops_last)
        if "masked_select" in faults:
            gm = _retargeted(gm, (aten.masked_select.default,), _masked_select_drops_last)
        return gm
