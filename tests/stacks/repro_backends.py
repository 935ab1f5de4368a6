"""Test-only stacks for reproducers, loaded by module:Class: one whose bug needs a layout, one that
raises what it is told to, one that hangs.

``IgnoresStrides`` is a kernel that takes a tensor's data pointer and assumes dense row-major
order: right on contiguous inputs, wrong on a transposed or gapped one, so only a reproducer that
keeps each input's strides shows its bug.
"""
from __future__ import annotations

import builtins
import time

import torch

from gapfuzz.workers.run.registry import Backend


def _dense_strides(shape) -> list[int]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.insert(0, step)
        step *= max(n, 1)
    return strides


def read_as_dense(t):
    """What a kernel that ignores strides reads: ``t``'s storage from its offset, row-major."""
    if not isinstance(t, torch.Tensor) or t.is_contiguous():
        return t
    return torch.as_strided(t, t.shape, _dense_strides(t.shape), t.storage_offset())


class IgnoresStrides(Backend):
    """Eager, but every non-contiguous input is read as if it were contiguous."""

    name = "ignores-strides"

    def prepare(self, gm, example_inputs, device):
        def run(*inputs):
            return gm(*(read_as_dense(t) for t in inputs))
        return run


class Raises(Backend):
    """Raises ``type`` (a builtin exception's name) with ``message`` when run; ``n`` is formatted into it."""

    name = "raises"

    def prepare(self, gm, example_inputs, device):
        def run(*inputs):
            error = getattr(builtins, self.options.get("type", "ValueError"))
            raise error(self.options.get("message", "tile {n} does not fit").format(n=inputs[0].numel()))
        return run


class Hangs(Backend):
    """Never returns from a call."""

    name = "hangs"

    def prepare(self, gm, example_inputs, device):
        def run(*inputs):
            time.sleep(3600)
        return run
