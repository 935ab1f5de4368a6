"""Every floating input at 0.5: exact ties for rounding, comparisons and max/min."""
from __future__ import annotations

import torch

from gapfuzz.workers.run.probes.base import ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS


@PROBE_KINDS.register
class Ties(ProbeKind):
    """Every floating value 0.5."""

    name = "ties"
    order = 25
    needs = "value"
    counted = True
    rounds = ((), (), ({},))
    legacy = {"ties": 11}

    def make_one(self, t, params, g):
        return torch.full_like(t, 0.5)
