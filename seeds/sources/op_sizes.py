"""Operator seeds at other sizes (``ops/sum/float32/0@1025``): the sample's main dimension, the last
one of its first tensor that has dimensions, takes the new length in every tensor of the sample with
a dimension of that length (a sample of scalars becomes one of vectors of that length). Values are
drawn again from the sample's own (so a domain such as positive inputs or valid indices is kept;
indices are wrapped when the dimension shrinks). ``OpsSource.build`` checks a resized sample as the
listing checks samples and refuses it (``SizeError``) when it fails on the CPU; a tensor that would
grow past ``MAX_RESIZED_ELEMENTS`` is refused here.
"""
from __future__ import annotations

import math

import torch
import torch.utils._pytree as pytree

from core.seeding import stable_int

from ..sizes import SizeError

MAX_RESIZED_ELEMENTS = 2**20  # per tensor: a square matrix at 4097 is refused, a row of it is not


def main_dimension(sample) -> int | None:
    """The length of the sample's main dimension (the one sizes change): 0 for a sample of scalars
    only, None when that dimension is empty."""
    from .ops import sample_tensors

    return next((t.shape[-1] for t in sample_tensors(sample) if t.dim() > 0), 0) or (
        0 if all(t.dim() == 0 for t in sample_tensors(sample)) else None)


def resize(sample, size: int, key: str):
    """The sample with its main dimension at ``size`` (see the module docstring)."""
    from torch.testing._internal.opinfo.core import SampleInput

    from .ops import flatten_sample

    leaves, spec = flatten_sample(sample)
    main = main_dimension(sample)
    if main is None:
        raise SizeError("the sample has no non-empty dimension to resize")
    gen = torch.Generator().manual_seed(stable_int(key))

    def remade(t: torch.Tensor) -> torch.Tensor:
        if main == 0:  # scalars become vectors
            shape = [size]
        elif t.dim() == 0 or main not in t.shape:
            return t
        else:
            shape = [size if s == main else s for s in t.shape]
        if math.prod(shape) > MAX_RESIZED_ELEMENTS:  # a square matrix: resize its last dimension only
            shape = list(t.shape[:-1]) + [size if t.shape[-1] == main else t.shape[-1]]
        if math.prod(shape) > MAX_RESIZED_ELEMENTS:
            raise SizeError(f"a {list(t.shape)} input would hold over {MAX_RESIZED_ELEMENTS} elements at size {size}")
        pool = t.detach().reshape(-1)
        if pool.numel() == 0:
            return torch.zeros(shape, dtype=t.dtype)
        if pool.unique().numel() < 2:  # a scalar's one value: draw in make_tensor's range, keeping its sign
            return _draw(shape, t.dtype, bool((pool >= 0).all()), gen)
        values = pool[torch.randint(0, pool.numel(), shape, generator=gen)]
        if not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool) and size < main:
            if bool(((pool >= 0) & (pool < main)).all()) and size > 0:  # indices into the main dimension
                values = values % size
        return values.contiguous()

    leaves = [remade(x) if isinstance(x, torch.Tensor) else x for x in leaves]
    inp, args, kwargs = pytree.tree_unflatten(leaves, spec)
    return SampleInput(inp, args=tuple(args), kwargs=dict(kwargs))


def _draw(shape: list[int], dtype: torch.dtype, nonnegative: bool, gen: torch.Generator) -> torch.Tensor:
    """Values in torch's make_tensor range ([-9, 9], or [0, 9] for a non-negative sample)."""
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) < 0.5
    low = 0 if nonnegative else -9
    if dtype.is_floating_point or dtype.is_complex:
        wide = torch.complex128 if dtype.is_complex else torch.float64
        return (low + (9 - low) * torch.rand(shape, generator=gen, dtype=wide)).to(dtype)
    return torch.randint(max(low, torch.iinfo(dtype).min), 10, shape, generator=gen, dtype=dtype)
