"""Boundary probes, on an operator's own graph: the input values where its result crosses the dtype's
largest finite value (and its smallest normal), found by bisection on eager in float64, and one ulp
either side of each. An operator whose result overflows away from the generic edges (``special.entr``
near 4e36, not at the dtype's largest value, its square root or its logarithm) is probed where it does;
a stack whose intermediate overflows early, or rounds a result past the boundary to a finite one, is
wrong there only. Boundaries are cached per graph and torch release, in the process."""
from __future__ import annotations

import math

import torch

from gapfuzz.workers.run.probes.base import ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS

CROSSINGS = ("max", "tiny")  # past the largest finite value; below the smallest normal
BOUNDARY_MAX_CALLS = 2  # an operator's own graph (a cast around it at most): its boundary is the operator's
_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_STEPS = 240  # magnitudes tried on each side, log-spaced, before bisecting the first crossing
_CACHE: dict = {}


@PROBE_KINDS.register
class Boundary(ProbeKind):
    """Every floating input at a boundary of the operator's result, or one ulp either side."""

    name = "boundary"
    order = 82
    needs = "value"
    params = {"cross": CROSSINGS, "at": None}

    def propose(self, graph):
        dtype = next((t.dtype for t in graph.inputs if isinstance(t, torch.Tensor) and t.dtype in _FLOATING
                      and t.numel()), None)
        if dtype is None or graph.calls > BOUNDARY_MAX_CALLS or "value" not in graph.have:
            return []
        key = (graph.gm.code, tuple((t.dtype, tuple(t.shape)) if isinstance(t, torch.Tensor) else repr(t)
                                    for t in graph.inputs), torch.__version__)
        if key not in _CACHE:
            _CACHE[key] = boundaries(graph.gm, graph.inputs, dtype)
        return [{"cross": cross, "at": at} for cross, at in _CACHE[key]]

    def fits(self, t):
        return t.dtype in _FLOATING

    def make_one(self, t, params, g):
        centre = torch.tensor(params["at"], dtype=torch.float64).to(t.dtype)
        inf = torch.tensor(math.inf, dtype=t.dtype)
        three = torch.stack([torch.nextafter(centre, -inf), centre, torch.nextafter(centre, inf)])
        return three[torch.randint(3, t.shape, generator=g)]

    def problem(self, params):
        at = params["at"]
        if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at):
            return f"{str(at)[:40]!r} is not a boundary probe's at (a finite number)"
        return None


def _largest(gm, inputs: tuple, x: float) -> float | None:
    """The largest magnitude among the graph's floating results, in float64, every floating input at ``x``."""
    fed = tuple(torch.full(t.shape, x, dtype=torch.float64) if isinstance(t, torch.Tensor) and t.dtype in _FLOATING
                else t for t in inputs)
    try:
        with torch.no_grad():
            out = gm(*fed)
    except Exception:  # noqa: BLE001 - the operator refuses float64 or the value: no boundary there
        return None
    outs = [o for o in (out if isinstance(out, (tuple, list)) else [out])
            if isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel()]
    values = [float(o.double().abs().nan_to_num(nan=-1.0).max()) for o in outs]
    return max(values) if values and max(values) >= 0 else None


def boundaries(gm, inputs: tuple, dtype: torch.dtype) -> list[tuple[str, float]]:
    """Per crossing and sign, the first input value (by magnitude) where the result crosses the threshold,
    rounded to ``dtype``: where it passes the largest finite value, and where a nonzero result falls
    below the smallest normal."""
    info, found = torch.finfo(dtype), []
    top = math.log10(info.max)
    grid = [10 ** (-8 + (top + 8) * k / _STEPS) for k in range(_STEPS + 1)]
    for cross, over in (("max", lambda y: y > info.max), ("tiny", lambda y: 0 < y < info.smallest_normal)):
        for sign in (1.0, -1.0):
            at = _first_crossing(gm, inputs, [sign * x for x in grid], over)
            if at is not None:
                rounded = float(torch.tensor(at, dtype=torch.float64).to(dtype))
                if math.isfinite(rounded) and (cross, rounded) not in found:
                    found.append((cross, rounded))
    return found


def _first_crossing(gm, inputs: tuple, xs: list[float], over) -> float | None:
    """Bisect the first pair of neighbouring ``xs`` on which ``over(result)`` changes, to float64's ulp."""
    last = None
    for x in xs:
        y = _largest(gm, inputs, x)
        if y is None:
            continue
        if last is not None and over(y) != over(last[1]):
            lo, hi = last[0], x
            for _ in range(80):
                mid = (lo + hi) / 2
                ym = _largest(gm, inputs, mid)
                if ym is None or mid in (lo, hi):
                    break
                lo, hi = (mid, hi) if over(ym) == over(last[1]) else (lo, mid)
            return hi
        last = (x, y)
    return None
