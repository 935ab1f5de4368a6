"""A test-only stack wrong only along a long reduced dimension (``tests.stacks.size_backends:LongReduction``).

Its softmax, log_softmax, cumsum and sum read at most the first 2048 elements along the dimension
they work along (a kernel whose reduction or scan stops after one block): softmax's sum of
exponentials stops there (its maximum reads the whole row, so NaN and infinities come out where
eager's do and the defect shows as one numeric symptom), cumsum stops adding after it, sum leaves
the rest out. Right wherever that dimension is at most 2048 long, whatever the other dimensions
are, so only a seed rebuilt with its operator's own dimension past 2048 (``@d<n>``) shows it when
the main dimension is another one.

``TailMatmul`` is wrong in a matrix product whose contraction is past 2048 and not a multiple of 64
(a kernel that drops the tail after its last full tile): only a model rebuilt at a width such as 2050
shows it.
"""
from __future__ import annotations

import torch

from gapfuzz.workers.run.registry import Backend

from .numeric_backends import _retargeted

aten = torch.ops.aten
BLOCK = 2048


def _head(x: torch.Tensor, dim: int) -> torch.Tensor:
    return x.narrow(dim, 0, BLOCK)


def _long(x, dim: int) -> bool:
    return isinstance(x, torch.Tensor) and x.dim() > 0 and x.shape[dim] > BLOCK


def _softmax(x, dim, *rest):
    if not _long(x, dim):
        return aten.softmax.int(x, dim, *rest)
    e = torch.exp(x - x.amax(dim, keepdim=True))
    return e / _head(e, dim).sum(dim, keepdim=True)


def _log_softmax(x, dim, *rest):
    if not _long(x, dim):
        return aten.log_softmax.int(x, dim, *rest)
    shifted = x - x.amax(dim, keepdim=True)
    return shifted - _head(torch.exp(shifted), dim).sum(dim, keepdim=True).log()


def _cumsum(x, dim, *rest, **kwargs):
    if not _long(x, dim):
        return aten.cumsum.default(x, dim, *rest, **kwargs)
    out = aten.cumsum.default(x, dim, *rest, **kwargs)
    total = out.narrow(dim, BLOCK - 1, 1)
    return torch.cat([out.narrow(dim, 0, BLOCK), total.expand_as(out.narrow(dim, BLOCK, x.shape[dim] - BLOCK))], dim)


def _sum(x, dim=None, keepdim=False, **kwargs):
    dims = [d % max(1, x.dim()) for d in (dim or [])]
    for d in dims:
        if _long(x, d):
            x = _head(x, d)
    return aten.sum.dim_IntList(x, dim, keepdim, **kwargs)


class LongReduction(Backend):
    name = "long-reduction"

    def prepare(self, gm, example_inputs, device):
        gm = _retargeted(gm, (aten.softmax.int,), _softmax)
        gm = _retargeted(gm, (aten.log_softmax.int,), _log_softmax)
        gm = _retargeted(gm, (aten.cumsum.default,), _cumsum)
        return _retargeted(gm, (aten.sum.dim_IntList,), _sum)


TILE = 64


def _tail(k: int) -> int:
    """How many of ``k`` contracted elements a tail-dropping kernel leaves out."""
    return k % TILE if k > BLOCK else 0


def _mm(a, b):
    cut = _tail(a.shape[-1])
    return aten.mm.default(a, b) if not cut else aten.mm.default(a[..., :-cut], b[:-cut])


def _addmm(bias, a, b, *rest, **kwargs):
    cut = _tail(a.shape[-1])
    return aten.addmm.default(bias, a, b, *rest, **kwargs) if not cut else \
        aten.addmm.default(bias, a[..., :-cut], b[:-cut], *rest, **kwargs)


def _linear(x, w, bias=None):
    cut = _tail(x.shape[-1])
    return aten.linear.default(x, w, bias) if not cut else aten.linear.default(x[..., :-cut], w[:, :-cut], bias)


class TailMatmul(Backend):
    name = "tail-matmul"

    def prepare(self, gm, example_inputs, device):
        gm = _retargeted(gm, (aten.mm.default,), _mm)
        gm = _retargeted(gm, (aten.addmm.default,), _addmm)
        return _retargeted(gm, (aten.linear.default,), _linear)
