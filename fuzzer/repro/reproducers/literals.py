"""Tensors as exact Python literals, so a reproducer carries its inputs in its own text.

Issue trackers take text, not ``inputs.pt``. A value is written as a decimal literal when that
reads back bit for bit (NaN, the infinities and -0.0 included); a tensor whose bits a decimal does
not keep (a NaN with its sign bit set or a payload) is written as its integer bits and viewed back.
A strided input is written as its storage and rebuilt with ``as_strided``. Past ``MAX_ELEMENTS`` a
tensor is not inlined (the caller ships it otherwise).
"""
from __future__ import annotations

import re

import numpy as np
import torch

MAX_ELEMENTS = 512
BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
        torch.bfloat16: torch.int16}
NP_BITS = {"float64": "int64", "float32": "int32", "float16": "int16"}


def inlinable(t: torch.Tensor) -> bool:
    return isinstance(t, torch.Tensor) and t.layout == torch.strided and not t.is_quantized and \
        _storage(t).numel() <= MAX_ELEMENTS and t.dtype != torch.complex32


def _storage(t: torch.Tensor) -> torch.Tensor:
    """The part of ``t``'s storage its elements reach, as a flat tensor (offset kept); what lies in its
    gaps is written as zeros (it is never read, and a copy of uninitialised memory reads as noise)."""
    t = t.detach().cpu()
    if t.is_contiguous() and t.storage_offset() == 0:
        return t.reshape(-1)
    span = t.storage_offset() + 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) if t.numel() else 0
    flat = torch.zeros(span, dtype=t.dtype)
    flat.as_strided(t.shape, t.stride(), t.storage_offset()).copy_(t)
    return flat


def _number(x) -> str:
    if isinstance(x, bool):
        return repr(x)
    if isinstance(x, float):
        if x != x:
            return "nan"
        if x in (float("inf"), float("-inf")):
            return "inf" if x > 0 else "-inf"
        text = repr(x)
        return text[:-2] if text.endswith(".0") and "e" not in text and text != "-0.0" else text
    return repr(x)


_SHORT = {torch.float32: np.float32, torch.float16: np.float16}


def _nested(values, short=None) -> str:
    if not isinstance(values, list):
        return _number(float(str(short(values))) if short and values == values and abs(values) != float("inf")
                       else values)
    return "[" + ", ".join(_nested(v, short) for v in values) + "]"


def _reads_back(text: str, like: torch.Tensor) -> bool:
    """Whether the literal ``text`` reads back as ``like``'s bits (a NaN's sign and payload too)."""
    value = eval(text, {"__builtins__": {}}, {"nan": float("nan"), "inf": float("inf")})  # noqa: S307 - our own text
    back = torch.tensor(value, dtype=like.dtype)
    bits = BITS.get(like.dtype)
    return back.shape == like.shape and (torch.equal(back.view(bits), like) if bits is None else
                                         torch.equal(back.view(bits), like.view(bits)))


def values_of(t: torch.Tensor) -> tuple[str, bool]:
    """The nested list literal of a dense tensor's values, and whether it is of its integer bits."""
    t = t.detach().cpu()
    text = _nested(t.tolist(), _SHORT.get(t.dtype))
    if not t.is_floating_point() or _reads_back(text, t):
        return text, False
    return _nested(t.view(BITS[t.dtype]).tolist()), True


def needs_nan_names(text: str) -> bool:
    """Whether ``text`` names ``nan`` or ``inf`` bare (it then imports them from math)."""
    return re.search(r"(?<![\w'\".])(?:nan|inf)(?![\w'\"])", text) is not None


WIDTH = 100  # a literal's lines: a reproducer is read on one screen, its lines within 120 characters


def wrapped(text: str, indent: str = "        ") -> str:
    """``text`` (a call around a nested list literal) broken after commas into lines of at most ``WIDTH``
    characters, continued at ``indent``: inside its brackets a line break changes nothing."""
    if len(text) <= WIDTH:
        return text
    lines, line = [], ""
    for piece in re.split(r"(?<=, )", text):
        if line and len(line) + len(piece) > WIDTH:
            lines.append(line.rstrip())
            line = indent
        line += piece
    return "\n".join([*lines, line])


def torch_literal(t: torch.Tensor) -> str:
    """``torch.tensor(...)`` that rebuilds ``t`` exactly: values, dtype, sizes, strides, offset."""
    return wrapped(_torch_literal(t))


def _torch_literal(t: torch.Tensor) -> str:
    dtype = f"torch.{str(t.dtype).removeprefix('torch.')}"
    dense = t.is_contiguous() and t.storage_offset() == 0
    base = t if dense else _storage(t)
    values, as_bits = values_of(base.reshape(t.shape) if dense else base)
    if t.numel() == 0 and dense:
        text = f"torch.empty({tuple(t.shape)}, dtype={dtype})"
    elif dense and t.numel() > 1 and _constant(base):  # ones, zeros: one value, not a page of it
        one, as_bits = values_of(base.reshape(-1)[:1])
        if as_bits:
            one = f"torch.tensor({one}, dtype=torch.{str(BITS[t.dtype]).removeprefix('torch.')}).view({dtype})[0]"
        text = f"torch.full({tuple(t.shape)}, {one if as_bits else one[1:-1]}, dtype={dtype})"
    elif as_bits:
        text = f"torch.tensor({values}, dtype=torch.{str(BITS[t.dtype]).removeprefix('torch.')}).view({dtype})"
    else:
        text = f"torch.tensor({values}, dtype={dtype})"
    if not dense:
        text += f".as_strided({tuple(t.shape)}, {tuple(t.stride())}, {t.storage_offset()})"
    return text


def _constant(t: torch.Tensor) -> bool:
    """Every element the same, bit for bit (-0.0 is not 0.0; NaNs of one payload are one value)."""
    flat = t.detach().cpu().reshape(-1)
    if t.dtype in BITS:
        flat = flat.view(BITS[t.dtype])
    elif t.is_complex():
        return False
    return bool((flat == flat[0]).all())


def numpy_literal(a: np.ndarray) -> str:
    """``np.array(...)`` that rebuilds a dense array exactly (through its bits where decimals lose them)."""
    return wrapped(_numpy_literal(a))


def _numpy_literal(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    t = torch.from_numpy(a.copy())
    if a.ndim and a.size > 1 and _constant(t):  # one value, not a page of it
        one, as_bits = values_of(t.reshape(-1)[:1])
        if not as_bits:
            return f"np.full({a.shape}, {one[1:-1]}, dtype=np.{a.dtype.name})"
    values, as_bits = values_of(t)
    if as_bits:
        return f"np.array({values}, dtype=np.{NP_BITS[a.dtype.name]}).view(np.{a.dtype.name})"
    if a.ndim and a.size == 0:
        return f"np.zeros({a.shape}, dtype=np.{a.dtype.name})"
    return f"np.array({values}, dtype=np.{a.dtype.name})"


MAX_SPECIAL = 32  # special values placed by position into a generated tensor


def generated(t: torch.Tensor, seed: int) -> str | None:
    """A seeded-random stand-in for a floating tensor too large to inline, with its special values
    (NaN, infinities, -0.0) at their recorded positions; None for one that has too many of them."""
    if not (isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype in BITS):
        return None
    flat = t.detach().cpu().reshape(-1)
    special = (~torch.isfinite(flat)) | ((flat == 0) & torch.signbit(flat))
    where = special.nonzero().flatten().tolist()
    if len(where) > MAX_SPECIAL:
        return None
    dtype = f"torch.{str(t.dtype).removeprefix('torch.')}"
    text = f"torch.randn({tuple(t.shape)}, generator=torch.Generator().manual_seed({seed}), dtype={dtype})"
    if where:
        values = ", ".join(_number(float(flat[i])) for i in where)
        text = f"special({text}, {where}, [{values}])"
    return text


SPECIAL_HELPER = ("def special(t, positions, values):  # the recorded special values, at their positions\n"
                  "    return t.view(-1).index_put((torch.tensor(positions),), torch.tensor(values, dtype=t.dtype))"
                  ".view(t.shape)")
