"""Why a divergence happens: hypotheses about the target, tested on eager, so that the common causes
need no hand-written note and one precision default is one cluster, not twenty.

A hypothesis says how the target computes the variant differently (``workers.judge.emulate`` makes eager
compute it that way): in bfloat16 or float16, which is tested only for a stack that says it
computes so (its reported ``backend_info`` or its options name the precision: OpenVINO's CPU
plugin reports bfloat16 inference), so that a kernel of another stack as far off as bfloat16
stays a finding; with TF32 matmul and convolution operands, where the run had the platform's TF32 on; a float16 or
bfloat16 graph in float32 throughout (the mirror, which explains a reference less exact than the
target); sums accumulated in another order. The emulation is compared with the reference on the
same probe's inputs. A precision hypothesis holds when the emulation is as far from the reference
as the target is, to within ``FACTOR`` either way, both at the worst element and at the median one
(a kernel off by a constant 2 % is as bad as bfloat16 at its worst element, but at every element,
where rounding is bad at few), with the same symptom. The reduction-order hypothesis holds when
reordering alone moves eager beyond tolerance too (the same symptom) and the target is no more
than ``REORDER_FACTOR`` times as far at its worst and at its median element: then the difference
is no defect
(``core.bugs.BENIGN``). Of the hypotheses that hold, reduction order wins (it explains the least),
then the precision whose error is closest to the target's. The emulations run once per (variant,
probe, hypothesis), in the executor that holds the variant, and are measured against the reference
once (``measure``); each target's run on that probe is then explained against those measures by
the pool's runner, for the cost of measuring the target.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

from gapfuzz.core.bugs import Explanation, Symptom, Verdict
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.workers.judge.compare import compare

FACTOR = 10.0  # "the same error, to within a factor": a decade either way
MEDIAN_FLOOR = 0.1  # tolerances (about one ulp of float32): medians below this count as equal
REORDER_FACTOR = 3.0  # another summation order moves eager about as far: the worst and median element both
NARROWER = (Explanation.BFLOAT16, Explanation.FLOAT16)
DECLARES = {Explanation.BFLOAT16: re.compile(r"\bb(?:float)?f?16\b", re.I),
            Explanation.FLOAT16: re.compile(r"\b(?:f|fp|float|half)16\b|\bhalf\b", re.I)}


def declared(*settings: dict) -> set[Explanation]:
    """The narrower precisions a stack says it computes in: its reported info or its options name them."""
    text = " ".join(f"{k}={v}" for d in settings for k, v in (d or {}).items())
    return {mode for mode, pattern in DECLARES.items() if pattern.search(text)}


def hypotheses(verdict: str, tf32: bool, precisions: set) -> tuple[Explanation, ...]:
    """What to test for a run with this verdict, with the platform's TF32 on or off (``workers.run.platform``:
    a stack that rounds to TF32 with it off is a finding), of a stack computing in ``precisions``."""
    if verdict == Verdict.TARGET_DIVERGENT:
        return (Explanation.REDUCTION_ORDER, *[m for m in NARROWER if m in precisions],
                *((Explanation.TF32,) if tf32 else ()))
    if verdict == Verdict.REFERENCE_DIVERGENT:  # a wider stack is the closer one
        return Explanation.REDUCTION_ORDER, Explanation.FLOAT32
    return ()


def spread(actual: list, expected: list, settings: Tolerances) -> tuple[float, float]:
    """The worst and the median element's distance, in tolerances of its dtype, over every float output
    (positions where either side is not finite left out: the symptom covers those)."""
    errors = []
    for a, b in zip(actual, expected):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.is_floating_point()
                and b.is_floating_point() and a.shape == b.shape):
            continue
        rtol, atol = settings.tol(b.dtype)
        a64, b64 = a.detach().double().flatten(), b.detach().double().flatten()
        keep = torch.isfinite(a64) & torch.isfinite(b64)
        scale = atol + rtol * b64[keep].abs()
        errors.append((a64[keep] - b64[keep]).abs() / scale.clamp_min(torch.finfo(torch.float64).tiny))
    every = torch.cat(errors) if errors else torch.zeros(0, dtype=torch.float64)
    if not every.numel():
        return 0.0, 0.0
    return float(every.max()), float(every.median())


def _within(a: float, b: float, floor: float = 0.0) -> float | None:
    """a / b when both are finite and within FACTOR of each other, else None."""
    if not (math.isfinite(a) and math.isfinite(b)) or b + floor <= 0:
        return None
    ratio = (a + floor) / (b + floor)
    return ratio if 1 / FACTOR <= ratio <= FACTOR else None


@dataclass(frozen=True)
class Measured:
    """One emulation against the reference: what differs, and how far at the worst and median element."""

    symptom: Symptom | None
    worst: float
    median: float


def measure(emulated: dict, reference: list, settings: Tolerances) -> dict:
    """Each emulation (hypothesis -> eager's outputs that way, None when eager could not) measured against
    the reference once: the same for every target judged on that probe."""
    return {mode: None if outputs is None else
            Measured(compare(outputs, reference, settings).symptom, *spread(outputs, reference, settings))
            for mode, outputs in emulated.items()}


def explain(symptom: str | None, target: list, reference: list, measured: dict,
            settings: Tolerances) -> tuple[Explanation, float] | None:
    """The hypothesis of ``measured`` (``measure``'s) that explains a divergent run (its ``symptom``,
    its ``target`` and the ``reference`` outputs), with the target's worst error over the emulation's;
    None when none holds."""
    worst, median = spread(target, reference, settings)
    best = None
    for mode, m in measured.items():
        if m is None or m.symptom != symptom:
            continue
        if mode == Explanation.REDUCTION_ORDER:
            if 0 < m.worst and math.isfinite(worst) and worst <= REORDER_FACTOR * m.worst and \
                    median <= REORDER_FACTOR * m.median + MEDIAN_FLOOR:
                return mode, worst / m.worst  # no worse than summing in another order: no defect
            continue
        ratio = _within(worst, m.worst)
        if ratio is not None and _within(median, m.median, MEDIAN_FLOOR) is not None and \
                (best is None or abs(math.log(ratio)) < abs(math.log(best[1]))):
            best = (mode, ratio)
    return best
