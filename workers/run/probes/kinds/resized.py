"""Resize probes: the same graph fed inputs of other lengths, so code compiled with symbolic sizes runs
at sizes it was not traced at. Chosen once per variant by ``workers.run.resize`` (where the graph
accepts a length), for the stacks compiled for dynamic shapes."""
from __future__ import annotations

import re

import torch

from gapfuzz.workers.run.probes.base import RESIZE, ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS

MAX_RESIZE_LENGTH = 1 << 21  # a resize probe's length (workers.run.resize makes none past this many elements)
_DIMS = re.compile(r"\d{1,3}\.\d{1,2}(,\d{1,3}\.\d{1,2}){0,63}")  # input.dim pairs: 0.1,1.0
_LEGACY_BASE = 43  # the offset the first resize probe of a variant always had


@PROBE_KINDS.register
class Resize(ProbeKind):
    """Inputs with the named (input, dim) positions at another length."""

    name = RESIZE
    order = 90
    params = {"dims": None, "length": None}

    def offset(self, params, at=0):
        return _LEGACY_BASE + at  # the n-th resize probe of a variant, as its recipes have it

    def make(self, inputs, input_roles, params, g):
        """Each named (input, dim) at ``length``: cut short, or the example's values repeated along it (an
        index stays valid) with numbers and masks past the example's length drawn afresh (a kernel that
        wraps around to the start reads values other than the right ones)."""
        out = list(inputs)
        for i, d in resize_dims(params["dims"]):
            out[i] = _stretched(out[i].detach().cpu(), d, params["length"], input_roles[i], g)
        return tuple(t.to(inputs[i].device) if isinstance(t, torch.Tensor) else t for i, t in enumerate(out))

    def problem(self, params):
        dims, length = params["dims"], params["length"]
        if not isinstance(dims, str) or not _DIMS.fullmatch(dims):
            return f"{str(dims)[:40]!r} is not a resize probe's dims (input.dim pairs: '0.1,1.0')"
        if isinstance(length, bool) or not isinstance(length, int) or not 0 <= length <= MAX_RESIZE_LENGTH:
            return f"{str(length)[:40]!r} is not a resize probe's length (0 to {MAX_RESIZE_LENGTH})"
        return None


def resize_dims(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in part.split(".")) for part in text.split(",")]


def _stretched(t: torch.Tensor, dim: int, length: int, role: str, g: torch.Generator) -> torch.Tensor:
    n = t.shape[dim]
    if length <= n:
        return t.narrow(dim, 0, length).contiguous()
    out = t.index_select(dim, torch.arange(length) % n)
    if role == "index" or not t.numel():
        return out
    shape = list(t.shape)
    shape[dim] = length - n
    if role == "mask":
        fresh = torch.rand(shape, generator=g) < 0.5
    elif role == "integer":
        lo, hi = int(t.min()), int(t.max())
        fresh = torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64) if hi > lo else torch.full(shape, lo)
    else:
        finite = t[torch.isfinite(t)].abs() if not t.is_complex() else t.abs()
        scale = float(finite.max()) if finite.numel() and float(finite.max()) > 0 else 1.0
        fresh = torch.randn(shape, generator=g, dtype=torch.float64) * scale
    out.narrow(dim, n, length - n).copy_(fresh.to(t.dtype))
    return out
