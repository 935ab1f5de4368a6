"""Where a matrix product contracts, so that a rebuilt sample keeps its operands in step.

A kernel that tiles a contraction goes wrong in its tail (the elements past the last full tile), and
only a contraction past a tile's length has one. Resizing one operand's contracted dimension without
the other's makes a sample that no stack runs (``bmm`` of (10, 5, 2049) by (10, 10, 5)): every
operand that shares the contracted index takes the new length together. ``contraction`` says where
that is for the products of ``MATRIX_PRODUCTS`` (by their operand positions), ``einsum`` (an index
in two operands and not in the output, from the equation) and ``tensordot`` (its ``dims``);
``output_last`` says which operand dimension a bias's last dimension follows (``addmm``'s columns).
"""
from __future__ import annotations

import torch

from .op_samples import sample_tensors

Positions = list[tuple[int, int]]  # (tensor index in sample_tensors order, dimension)

# Matrix products: the positions, among the sample's tensors, of the left and the right operand. The
# left one contracts its last dimension; the right one its second-to-last (its last when it is a
# vector, or for the operators in RIGHT_CONTRACTS_LAST).
MATRIX_PRODUCTS = {"mm": (0, 1), "bmm": (0, 1), "matmul": (0, 1), "__rmatmul__": (1, 0), "mv": (0, 1),
                   "dot": (0, 1), "vdot": (0, 1), "inner": (0, 1), "nn.functional.linear": (0, 1),
                   "addmm": (1, 2), "addmm.decomposed": (1, 2), "baddbmm": (1, 2), "addbmm": (1, 2), "addmv": (1, 2)}
RIGHT_CONTRACTS_LAST = {"inner", "nn.functional.linear"}
BIASES = {"addmm": 0, "addmm.decomposed": 0, "baddbmm": 0, "addbmm": 0, "addmv": 0, "nn.functional.linear": 2}
CONTRACTING = set(MATRIX_PRODUCTS) | {"einsum", "tensordot"}  # every operator ``contraction`` knows


def contraction(key: str, sample) -> Positions | None:
    """Where the operator (by OpInfo key) contracts: every operand dimension of one contracted index
    (the innermost one where there are several); None for an operator that does not contract, or
    a sample where it is not known (an ``einsum`` with an ellipsis)."""
    tensors = sample_tensors(sample)
    if key == "einsum":
        return _einsum(sample, tensors)
    if key == "tensordot":
        return _tensordot(sample, tensors)
    if key not in MATRIX_PRODUCTS:
        return None
    left, right = MATRIX_PRODUCTS[key]
    if max(left, right) >= len(tensors) or min(tensors[left].dim(), tensors[right].dim()) < 1:
        return None
    r = tensors[right]
    last = r.dim() == 1 or key in RIGHT_CONTRACTS_LAST
    return [(left, tensors[left].dim() - 1), (right, r.dim() - (1 if last else 2))]


def output_last(key: str, sample) -> Positions | None:
    """For a product that adds a bias (``addmm``, ``addmv``, ``baddbmm``, ``addbmm``, ``linear``): the
    bias's last dimension and the operand dimension that makes the output's last one, when the bias
    spells it (not broadcast); None otherwise."""
    if key not in MATRIX_PRODUCTS:
        return None
    tensors = sample_tensors(sample)
    left, right = MATRIX_PRODUCTS[key]
    bias = BIASES.get(key)
    if bias is None or len(tensors) <= max(bias, left, right) or tensors[bias].dim() == 0:
        return None
    r, l_ = tensors[right], tensors[left]
    if key == "nn.functional.linear":
        out = (right, 0) if r.dim() == 2 else None
    elif r.dim() >= 2:
        out = (right, r.dim() - 1)
    else:  # a vector on the right: the output's last dimension is the left operand's rows
        out = (left, l_.dim() - 2) if l_.dim() >= 2 else None
    b = tensors[bias]
    if out is None or b.shape[-1] != tensors[out[0]].shape[out[1]] or b.shape[-1] < 2:
        return None
    return [(bias, b.dim() - 1), out]


def _einsum(sample, tensors: tuple) -> Positions | None:
    """The last index of the equation that two operands share and the output does not hold."""
    equation = next((a for a in (*sample.args, *sample.kwargs.values()) if isinstance(a, str)), None)
    if equation is None or "..." in equation or "->" not in equation:
        return None
    inputs, output = equation.replace(" ", "").split("->")
    terms = inputs.split(",")
    if len(terms) != len(tensors) or any(len(t) != x.dim() for t, x in zip(terms, tensors)):
        return None
    shared = [c for c in dict.fromkeys("".join(terms)) if c not in output and sum(c in t for t in terms) >= 2]
    if not shared:
        return None
    c = shared[-1]
    return [(i, d) for i, t in enumerate(terms) for d, x in enumerate(t) if x == c]


def _tensordot(sample, tensors: tuple) -> Positions | None:
    """The innermost pair of dimensions ``dims`` contracts (the last ones of the left operand)."""
    if len(tensors) < 2:
        return None
    a, b = tensors[0], tensors[1]
    dims = sample.kwargs.get("dims", sample.args[1] if len(sample.args) > 1 else 2)
    if isinstance(dims, torch.Tensor):
        return None
    if isinstance(dims, int):
        pairs = [(a.dim() - dims + k, k) for k in range(dims)]
    else:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
        pairs = [(x % a.dim(), y % b.dim()) for x, y in zip(da, db)]
    if not pairs:
        return None
    x, y = max(pairs)
    return [(0, x), (1, y)]


def product_form(key: str, sample) -> str | None:
    """The operand form of a product's sample whose contraction is known: ``batched`` when every
    contracting operand has a batch dimension (rank 3 or more), else ``plain``; None otherwise. The
    listing exposes one sample of each form past its first ones, so that a batched ``matmul`` and a
    contracting ``einsum`` are seeds."""
    positions = contraction(key, sample) if key in CONTRACTING else None
    tensors = sample_tensors(sample)
    if not positions or not all(tensors[i].shape[d] for i, d in positions):
        return None
    return "batched" if all(tensors[i].dim() >= 3 for i, _ in positions) else "plain"
