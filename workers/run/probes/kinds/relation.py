"""Relation probes: the later inputs of a related group (number inputs of one shape and dtype) equal
to the first, equal at half the positions, one ulp from it on either side, or swapped: the ties of
``>`` against ``>=`` that independently drawn inputs never have."""
from __future__ import annotations

import math

import torch

from gapfuzz.workers.run.probes.base import ProbeKind
from gapfuzz.workers.run.probes.registry import PROBE_KINDS
from gapfuzz.workers.run.probes.roles import related_group

RELATIONS = ("equal", "some-equal", "ulp", "ulp-flipped", "swapped")


@PROBE_KINDS.register
class Relation(ProbeKind):
    """The later inputs of a related group related to the first."""

    name = "relation"
    order = 60
    params = {"relation": RELATIONS}
    legacy = {f"relation:{r}": 30 + i for i, r in enumerate(RELATIONS)}

    def propose(self, graph):
        return [{"relation": r} for r in RELATIONS] if graph.related else []

    def make(self, inputs, input_roles, params, g):
        """Equal to the first, equal at a seeded half of the positions, one ulp (or one) from it on the side
        of their own value (the example's order at its least margin) or on the other side, or the group's
        values in reverse order (two inputs swapped). Each keeps its own layout and device."""
        relation, group = params["relation"], related_group(inputs, input_roles)
        out = list(inputs)
        host = {i: inputs[i].detach().cpu() for i in group}
        for i, j in zip(group, reversed(group)):
            if relation == "swapped":
                new = host[j]
            elif i == group[0]:
                continue
            elif relation == "equal":
                new = host[group[0]]
            elif relation == "some-equal":
                new = torch.where(torch.rand(host[i].shape, generator=g) < 0.5, host[group[0]], host[i])
            else:
                new = one_step(host[group[0]], host[i], flip=relation == "ulp-flipped")
            out[i] = torch.empty_like(inputs[i]).copy_(new.to(inputs[i].device))
        return tuple(out)


def one_step(t: torch.Tensor, towards: torch.Tensor, flip: bool = False) -> torch.Tensor:
    """``t`` one step towards ``towards`` at each position (``t`` where they are equal): the next float that
    way, or one more or less, so the pair keeps the order ``t`` and ``towards`` have, by the least margin;
    with ``flip``, one step the other way (up where they are equal): the order reversed."""
    up, down = towards > t, towards < t
    if flip:
        up, down = ~up, up
    if t.is_floating_point():
        inf = torch.full_like(t, math.inf)
        return torch.nextafter(t, torch.where(up, inf, torch.where(down, -inf, t)))
    info = torch.iinfo(t.dtype)
    return torch.where(up & (t != info.max), t + 1, torch.where(down & (t != info.min), t - 1, t))
