"""Masks: all true, all false, half at random, one true, every other."""
from __future__ import annotations

import torch

from gapfuzz.workers.run.probes.base import ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS

MASKS = (True, False, "random", "single", "alternating")


@PROBE_KINDS.register
class Bool(ProbeKind):
    """A bool input all true, all false, half at random, one true, or every other."""

    name = "bool"
    order = 40
    needs = "mask"
    counted = True
    params = {"value": MASKS}
    rounds = tuple(({"value": v},) for v in MASKS)
    legacy = {"bool:True": 3, "bool:False": 8, "bool:random": 13, "bool:single": 17, "bool:alternating": 21}

    def make_one(self, t, params, g):
        value = params["value"]
        if value == "random":
            return torch.rand(t.shape, generator=g) < 0.5
        if value == "alternating":
            return (torch.arange(t.numel()) % 2 == 0).reshape(t.shape)
        if value == "single":
            out = torch.zeros_like(t).reshape(-1)
            out[int(torch.randint(out.numel(), (1,), generator=g))] = True
            return out.reshape(t.shape)
        return torch.full_like(t, bool(value))
