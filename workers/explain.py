"""Why a divergence happens: hypotheses about the target, tested on eager, so that the common causes
need no hand-written note and one precision default is one cluster, not twenty.

A hypothesis says how the target computes the variant differently: every float op in bfloat16
or float16 (OpenVINO's CPU plugin computes float16 and float64 models in bfloat16 too); matmul
and convolution inputs rounded to TF32 (CUDA only); a float16 or bfloat16 graph in float32
throughout, rounded at its outputs (the mirror, which explains a reference less exact than the
target); sums accumulated in another order.
Eager, made to compute the variant that way (``Emulator``, the one ``workers.interpret.Evaluator``
loop with each call rewritten), is compared with the reference on the same probe's inputs. A
precision hypothesis holds when the emulation is as far from the reference as the target is, to
within ``FACTOR`` either way, both at the worst element and at the median one (a kernel off by a
constant 2 % is as bad as bfloat16 at its worst element, but at every element, where rounding is
bad at few), and its symptom is the same; the reduction-order hypothesis holds when
reordering alone moves eager at least ``1 / FACTOR`` as far as the target is (then the difference is
no defect: ``core.bugs.BENIGN``). Of the hypotheses that hold, reduction order wins (it explains
the least), then the precision whose error is closest to the target's. The emulations run once per
(variant, probe), in the executor that holds the variant; every target's run on that probe is then
explained against them in the judge, for the cost of a comparison.
"""
from __future__ import annotations

import math

import torch

from core.bugs import Explanation, Verdict

from .compare import Settings, compare
from .interpret import Evaluator

aten = torch.ops.aten
FACTOR = 10.0  # "the same error, to within a factor": a decade either way
# hypothesis -> (the dtype it computes in, the dtypes it narrows or widens to that)
PRECISIONS = {Explanation.BFLOAT16: (torch.bfloat16, (torch.float32, torch.float16, torch.float64)),
              Explanation.FLOAT16: (torch.float16, (torch.float32, torch.float64))}
HALF = (torch.float16, torch.bfloat16)  # what FLOAT32 computes in float32 throughout, rounding only the outputs
MATMULS = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default, aten.matmul.default,
           aten.linear.default, aten.convolution.default, aten.conv2d.default, aten.conv1d.default,
           aten.conv3d.default, aten._convolution.default}
HYPOTHESES = (Explanation.REDUCTION_ORDER, Explanation.BFLOAT16, Explanation.FLOAT16, Explanation.TF32,
              Explanation.FLOAT32)
FOR_VERDICT = {Verdict.TARGET_DIVERGENT: (Explanation.BFLOAT16, Explanation.FLOAT16, Explanation.TF32),
               Verdict.REFERENCE_DIVERGENT: (Explanation.FLOAT32,)}  # a narrower stack is further off; a wider, closer
MEDIAN_FLOOR = 0.1  # tolerances (about one ulp of float32): medians below this count as equal


def _round_tf32(t: torch.Tensor) -> torch.Tensor:
    """float32 rounded to nearest on TF32's 10 explicit mantissa bits (13 low bits cleared)."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def _map(fn, a):
    if isinstance(a, torch.Tensor):
        return fn(a)
    if isinstance(a, (list, tuple)) and not isinstance(a, torch.Size):
        return type(a)(_map(fn, x) for x in a)
    if isinstance(a, dict):
        return {k: _map(fn, v) for k, v in a.items()}
    return a


def _is_f32(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dtype == torch.float32


def _reordered(target, args, kwargs):
    """The same call with its reduction's operands reversed along the reduced axis (same value in exact
    arithmetic, another float32 rounding), or None when the op reduces nothing this knows how to reverse."""
    a = list(args)
    if target in (aten.sum.dim_IntList, aten.mean.dim) and _is_f32(a[0]) and len(a) > 1 and a[1]:
        dims = [d % a[0].dim() for d in a[1]] if a[0].dim() else []
        return [a[0].flip(dims), *a[1:]] if dims else None
    if target in (aten.sum.default, aten.mean.default) and _is_f32(a[0]) and a[0].dim():
        return [a[0].flip(list(range(a[0].dim()))), *a[1:]]
    if target == aten.mm.default and _is_f32(a[0]):
        return [a[0].flip(1), a[1].flip(0)]
    if target == aten.addmm.default and _is_f32(a[1]):
        return [a[0], a[1].flip(1), a[2].flip(0), *a[3:]]
    if target == aten.bmm.default and _is_f32(a[0]):
        return [a[0].flip(2), a[1].flip(1)]
    if target == aten.linear.default and _is_f32(a[0]):
        return [a[0].flip(-1), a[1].flip(-1), *a[2:]]
    if target == aten.convolution.default and _is_f32(a[0]) and not a[6] and a[8] == 1:
        return [a[0].flip(1), a[1].flip(1), *a[2:]]
    return None


def _widen(a):
    if isinstance(a, torch.dtype):
        return torch.float32 if a in HALF else a
    if isinstance(a, torch.Tensor):
        return a.float() if a.dtype in HALF else a
    if isinstance(a, (list, tuple)) and not isinstance(a, torch.Size):
        return type(a)(_widen(x) for x in a)
    if isinstance(a, dict):
        return {k: _widen(v) for k, v in a.items()}
    return a


class Emulator(Evaluator):
    """Eager, computing each call the way hypothesis ``mode`` says the target does."""

    def __init__(self, gm, mode: Explanation):
        super().__init__(gm)
        self.mode = mode

    def placeholder(self, target, args, kwargs):
        value = super().placeholder(target, args, kwargs)
        return _widen(value) if self.mode == Explanation.FLOAT32 else value

    def get_attr(self, target, args, kwargs):
        value = super().get_attr(target, args, kwargs)
        return _widen(value) if self.mode == Explanation.FLOAT32 else value

    def call_function(self, target, args, kwargs):
        if self.mode == Explanation.FLOAT32:  # half-precision graphs in float32 throughout, casts too
            return target(*_widen(args), **_widen(kwargs))
        if self.mode in PRECISIONS:
            into, changed = PRECISIONS[self.mode]
            found = [t.dtype for t in torch.utils._pytree.tree_leaves((args, kwargs))
                     if isinstance(t, torch.Tensor) and t.dtype in changed]
            if found:
                args, kwargs = _map(lambda t: t.to(into) if t.dtype in changed else t, (args, kwargs))
                value = target(*args, **kwargs)
                return _map(lambda t: t.to(found[0]) if t.dtype == into else t, value)
        elif self.mode == Explanation.TF32 and target in MATMULS:
            args = _map(lambda t: _round_tf32(t) if _is_f32(t) else t, args)
        elif self.mode == Explanation.REDUCTION_ORDER:
            args = _reordered(target, args, kwargs) or args
        return target(*args, **kwargs)


def emulate(gm, inputs: tuple, modes=HYPOTHESES) -> dict:
    """Each hypothesis's outputs of the variant on ``inputs`` (flattened like a backend's, in the dtypes
    eager gives), None for one eager cannot compute that way (an op with no bfloat16 kernel, say)."""
    with torch.no_grad():
        plain = torch.utils._pytree.tree_leaves(Evaluator(gm).run(*inputs))
    out = {}
    for mode in modes:
        try:
            with torch.no_grad():
                value = torch.utils._pytree.tree_leaves(Emulator(gm, mode).run(*inputs))
            out[mode] = [t.detach().to(p.dtype) if isinstance(t, torch.Tensor) and isinstance(p, torch.Tensor) else t
                         for t, p in zip(value, plain)]
        except Exception:  # noqa: BLE001 - a hypothesis eager cannot test explains nothing
            out[mode] = None
    return out


def spread(actual: list, expected: list, settings: Settings) -> tuple[float, float]:
    """The worst and the median element's distance, in tolerances of its dtype, over every float output
    (positions where either side is not finite left out: the symptom covers those)."""
    errors = []
    for a, b in zip(actual, expected):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.is_floating_point()
                and b.is_floating_point() and a.shape == b.shape):
            continue
        atol_rtol = settings.tol(b.dtype)
        a64, b64 = a.detach().double().flatten(), b.detach().double().flatten()
        keep = torch.isfinite(a64) & torch.isfinite(b64)
        errors.append((a64[keep] - b64[keep]).abs() / (atol_rtol[1] + atol_rtol[0] * b64[keep].abs()))
    every = torch.cat(errors) if errors else torch.zeros(0, dtype=torch.float64)
    if not every.numel():
        return 0.0, 0.0
    return float(every.max()), float(every.median())


def _within(a: float, b: float, floor: float = 0.0) -> float | None:
    """a / b when it is within FACTOR either way (both infinite: 1), else None."""
    if math.isinf(a) and math.isinf(b):
        return 1.0
    ratio = (a + floor) / (b + floor) if b + floor > 0 else math.inf
    return ratio if 1 / FACTOR <= ratio <= FACTOR else None


def explain(figures: dict, target: list, reference: list, emulated: dict, settings: Settings,
            device: str = "cpu") -> tuple[Explanation, float] | None:
    """The hypothesis that explains a divergent run on ``device`` (its comparison columns ``figures``, its
    ``target`` and the ``reference`` outputs), with the target's worst error over the emulation's; None
    when none holds. TF32 is a hypothesis on CUDA devices only: no CPU kernel rounds to it."""
    verdict = figures.get("verdict")
    if verdict not in FOR_VERDICT:
        return None
    worst, median = spread(target, reference, settings)
    best = None
    for mode in HYPOTHESES:
        outputs = emulated.get(mode)
        if outputs is None or (mode != Explanation.REDUCTION_ORDER and mode not in FOR_VERDICT[verdict]) or \
                (mode == Explanation.TF32 and not device.startswith("cuda")):
            continue
        c = compare(outputs, reference, settings)
        if c.symptom != figures.get("symptom"):
            continue
        e_worst, e_median = spread(outputs, reference, settings)
        if mode == Explanation.REDUCTION_ORDER:
            if e_worst > 0 and worst <= FACTOR * e_worst:
                return mode, worst / e_worst  # no worse than summing in another order: no defect
            continue
        ratio = _within(worst, e_worst)
        if ratio is not None and _within(median, e_median, MEDIAN_FLOOR) is not None and \
                (best is None or abs(math.log(ratio)) < abs(math.log(best[1]))):
            best = (mode, ratio)
    return best
