"""A test-only compiled stack that drops eager's bounds checks, loaded by ``tests.stacks.bounds_backends:
UncheckedGather``: compiled with ``torch.compile`` (AOTAutograd), its ``gather`` and ``index_select``
read zero where an index is out of range instead of raising as eager does. Right on every valid index:
only an out-of-range index probe (``bounds``) shows it, as a ``missing-error``."""
from __future__ import annotations

import torch

from gapfuzz.workers.run.registry import Backend

from .numeric_backends import _retargeted

aten = torch.ops.aten


def _zero_past(x, dim, index, size):
    valid = (index >= 0) & (index < size)
    return valid, torch.where(valid, index, torch.zeros_like(index))


def _gather(x, dim, index, sparse_grad=False):
    valid, safe = _zero_past(x, dim, index, x.shape[dim] if x.dim() else 1)
    return torch.where(valid, aten.gather.default(x, dim, safe), torch.zeros((), dtype=x.dtype))


def _index_select(x, dim, index):
    valid, safe = _zero_past(x, dim, index, x.shape[dim] if x.dim() else 1)
    out = aten.index_select.default(x, dim, safe)
    shape = [1] * out.dim()
    if out.dim():
        shape[dim] = -1
    return torch.where(valid.reshape(shape), out, torch.zeros((), dtype=x.dtype))


class UncheckedGather(Backend):
    name = "unchecked-gather"

    def prepare(self, gm, example_inputs, device):
        gm = _retargeted(gm, (aten.gather.default,), _gather)
        return torch.compile(_retargeted(gm, (aten.index_select.default,), _index_select), backend="aot_eager")
