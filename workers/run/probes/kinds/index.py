"""An index tensor's own values in another order: still valid indices, another access pattern."""
from __future__ import annotations

import torch

from gapfuzz.workers.run.probes.base import ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS

ORDERS = ("reversed", "shuffled")


@PROBE_KINDS.register
class Index(ProbeKind):
    """An index input's values reversed or shuffled."""

    name = "index"
    order = 50
    needs = "index"
    counted = True
    params = {"order": ORDERS}
    rounds = (({"order": "reversed"},), ({"order": "shuffled"},))
    legacy = {"index:reversed": 4, "index:shuffled": 9}

    def make_one(self, t, params, g):
        flat = t.reshape(-1)
        order = flat.flip(0) if params["order"] == "reversed" else flat[torch.randperm(flat.numel(), generator=g)]
        return order.reshape(t.shape).clone()
