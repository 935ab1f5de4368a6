"""A small shrinker in the spirit of Hypothesis's: one ``consider`` that every pass goes through.

``consider(candidate)`` skips what it has seen, accepts only candidates smaller than the
current one, and only then pays for the predicate (a run in a fresh worker). Passes propose
candidates and keep going while any of them is accepted; statistics are kept per pass so that
call budgets can be tested and reported.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import torch

from gapfuzz.core.ir import Variant

log = logging.getLogger("gapfuzz.fuzzer")


def size(v: Variant) -> tuple:
    """What "smaller" means: fewer call nodes, then fewer input elements, then fewer weight
    elements, then fewer distinct values in weights and inputs (ones and zeros beat random floats)."""
    tensors = v.tensors()
    distinct = sum(_distinct(t) for t in [*tensors.values(), *(x for x in v.inputs if isinstance(x, torch.Tensor))])
    return (v.node_count, sum(t.numel() for t in v.inputs), sum(t.numel() for t in tensors.values()), distinct)


BITS = {8: torch.int64, 4: torch.int32, 2: torch.int16}  # a float's values counted by their bits: NaNs, -0.0


def _distinct(t: torch.Tensor) -> int:
    if t.numel() > 65536 or t.is_complex():
        return t.numel()
    flat = t.detach().reshape(-1)
    if t.is_floating_point() and t.element_size() in BITS:
        flat = flat.view(BITS[t.element_size()])
    return int(flat.unique().numel())


def layouts(tensors) -> tuple:
    """Each tensor's sizes, strides and storage offset: what a checksum of values leaves out."""
    return tuple((tuple(t.shape), t.stride(), t.storage_offset()) if isinstance(t, torch.Tensor) else None
                 for t in tensors)


def key(v: Variant) -> tuple:
    """Two candidates are the same when graph, values and layouts are (a strided input is not its copy)."""
    return v.graph_hash, v.weight_checksum(), v.input_checksum(), layouts(v.inputs), layouts(v.tensors().values())


@dataclass
class PassStats:
    tried: int = 0  # candidates proposed
    calls: int = 0  # predicate calls (the expensive part)
    accepted: int = 0
    seconds: float = 0.0


@dataclass
class Shrinker:
    current: Variant
    predicate: object  # callable(Variant) -> bool
    max_calls: int = 400
    seen: set = field(default_factory=set)
    stats: dict = field(default_factory=dict)
    calls: int = 0
    pass_name: str = "start"  # the pass whose candidates are being considered (for stats)

    def __post_init__(self):
        self.seen.add(key(self.current))

    def consider(self, candidate: Variant | None, no_larger: bool = False) -> bool:
        """True when ``candidate`` is smaller (``no_larger``: not larger, for a pass that removes what
        size does not measure, a recipe's mutations), new, and still shows the bug: it becomes current."""
        st = self.stats.setdefault(self.pass_name, PassStats())
        st.tried += 1
        if candidate is None or self.calls >= self.max_calls:
            return False
        k = key(candidate)
        if k in self.seen or not (size(candidate) <= size(self.current) if no_larger else
                                  size(candidate) < size(self.current)):
            return False
        self.seen.add(k)
        self.calls += 1
        st.calls += 1
        if not self.predicate(candidate):
            return False
        st.accepted += 1
        self.current = candidate
        return True

    def run(self, passes: list) -> Variant:
        """Apply each pass until none of them makes progress (or the call budget is spent)."""
        progress = True
        while progress and self.calls < self.max_calls:
            progress = False
            for shrink_pass in passes:
                progress = self.apply(shrink_pass) or progress
        return self.current

    def apply(self, shrink_pass, name: str | None = None) -> bool:
        """One pass (``shrink_pass(self)``), its time and candidates counted under ``name``; whether
        the current variant got smaller."""
        self.pass_name = name or shrink_pass.__name__
        t0 = time.perf_counter()
        before = size(self.current)
        shrink_pass(self)
        self.stats.setdefault(self.pass_name, PassStats()).seconds += time.perf_counter() - t0
        if size(self.current) < before:
            log.info("%s: %s -> %s", self.pass_name, before, size(self.current))
            return True
        return False

    def report(self) -> dict:
        return {"calls": self.calls, "final_size": size(self.current),
                "passes": {k: vars(v) for k, v in self.stats.items()}}


def announced(predicate, say):
    """``predicate``, telling ``say`` each accepted candidate's size and every tenth check."""
    calls = [0]

    def check(v):
        calls[0] += 1
        ok = predicate(v)
        if ok or calls[0] % 10 == 0:
            say(f"check {calls[0]}: {v.node_count} operator calls" + (" (kept)" if ok else ""))
        return ok
    return check
