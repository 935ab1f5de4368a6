"""A seed source whose seeds fail on purpose (loaded with GAPFUZZ_PLUGINS=tests.stacks.broken_seeds)."""
from __future__ import annotations

import ctypes

import torch

from gapfuzz.seeds.registry import SeedSource, register_source
from gapfuzz.seeds.spec import BuiltSeed, SeedInfo


class _Tanh(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x)


class _DataDependent(torch.nn.Module):
    def forward(self, x):
        return x[x > 0].sum() if x.sum() > 0 else x  # data-dependent control flow: export refuses


@register_source
class BrokenSource(SeedSource):
    name = "broken"
    prefix = "broken"

    def list_ids(self):
        return ["broken/ok", "broken/raise", "broken/segfault", "broken/export"]

    def build(self, seed_id):
        kind = seed_id.split("/", 1)[1]
        if kind == "raise":
            raise RuntimeError("constructor failed on purpose")
        if kind == "segfault":
            ctypes.string_at(0)
        model = _DataDependent() if kind == "export" else _Tanh()
        info = SeedInfo(id=seed_id, source="broken", family=kind, task="test", params=0)
        return BuiltSeed(info, model, (torch.randn(2, 3),))
