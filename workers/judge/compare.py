"""Tier 1, tensor closeness, and attribution against the oracle.

Every output leaf is checked; lists, tuples and dicts arrive flattened in pytree order,
so structure differences show as a length or shape mismatch, never as a pass.

Pass/fail at any tolerance ``t`` of a sweep (``|a-b| <= t + t*|b|``) is decided by one
figure, ``tol_needed`` = max |a-b| / (1 + |b|): it passes exactly when ``tol_needed <= t``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from gapfuzz.core.bugs import Symptom, Verdict
from gapfuzz.core.tolerances import Tolerances

SYMPTOM_ORDER = [s.value for s in Symptom]  # worst first


@dataclass
class Closeness:
    """Tier-1 figures of one output list against another (worst over outputs)."""

    symptom: Symptom | None = None  # None when every output passes at the default tolerance
    mismatched_outputs: int = 0
    worst_output: int | None = None
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    max_ulp: float = 0.0
    tol_needed: float = 0.0
    tol_ratio: float = 0.0  # max |a-b| / (atol + rtol*|b|) at the dtype's default tolerance
    nonfinite_mismatch: int = 0
    signed_zero_mismatch: int = 0
    output_dtype: str | None = None

    @property
    def passed(self) -> bool:
        return self.symptom is None

    def worse(self, symptom: Symptom, index: int) -> None:
        self.mismatched_outputs += 1
        if self.symptom is None or SYMPTOM_ORDER.index(symptom) < SYMPTOM_ORDER.index(self.symptom):
            self.symptom, self.worst_output = symptom, index


def ulp(x: torch.Tensor) -> torch.Tensor:
    """Spacing of floating numbers at |x|, in x's own dtype, as float64."""
    ax = x.abs()
    up = torch.nextafter(ax, torch.full_like(ax, math.inf))
    return (up.double() - ax.double()).clamp_min(torch.finfo(x.dtype).tiny)


def compare(actual: list, expected: list, settings: Tolerances) -> Closeness:
    c = Closeness()
    if len(actual) != len(expected):
        c.worse(Symptom.STRUCTURE, min(len(actual), len(expected)))
        return c
    for i, (a, b) in enumerate(zip(actual, expected)):
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
                c.worse(Symptom.STRUCTURE, i)
            elif a != b and not (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)):
                c.worse(Symptom.VALUE, i)
            continue
        _compare_tensor(c, i, a, b, settings)
    return c


def _compare_tensor(c: Closeness, i: int, a: torch.Tensor, b: torch.Tensor, s: Tolerances) -> None:
    c.output_dtype = c.output_dtype or str(b.dtype).removeprefix("torch.")
    if a.shape != b.shape:
        c.worse(Symptom.SHAPE, i)
        return
    if not (b.is_floating_point() or b.is_complex()):
        if a.is_floating_point() or a.is_complex():
            c.worse(Symptom.DTYPE, i)
            return
        wrong = int((a.to(torch.int64) != b.to(torch.int64)).sum()) if a.numel() else 0
        if wrong:
            c.worse(Symptom.INTEGER, i)
            c.max_abs_err = max(c.max_abs_err, float((a.double() - b.double()).abs().max()))
        return
    if a.dtype != b.dtype and a.is_floating_point() != b.is_floating_point():
        c.worse(Symptom.DTYPE, i)
        return
    if a.is_complex() or b.is_complex():
        a, b = torch.view_as_real(a.to(torch.complex128)), torch.view_as_real(b.to(torch.complex128))
    ad, bd = a.double(), b.double()
    fa, fb = torch.isfinite(ad), torch.isfinite(bd)
    same_nonfinite = (fa == fb) & (fa | (ad.isnan() & bd.isnan()) | (ad == bd))
    bad_nonfinite = int((~same_nonfinite).sum())
    c.signed_zero_mismatch += int(((ad == 0) & (bd == 0) & (torch.signbit(ad) != torch.signbit(bd))).sum())
    both = fa & fb
    rtol, atol = s.tol(b.dtype)
    if both.any():
        diff = (ad[both] - bd[both]).abs()
        ref = bd[both].abs()
        c.max_abs_err = max(c.max_abs_err, float(diff.max()))
        c.max_rel_err = max(c.max_rel_err, float((diff / ref.clamp_min(1e-30)).max()))
        c.tol_needed = max(c.tol_needed, float((diff / (1 + ref)).max()))
        c.tol_ratio = max(c.tol_ratio, float((diff / (atol + rtol * ref)).max()) if atol or rtol else
                          (math.inf if float(diff.max()) > 0 else 0.0))
        b_real = b if not b.is_complex() else bd
        if b_real.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            c.max_ulp = max(c.max_ulp, float((diff / ulp(b_real[both])).max()))
        numeric_bad = bool((diff > atol + rtol * ref).any())
    else:
        numeric_bad = False
    if bad_nonfinite:
        c.nonfinite_mismatch += bad_nonfinite
        c.worse(Symptom.NONFINITE, i)
    elif numeric_bad:
        c.worse(Symptom.NUMERIC, i)


@dataclass
class Attribution:
    """Target vs reference, attributed with the oracle."""

    verdict: Verdict
    closeness: Closeness
    target_oracle: float | None = None  # tol_ratio of target vs oracle
    reference_oracle: float | None = None

    def columns(self) -> dict:
        cols = {k: v for k, v in asdict(self.closeness).items()}
        cols.update(verdict=self.verdict, err_vs_oracle=self.target_oracle, ref_err_vs_oracle=self.reference_oracle)
        return cols


def _oracle_error(x: list, oracle: list, s: Tolerances) -> tuple[float, str | None]:
    """Distance from the oracle in tolerances of x's own dtype (oracle cast down to it)."""
    cast = [o.to(a.dtype) if isinstance(o, torch.Tensor) and isinstance(a, torch.Tensor)
            and a.is_floating_point() and o.is_floating_point() else o for a, o in zip(x, oracle)]
    c = compare(x, cast, s)
    if c.symptom in (Symptom.STRUCTURE, Symptom.SHAPE, Symptom.VALUE):
        return math.inf, c.symptom
    # integers and bools are exact: one wrong element (a flipped comparison, an index one off) is past
    # the verdict's one-tolerance margin, so a target that alone is off is target-divergent
    exact = c.max_abs_err + 1.0 if c.symptom == Symptom.INTEGER and c.max_abs_err else 0.0
    return c.tol_ratio + (math.inf if c.nonfinite_mismatch else 0.0) + exact, c.symptom


def attribute(target: list, reference: list, oracle: list | None, s: Tolerances) -> Attribution:
    close = compare(target, reference, s)
    if close.passed:
        return Attribution(Verdict.AGREE, close)
    if oracle is None:
        return Attribution(Verdict.NO_ORACLE, close)
    et, _ = _oracle_error(target, oracle, s)
    er, _ = _oracle_error(reference, oracle, s)
    v = Attribution(Verdict.AGREE, close, et, er)
    if et > s.multiplier * er + 1.0:
        v.verdict = Verdict.TARGET_DIVERGENT
    elif er > s.multiplier * et + 1.0:
        v.verdict = Verdict.REFERENCE_DIVERGENT
    elif et > s.far and er > s.far:
        v.verdict = Verdict.ILL_CONDITIONED
    return v
