"""Seeded randomness that every process agrees on: a string names the draw, never Python's salted hash.

A variant's mutations, its probes and a seed's random weights are drawn from generators seeded by
strings such as ``"0/timm/resnet18/3"``, so any worker on any machine draws the same values.
"""
from __future__ import annotations

import hashlib


def stable_int(text: str, bits: int = 31) -> int:
    """A process-independent integer from a string."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") % (1 << bits)


def seeded_generator(text: str):
    """A torch.Generator seeded by ``stable_int(text)``."""
    import torch

    return torch.Generator().manual_seed(stable_int(text))
