"""Special values (NaN, the infinities, a signed zero, a subnormal) at one position, a row, a channel or
a window of a floating input: a kernel's handling of them, and of where they sit."""
from __future__ import annotations

import math

import torch

from gapfuzz.workers.run.probes.base import ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS

SPECIALS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "-0.0": -0.0, "subnormal": None}
PATTERNS = ("single", "row", "channel", "window")


def _p(value: str, pattern: str = "single") -> dict:
    return {"value": value, "pattern": pattern}


@PROBE_KINDS.register
class Special(ProbeKind):
    """A special value at one position, a row, a channel or a window of eight."""

    name = "special"
    order = 10
    needs = "value"
    counted = True
    params = {"value": tuple(SPECIALS), "pattern": PATTERNS}
    rounds = ((_p("nan"),), (_p("inf"),), (_p("-inf"),), (_p("-0.0"),), (_p("nan", "row"), _p("subnormal")),
              (_p("nan", "channel"),), (_p("nan", "window"), _p("inf", "row")))
    legacy = {"special:nan:single": 0, "special:inf:single": 5, "special:-inf:single": 10, "special:-0.0:single": 14,
              "special:nan:row": 18, "special:subnormal:single": 19, "special:nan:channel": 22,
              "special:nan:window": 25, "special:inf:row": 26}

    def make_one(self, t, params, g):
        value, pattern = params["value"], params["pattern"]
        real = t.real if t.is_complex() else t
        v = torch.finfo(real.dtype).smallest_normal / 4 if value == "subnormal" else SPECIALS[value]
        out = t.clone()
        if value == "-0.0" and pattern == "single":
            out = torch.where(out == 0, torch.full_like(out, -0.0), out)  # every zero signed, and one more
        if pattern == "single" or out.dim() == 0:
            flat = out.reshape(-1)
            flat[int(torch.randint(flat.numel(), (1,), generator=g))] = v
            return flat.reshape(t.shape)
        if pattern == "row":  # one index of the second-to-last dim: a whole row (the last dim)
            dim = max(0, out.dim() - 2)
        elif pattern == "channel":
            dim = 1 if out.dim() >= 2 else 0
        else:  # a window: a run of up to eight along the last dim, at one place of the others
            dim = out.dim() - 1
            start = int(torch.randint(max(1, out.shape[dim] - 7), (1,), generator=g))
            index = tuple(int(torch.randint(s, (1,), generator=g)) for s in out.shape[:-1])
            out[index + (slice(start, start + 8),)] = v
            return out
        out.select(dim, int(torch.randint(out.shape[dim], (1,), generator=g))).fill_(v)
        return out
