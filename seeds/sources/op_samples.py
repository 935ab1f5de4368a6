"""The tensors of an OpInfo sample, flattened: shared by the operator seeds (``ops``) and their
resizing (``op_sizes``), which both import it."""
from __future__ import annotations

import torch
import torch.utils._pytree as pytree


def flatten_sample(sample):
    return pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))


def sample_tensors(sample) -> tuple:
    return tuple(x for x in flatten_sample(sample)[0] if isinstance(x, torch.Tensor))
