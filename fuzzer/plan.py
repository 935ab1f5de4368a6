"""Which seeds and variants a campaign covers, and which of them are still to run."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from seeds import list_seeds

from .campaign import Campaign, CampaignError
from .recipe import variant_id

SEED_FAILURE = "seed"  # variant index used for the one record of a seed that failed before mutation


def seed_failure_id(seed_id: str) -> str:
    return variant_id(seed_id, SEED_FAILURE)


def select_seeds(c: Campaign) -> list[str]:
    """Seed ids from every selection, in order, without repeats."""
    chosen: list[str] = []
    for i, sel in enumerate(c.seeds):
        ids = list_seeds(filter=sel.include or None, source=sel.source, exclude=sel.exclude or None)
        if not ids:
            what = f"include {sel.include}" if sel.include else "the selection"
            raise CampaignError(f"{c.source}: seeds[{i}]: no {sel.source} seed matches {what}")
        if sel.sample is not None and sel.sample < len(ids):
            ids = sorted(random.Random(f"{c.seed}/{i}").sample(ids, sel.sample))
        if sel.limit is not None:
            ids = ids[: sel.limit]
        if not ids:
            raise CampaignError(f"{c.source}: seeds[{i}]: {'sample' if sel.sample == 0 else 'limit'} 0 "
                                f"selects no seed")
        chosen += [s for s in ids if s not in chosen]
    return chosen


@dataclass
class SeedWork:
    seed_id: str
    indices: list[int]
    missing: dict[int, set[str]] = field(default_factory=dict)  # variant index -> backends still to run


def plan(c: Campaign, seed_ids: list[str], done: set[tuple[str, str]],
         backends: list[str] | None = None) -> list[SeedWork]:
    """The (variant, backend) pairs not yet recorded, grouped by seed."""
    backends = backends or [b.name for b in c.backends.all()]
    ref = c.reference.name
    work = []
    for sid in seed_ids:
        if (seed_failure_id(sid), ref) in done:
            continue
        missing = {}
        for i in range(c.variants.per_seed):
            need = {b for b in backends if (variant_id(sid, i), b) not in done}
            if need:
                missing[i] = need
        if missing:
            work.append(SeedWork(sid, sorted(missing), missing))
    return work
