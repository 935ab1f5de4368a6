"""A test-only stack whose faults need a data-dependent shape to show, loaded by
``tests.data_dependent_backend:DataDependentFaults``:

- ``nonzero``: drops its last index (one row short whenever anything is nonzero);
- ``masked_select``: ignores the last selected element.

Option ``faults`` (a list, default both) picks them; ``faults: []`` is the same stack without any,
which must show nothing.
"""
from __future__ import annotations

import torch

from workers.registry import Backend

from .numeric_backends import _retargeted

aten = torch.ops.aten
FAULTS = ("nonzero", "masked_select")


def _nonzero_drops_last(x):
    return aten.nonzero.default(x)[:-1]


def _masked_select_drops_last(x, mask):
    return aten.masked_select.default(x, mask)[:-1]


class DataDependentFaults(Backend):
    name = "dd-faults"

    def prepare(self, gm, example_inputs, device):
        faults = self.options.get("faults", list(FAULTS))
        if "nonzero" in faults:
            gm = _retargeted(gm, (aten.nonzero.default,), _nonzero_drops_last)
        if "masked_select" in faults:
            gm = _retargeted(gm, (aten.masked_select.default,), _masked_select_drops_last)
        return gm
