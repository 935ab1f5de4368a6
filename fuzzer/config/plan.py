"""Which seeds and variants a campaign covers, and which of them are still to run."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from gapfuzz.results.catalog import Catalog
from gapfuzz.results.store import ResultsError
from gapfuzz.core.bugs import Status
from gapfuzz.core.modes import DEFAULT_MODE
from gapfuzz.seeds import list_seeds
from gapfuzz.seeds.registry import source_of
from gapfuzz.core.ids import SeedId
from gapfuzz.seeds.sizes import choose, choose_along, width_order

from gapfuzz.fuzzer.config.campaign import Campaign, CampaignError
from gapfuzz.fuzzer.recipe import variant_id

SEED_FAILURE = "seed"  # variant index used for the one record of a seed that failed before mutation


def seed_failure_id(seed_id: str, mode: str = DEFAULT_MODE) -> str:
    return variant_id(seed_id, SEED_FAILURE, mode)


def select_seeds(c: Campaign) -> list[str]:
    """Seed ids from every selection, in order, without repeats."""
    chosen: list[str] = []
    for i, sel in enumerate(c.seeds):
        ids = list_seeds(filter=sel.include or None, source=sel.source, exclude=sel.exclude or None)
        if not ids:
            what = f"include {sel.include}" if sel.include else "the selection"
            raise CampaignError(f"{c.source}: seeds[{i}]: no {sel.source} seed matches {what}")
        if sel.catalog is not None:
            ids = _ran_in_catalog(c, i, sel, ids)
        if sel.sample is not None and sel.sample < len(ids):
            ids = sorted(random.Random(f"{c.seed}/{i}").sample(ids, sel.sample))
        if sel.limit is not None:
            ids = ids[: sel.limit]
        if not ids:
            raise CampaignError(f"{c.source}: seeds[{i}]: {'sample' if sel.sample == 0 else 'limit'} 0 "
                                f"selects no seed")
        chosen += [s for s in ids if s not in chosen]
    return chosen


def _ran_in_catalog(c: Campaign, i: int, sel, ids: list[str]) -> list[str]:
    """The selected seeds that built, captured and ran in the seed catalog at ``sel.catalog``."""
    catalog = Catalog(sel.catalog)
    try:
        table = catalog.read()
    except ResultsError as e:
        raise CampaignError(f"{c.source}: seeds[{i}].catalog: {e}") from None
    if not table.num_rows:
        raise CampaignError(f"{c.source}: seeds[{i}].catalog: {sel.catalog} holds no seed catalog "
                            f"(gapfuzz seeds scan --out {sel.catalog} writes one)")
    ran = {s for s, status in zip(table.column("seed_id").to_pylist(), table.column("status").to_pylist())
           if status == Status.OK}
    kept = [s for s in ids if s in ran]
    if not kept:
        raise CampaignError(f"{c.source}: seeds[{i}]: none of the {len(ids)} {sel.source} seeds selected ran in the "
                            f"catalog at {sel.catalog} (scanned there: {table.num_rows})")
    return kept


def with_sizes(c: Campaign, seed_ids: list[str]) -> list[str]:
    """Each seed followed by the seeds it is rebuilt at (``seeds.sizes``): ``sizes.per_seed`` of the sizes
    its source can rebuild it at (one from each band, drawn with the campaign seed), as many along the
    dimension its operator works along (``choose_along``: the largest size among them), and
    ``sizes.widths`` widths, handed out in ``width_order`` over the campaign's seeds of each source."""
    out: list[str] = []
    order, handed = width_order(c.sizes.width_values), {}  # widths handed out so far, per source
    for sid in seed_ids:
        out.append(sid)
        if SeedId.parse(sid).rebuilt:
            continue
        source = source_of(sid)
        if c.sizes.per_seed:
            points = source.size_points(sid, list(c.sizes.values))
            out += [str(SeedId(sid, n)) for n in choose(points, c.sizes.per_seed, f"{c.seed}/{sid}")]
            points = source.along_points(sid, list(c.sizes.values))
            out += [str(SeedId(sid, along=n)) for n in choose_along(points, c.sizes.per_seed, f"{c.seed}/{sid}/d")]
        points = set(source.width_points(sid, list(c.sizes.width_values))) if c.sizes.widths else set()
        if points:
            start = handed.get(source.name, 0)
            taken = [k for k in range(start, start + len(order)) if order[k % len(order)] in points][: c.sizes.widths]
            handed[source.name] = taken[-1] + 1
            out += [str(SeedId(sid, width=order[k % len(order)])) for k in taken]
    return out


def variant_count(c: Campaign, seed_id: str) -> int:
    """Variants per seed: ``variants.per_seed``, or ``sizes.variants`` for a seed rebuilt at a size or width."""
    return min(c.sizes.variants, c.variants.per_seed) if SeedId.parse(seed_id).rebuilt else c.variants.per_seed


@dataclass
class SeedWork:
    seed_id: str
    indices: list[int]
    missing: dict[int, set[str]] = field(default_factory=dict)  # variant index -> backends still to run
    again: bool = False  # a variant built again, its first build's inputs lost with a node
    mode: str = DEFAULT_MODE  # core.modes.Mode of its variants (a seed has one work per mode)


def plan(c: Campaign, seed_ids: list[str], done: set[tuple[str, str]],
         backends: list[str] | None = None) -> list[SeedWork]:
    """The (variant, backend) pairs not yet recorded, grouped by seed and mode (a stack gets the
    variants of the modes it runs in, ``BackendSpec.runs_in``)."""
    specs = {b.name: b for b in c.backends.all()}
    backends = backends or list(specs)
    ref = c.reference.name
    work = []
    for sid in seed_ids:
        for mode in c.modes:
            if (seed_failure_id(sid, mode), ref) in done:
                continue
            runs = [b for b in backends if specs[b].runs_in(mode)]
            missing = {}
            for i in range(variant_count(c, sid)):
                need = {b for b in runs if (variant_id(sid, i, mode), b) not in done}
                if need:
                    missing[i] = need
            if missing:
                work.append(SeedWork(sid, sorted(missing), missing, mode=mode))
    return work


def plan_lines(c: Campaign, seed_ids: list[str]) -> list[str]:
    """What a campaign would run, for ``gapfuzz run --check``: its seeds and variants per mode, then the
    (variant, backend) pairs and the runs (a pair runs each of its probes) per backend and mode."""
    work = plan(c, seed_ids, set())
    rebuilt = sum(SeedId.parse(s).rebuilt for s in seed_ids)
    lines = [f"{c.source}: valid; campaign {c.name!r}, writing to {c.output}/{c.name}",
             f"seeds: {len(seed_ids)} ({len(seed_ids) - rebuilt} selected, {rebuilt} rebuilt at another size or "
             f"width), in {', '.join(str(m) for m in c.modes)}"]
    for mode in c.modes:
        n = sum(variant_count(c, s) for s in seed_ids)
        lines.append(f"variants in {mode}: {n} (up to {c.variants.per_seed} a seed, {c.sizes.variants} a rebuilt one)")
    lines.append(f"a pair runs its variant's probes ({c.probes.per_variant} value probes), each timed "
                 f"{c.run.repeats} time(s) after its first call")
    rows = [(name, str(mode), sum(name in m for w in work if w.mode == mode for m in w.missing.values()))
            for name in (s.name for s in c.backends.all()) for mode in c.modes]
    rows = [r for r in rows if r[2]]
    width = max([len("backend"), *(len(r[0]) for r in rows)])
    lines.append(f"{'backend':<{width}}  {'mode':<10} {'pairs':>7} {'runs':>8}")
    lines += [f"{name:<{width}}  {mode:<10} {pairs:>7} {pairs * c.probes.per_variant:>8}" for name, mode, pairs in rows]
    total = sum(r[2] for r in rows)
    lines.append(f"{'total':<{width}}  {'':<10} {total:>7} {total * c.probes.per_variant:>8}")
    lines.append("runs: pairs x probes per variant (relation and layout probes come beside them); nothing was run")
    return lines
