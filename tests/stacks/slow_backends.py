"""Test-only stacks that take too long at one stage, for the pair's wall budget (``workers.run.budget``).

- ``SlowToPrepare``: eager, after sleeping ``sleep_s`` in its prepare (a compile that never ends);
- ``SlowToLocate``: eager, half as much again on every output (a target-divergent run), whose prepares after the first
  ``fast`` ones in its process (per ``token``) sleep: its run is quick, its alignment (tier 2 prepares
  prefixes of the graph) never ends; an unoptimised option set makes it one the culprit pass takes.
"""
from __future__ import annotations

import time
from collections import Counter

import torch
from torch.utils._pytree import tree_map

from gapfuzz.workers.run.registry import Backend

PREPARED: Counter = Counter()  # token -> prepares in this process


class SlowToPrepare(Backend):
    name = "slow-prepare"

    def prepare(self, gm, example_inputs, device):
        time.sleep(float(self.options.get("sleep_s", 3600)))
        return gm


class SlowToLocate(Backend):
    name = "slow-to-locate"
    unoptimised = (("plain", {}),)

    def prepare(self, gm, example_inputs, device):
        token = str(self.options.get("token", ""))
        PREPARED[token] += 1
        if PREPARED[token] > int(self.options.get("fast", 1)):
            time.sleep(3600)

        def off(t):
            return t * 1.5 + 0.1 if isinstance(t, torch.Tensor) and t.is_floating_point() else t

        return lambda *args: tree_map(off, gm(*args))
