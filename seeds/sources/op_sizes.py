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
(``layer_norm``'s normalised shape, a ``view``'s sizes) follows the new length. A matrix product's
width resizes its contraction too (``op_products``), the rows shrunk where both would not fit; where a
product's main dimension is its contraction (``bmm``) or its bias's columns (``addmm``), a size resizes
that index in every operand together.

Along the operator's own dimension (``ops/softmax/float32/1@d4097``): the dimension a reduction, scan,
softmax or normalisation works along, read from the first ATen call with a ``dim`` argument on a
tensor of the first tensor's shape (``operator_dim``), or a matrix product's contraction, when that
is not the main dimension. Only that dimension takes the new length (in every tensor of the first
one's shape, or in both operands); a tensor past ``MAX_RESIZED_ELEMENTS`` has its other dimensions
shrunk to fit rather than being refused.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from gapfuzz.core.seeding import stable_int

from ..sizes import SizeError
from .op_products import Positions, contraction, output_last
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
    main = main_dimension(sample, axis)
    if main is None:
        raise SizeError("the sample has no non-empty dimension to resize")
    first = next((tuple(t.shape) for t in sample_tensors(sample) if t.dim() > 0), ())
    sample = _with_shapes(sample, first, main, size)

    def shape_of(t: torch.Tensor) -> list[int] | None:
        if main == 0:  # scalars become vectors
            return [size]
        if t.dim() == 0 or main not in t.shape:
            return None
        shape = [size if s == main else s for s in t.shape]
        if math.prod(shape) > MAX_RESIZED_ELEMENTS:  # a square matrix: resize its last dimension only
            shape = list(t.shape[:-1]) + [size if t.shape[-1] == main else t.shape[-1]]
        if math.prod(shape) > MAX_RESIZED_ELEMENTS:
            raise SizeError(f"a {list(t.shape)} input would hold over {MAX_RESIZED_ELEMENTS} elements at size {size}")
        return shape

    return _remade(sample, {i: shape_of(t) for i, t in enumerate(sample_tensors(sample))}, main, size, key)


def resize_at(sample, positions: Positions, size: int, key: str):
    """The sample with the dimensions at ``positions`` (and no other) at ``size``; a tensor that would
    hold over ``MAX_RESIZED_ELEMENTS`` has its largest other dimensions shrunk until it fits."""
    tensors = sample_tensors(sample)
    (i0, d0), shapes = positions[0], {}
    old = tensors[i0].shape[d0]
    sample = _with_shapes(sample, tuple(tensors[i0].shape), old, size, d0)
    for i, t in enumerate(tensors):
        dims = {d for j, d in positions if j == i}
        if dims:
            shape = [size if d in dims else s for d, s in enumerate(t.shape)]
            while math.prod(shape) > MAX_RESIZED_ELEMENTS:
                d = max((d for d in range(len(shape)) if d not in dims), key=lambda d: shape[d], default=None)
                if d is None or shape[d] <= 1:
                    raise SizeError(f"a {list(t.shape)} input holds over {MAX_RESIZED_ELEMENTS} elements at "
                                    f"size {size} along dimension {sorted(dims)}")
                shape[d] = max(1, MAX_RESIZED_ELEMENTS // math.prod(shape[:d] + shape[d + 1:]))
            shapes[i] = shape
    return _remade(sample, shapes, old, size, key)


def _remade(sample, shapes: dict[int, list[int] | None], old: int, size: int, key: str):
    """The sample with each tensor (by index) that has a shape in ``shapes`` drawn again at that shape,
    from its own values; integer indices into a dimension that shrinks from ``old`` to ``size`` wrap."""
    from torch.testing._internal.opinfo.core import SampleInput

    leaves, spec = flatten_sample(sample)
    gen = torch.Generator().manual_seed(stable_int(key))
    slots = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    for index, slot in enumerate(slots):
        if shapes.get(index) is not None:
            leaves[slot] = _drawn(leaves[slot], shapes[index], old, size, gen)
    inp, args, kwargs = pytree.tree_unflatten(leaves, spec)
    return SampleInput(inp, args=tuple(args), kwargs=dict(kwargs))


def _drawn(t: torch.Tensor, shape: list[int], old: int, size: int, gen: torch.Generator) -> torch.Tensor:
    pool = t.detach().reshape(-1)
    if pool.numel() == 0:
        return torch.zeros(shape, dtype=t.dtype)
    if pool.unique().numel() < 2:  # a scalar's one value: draw in make_tensor's range, keeping its sign
        return _draw(shape, t.dtype, bool((pool >= 0).all()), gen)
    values = pool[torch.randint(0, pool.numel(), shape, generator=gen)]
    if not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool) and size < old:
        if bool(((pool >= 0) & (pool < old)).all()) and size > 0:  # indices into the resized dimension
            values = values % size
    return values.contiguous()


class _DimRecorder(TorchDispatchMode):
    """Notes the first ATen call that works along a ``dim``: (its input's shape, the dims, normalised)."""

    def __init__(self):
        super().__init__()
        self.found: tuple[tuple[int, ...], list[int]] | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.found is None:
            self.found = _works_along(func, args, kwargs or {}, out)
        return out


def _works_along(func, args, kwargs, out) -> tuple[tuple[int, ...], list[int]] | None:
    """A reduction (tagged so) or an op that keeps its input's shape (scan, softmax, sort) along an
    int or int-list ``dim`` argument, on a tensor; not a view."""
    schema = func._schema
    values = {**{a.name: v for a, v in zip(schema.arguments, args)}, **kwargs}
    x, dim = (args[0] if args else None), values.get("dim")
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or any(r.alias_info for r in schema.returns):
        return None
    dims = [dim] if type(dim) is int else list(dim) if isinstance(dim, (list, tuple)) else []
    if not dims or not all(type(d) is int and -x.dim() <= d < x.dim() for d in dims):
        return None
    first_out = next((o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)), None)
    if torch.Tag.reduction not in func.tags and (first_out is None or first_out.shape != x.shape):
        return None
    return tuple(x.shape), [d % x.dim() for d in dims]


def operator_dim(fn, sample) -> int | None:
    """The dimension of the sample's first tensor that the operator works along (its ``dim``), when
    it is not the last one; None for an operator without one, a reduction over every dimension,
    an empty one, or one the CPU rejects."""
    tensors = sample_tensors(sample)
    first = next((t for t in tensors if t.dim() > 0), None)
    if first is None:
        return None
    rec = _DimRecorder()
    try:
        with rec, torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(sample.input, *sample.args, **sample.kwargs)
    except Exception:  # noqa: BLE001 - a sample the CPU rejects has no dimension of its own here
        return None
    if rec.found is None or rec.found[0] != tuple(first.shape):
        return None
    d = next((d for d in rec.found[1] if d != first.dim() - 1), None)
    return d if d is not None and first.shape[d] > 0 else None


def along(op, key: str, sample) -> list[Positions]:
    """The positions ``@d<n>`` may resize, best first: a matrix product's contraction; or the operator's
    ``dim`` in the first tensor and every tensor of its shape, then also in every tensor that spells
    its trailing dimensions (an affine weight). Empty when that is the main dimension or there is none."""
    tensors = sample_tensors(sample)
    contracted = contraction(key, sample)
    if contracted is not None:
        i, d = contracted[0]
        return [] if _at_main(tensors, contracted) or not tensors[i].shape[d] else [contracted]
    d = operator_dim(op.op, sample)
    if d is None:
        return []
    first = next(t for t in tensors if t.dim() > 0)
    lead = first.dim() - d  # d counted from the end
    same = [(i, d) for i, t in enumerate(tensors) if t.shape == first.shape]
    trailing = [(i, t.dim() - lead) for i, t in enumerate(tensors) if lead <= t.dim() < first.dim()
                and t.shape == first.shape[-t.dim():]]
    return [same, same + trailing] if trailing else [same]


def rebuilt(op, key: str, sample, sized, seed_id: str, ops_of: Callable) -> tuple:
    """The sample rebuilt as ``sized`` (a ``SeedId``) says, its ATen ops and the positions resized
    along the operator (``@d<n>``, a matrix product's width): the first of ``_candidates`` that runs
    (``ops_of``: its ATen ops, or None when it fails on the CPU)."""
    why = SizeError(f"{seed_id}: the operator works along no dimension of its own but the main one")
    for positions, make in _candidates(op, key, sample, sized, seed_id):
        try:
            candidate = make()
        except SizeError as e:
            why = e
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            aten = ops_of(candidate)
        if aten is not None:
            return candidate, aten, positions
        why = SizeError(f"{seed_id}: the sample fails on the CPU at {sized.shown}")
    raise why


def _candidates(op, key: str, sample, sized, seed_id: str) -> list[tuple[Positions | None, Callable]]:
    """(positions, maker) of the samples to try, best first; a maker may raise ``SizeError``. A matrix
    product's width: its rows and contraction, else its contraction alone."""
    if sized.along is not None:
        return [(p, lambda p=p: resize_at(sample, p, sized.along, seed_id)) for p in along(op, key, sample)]
    if sized.width is None:
        return _sized(key, sample, sized.size, seed_id)
    contracted = contraction(key, sample)
    if contracted is None:
        return [(None, lambda: resize(sample, sized.width, seed_id, -2))]
    return [(contracted, lambda: resize_at(resize(sample, sized.width, seed_id, -2), contracted, sized.width, seed_id)),
            (contracted, lambda: resize_at(sample, contracted, sized.width, seed_id))]


def _sized(key: str, sample, size: int, seed_id: str) -> list[tuple[Positions | None, Callable]]:
    """The main dimension's candidates: where it is a product's contraction (``bmm``'s, ``mv``'s) or the
    bias's columns (``addmm``'s), every operand's dimension of that index at ``size`` together; else
    every dimension of its length (``resize``), and for a product whose main dimension is not its own
    (a broadcast bias of one element), its contraction."""
    tensors, plain = sample_tensors(sample), (None, lambda: resize(sample, size, seed_id, -1))
    contracted = contraction(key, sample)
    if main_dimension(sample) in (None, 0) or contracted is None:
        return [plain]
    tied = [p for p in (contracted, output_last(key, sample)) if p is not None and _at_main(tensors, p)]
    return [(p, lambda p=p: resize_at(sample, p, size, seed_id)) for p in tied] + [plain] + \
        [(contracted, lambda: resize_at(sample, contracted, size, seed_id))] * (not tied)


def _at_main(tensors: tuple, positions: Positions) -> bool:
    """Whether ``positions`` hold the main dimension (the last one of the first tensor that has one)."""
    first = next((i for i, t in enumerate(tensors) if t.dim() > 0), None)
    return first is not None and (first, tensors[first].dim() - 1) in positions


def _with_shapes(sample, first: tuple, old: int, new: int, dim: int | None = None):
    """The sample with every int list among its arguments that spells trailing dimensions of ``first``
    (a normalised shape, a view's sizes) saying ``new`` where it said ``old`` (only at ``first``'s
    dimension ``dim`` when given)."""
    from torch.testing._internal.opinfo.core import SampleInput

    def fix(x):
        if isinstance(x, (list, tuple)) and x and all(type(v) is int for v in x) and tuple(x) == first[-len(x):] \
                and old in x:
            at = None if dim is None else dim - (len(first) - len(x))
            return type(x)(new if v == old and at in (None, k) else v for k, v in enumerate(x))
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
