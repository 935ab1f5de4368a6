"""Operator seeds at other sizes (``ops/sum/float32/0@1025``): the sample's main dimension, the last
one of its first tensor that has dimensions, takes the new length in every tensor of the sample with
a dimension of that length (a sample of scalars becomes one of vectors of that length). Values are
drawn again from the sample's own (so a domain such as positive inputs or valid indices is kept;
indices are wrapped when the dimension shrinks). ``OpsSource.build`` checks a resized sample as the
listing checks samples and refuses it (``SizeError``) when it fails on the CPU; a tensor that would
grow past ``MAX_RESIZED_ELEMENTS`` is refused here.

Widths (``ops/mm/float32/0@w2048``) resize the same way along the second-to-last dimension of the
first tensor that has two (matrix rows, channels, a sequence), or the main one for a sample of
vectors. Either way a shape argument that spells the trailing dimensions of the first tensor
(``layer_norm``'s normalised shape, a ``view``'s sizes) follows the new length.
"""
from __future__ import annotations

import math

import torch
import torch.utils._pytree as pytree

from core.seeding import stable_int

from ..sizes import SizeError
from .op_samples import flatten_sample, sample_tensors

MAX_RESIZED_ELEMENTS = 2**20  # per tensor: a square matrix at 4097 is refused, a row of it is not


def main_dimension(sample, axis: int = -1) -> int | None:
    """The length of the sample's main dimension (the one sizes change; ``axis=-2``: the one widths
    change, in the first tensor with two dimensions): 0 for a sample of scalars only, None when that
    dimension is empty."""
    tensors = sample_tensors(sample)
    if axis == -2 and any(t.dim() >= 2 for t in tensors):
        return next(t.shape[-2] for t in tensors if t.dim() >= 2) or None
    return next((t.shape[-1] for t in tensors if t.dim() > 0), 0) or (
        0 if all(t.dim() == 0 for t in tensors) else None)


def resize(sample, size: int, key: str, axis: int = -1):
    """The sample with its main dimension (``axis=-2``: its width) at ``size`` (see the module docstring)."""
    from torch.testing._internal.opinfo.core import SampleInput

    main = main_dimension(sample, axis)
    if main is None:
        raise SizeError("the sample has no non-empty dimension to resize")
    first = next((tuple(t.shape) for t in sample_tensors(sample) if t.dim() > 0), ())
    sample = _with_shapes(sample, first, main, size)
    leaves, spec = flatten_sample(sample)
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


def _with_shapes(sample, first: tuple, old: int, new: int):
    """The sample with every int list among its arguments that spells trailing dimensions of ``first``
    (a normalised shape, a view's sizes) saying ``new`` where it said ``old``."""
    from torch.testing._internal.opinfo.core import SampleInput

    def fix(x):
        if isinstance(x, (list, tuple)) and x and all(type(v) is int for v in x) and tuple(x) == first[-len(x):] \
                and old in x:
            return type(x)(new if v == old else v for v in x)
        return x

    if not first:
        return sample
    return SampleInput(sample.input, args=tuple(fix(a) for a in sample.args),
                       kwargs={k: fix(v) for k, v in sample.kwargs.items()})


def _draw(shape: list[int], dtype: torch.dtype, nonnegative: bool, gen: torch.Generator) -> torch.Tensor:
    """Values in torch's make_tensor range ([-9, 9], or [0, 9] for a non-negative sample)."""
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) < 0.5
    low = 0 if nonnegative else -9
    if dtype.is_floating_point or dtype.is_complex:
        wide = torch.complex128 if dtype.is_complex else torch.float64
        return (low + (9 - low) * torch.rand(shape, generator=gen, dtype=wide)).to(dtype)
    return torch.randint(max(low, torch.iinfo(dtype).min), 10, shape, generator=gen, dtype=dtype)
