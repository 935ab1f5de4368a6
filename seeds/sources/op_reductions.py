"""An integer reduction's seed long enough for a vector loop along the dimension it reduces.

OpInfo's first samples of most reductions are scalars (``argmax`` of a 0-d tensor), so a reduction
seed of an integer or boolean dtype never runs the vectorised loop that a compiler generates for a
longer dimension, nor a chain that mutation grows in front of it: Inductor fails to compile the
``argmax`` of the ``abs`` of an int16 vector, and compiles the same chain on a scalar. Such a seed is
built with its reduced dimension at ``REDUCED_LENGTH`` (a scalar sample becomes a vector, a dimension
the operator reduces along another one is lengthened), as ``op_sizes`` rebuilds a size; its rebuilt
sizes (``@<n>``, ``@d<n>``, ``@w<n>``) start from the sample as drawn.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from ..sizes import SizeError
from .op_samples import sample_tensors
from .op_sizes import along, main_dimension, resize, resize_at

REDUCED_LENGTH = 17  # past 16: a full vector of int16 lanes and a tail of one
SHORT = 16  # a reduced dimension shorter than this is lengthened


def reduces(aten_ops: list[str]) -> bool:
    """Whether one of these ATen ops (``aten.argmax.default``) is tagged a reduction."""
    def tagged(name: str) -> bool:
        _, packet, overload = name.split(".")
        op = getattr(getattr(torch.ops.aten, packet, None), overload, None)
        return op is not None and torch.Tag.reduction in op.tags

    return any(tagged(name) for name in aten_ops)


def lengthened(op, key: str, sample, seed_id: str, ops_of: Callable) -> tuple | None:
    """The sample with its reduced dimension at ``REDUCED_LENGTH`` and its ATen ops (``ops_of``: None
    when it fails on the CPU); None when that dimension is long enough already or cannot be lengthened."""
    main = main_dimension(sample)
    if main is None:
        return None
    tensors, positions = sample_tensors(sample), ([] if main == 0 else along(op, key, sample))
    try:
        if positions and tensors[positions[0][0][0]].shape[positions[0][0][1]] < SHORT:
            candidate = resize_at(sample, positions[0], REDUCED_LENGTH, seed_id)
        elif not positions and main < SHORT:  # a scalar sample (0) too
            candidate = resize(sample, REDUCED_LENGTH, seed_id)
        else:
            return None
    except SizeError:
        return None
    aten = ops_of(candidate)
    return None if aten is None else (candidate, aten)
