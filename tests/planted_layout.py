"""A test-only stack that reads every non-contiguous input as if it were contiguous (its storage from
the view's offset, in row-major order), as a runtime that ignores strides would; loaded by
``tests.planted_layout:IgnoresStrides``. Any operator that reads such an input goes wrong, so
without an input check each would be its own cluster."""
from __future__ import annotations

import torch

from workers.registry import Backend


def _as_if_contiguous(t):
    if not isinstance(t, torch.Tensor) or t.is_contiguous() or t.numel() == 0:
        return t
    flat = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), t.storage_offset(), (t.numel(),), (1,))
    return flat.reshape(t.shape).clone()


class IgnoresStrides(Backend):
    name = "ignores-strides"

    def prepare(self, gm, example_inputs, device):
        def run(*inputs):
            return gm(*(_as_if_contiguous(t) for t in inputs))
        return run
