"""Which seeds and variants a campaign covers, and which of them are still to run."""
from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from gapfuzz.core.bugs import Status
from gapfuzz.core.ids import SeedId
from gapfuzz.core.modes import DEFAULT_MODE
from gapfuzz.core.setting import MAX_PAIRS, MAX_RUNS
from gapfuzz.fuzzer.config.campaign import Campaign, CampaignError
from gapfuzz.fuzzer.config.estimate import estimate
from gapfuzz.fuzzer.recipe import variant_id
from gapfuzz.results.catalog import Catalog
from gapfuzz.results.store import ResultsError
from gapfuzz.seeds import list_seeds
from gapfuzz.seeds.registry import source_of, width_params, width_points_of
from gapfuzz.seeds.sizes import DIMENSION_SIZES, WIDTHS, choose, choose_along, product_widths, width_order

log = logging.getLogger("gapfuzz.fuzzer")
MAX_COUNTED = 100  # width seeds counted on the meta device while planning (a tenth of a second to seconds each)
SEED_FAILURE = "seed"  # variant index used for the one record of a seed that failed before mutation
INTEGER_SIZED_VARIANTS = 2  # a rebuilt integer seed: the seed and a mutated variant at least


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


def with_sizes(c: Campaign, seed_ids: list[str], tick: Callable[[int, int], None] | None = None) -> list[str]:
    """Each seed followed by the seeds it is rebuilt at (``seeds.sizes``): ``sizes.per_seed`` of the sizes
    its source can rebuild it at (one from each band, drawn with the campaign seed), as many along the
    dimension its operator works along (``choose_along``: the largest size among them), and
    ``sizes.widths`` widths, handed out in ``width_order`` over the campaign's seeds of each source (a
    matrix product's first one a tail past 2048, ``product_widths``).
    Sizes and widths a seed cannot take are said (``_SizeNotes``, logged as a warning), never an error:
    every seed still runs at its own size. ``tick(done, total)`` hears each seed as it starts: a width is
    counted on a model built on the meta device, up to a second a seed."""
    out: list[str] = []
    order, handed = width_order(c.sizes.width_values), {}  # widths handed out so far, per source
    notes = _SizeNotes(c)
    for k, sid in enumerate(seed_ids):
        if tick is not None:
            tick(k, len(seed_ids))
        out.append(sid)
        if SeedId.parse(sid).rebuilt:
            continue
        source = source_of(sid)
        notes.seeds += 1
        if c.sizes.per_seed:
            points = source.size_points(sid, list(c.sizes.values))
            taken = [str(SeedId(sid, n)) for n in choose(points, c.sizes.per_seed, f"{c.seed}/{sid}")]
            along = source.along_points(sid, list(c.sizes.values))
            taken += [str(SeedId(sid, along=n)) for n in choose_along(along, c.sizes.per_seed, f"{c.seed}/{sid}/d")]
            notes.sizes(sid, points, along)
            out += taken
        points = set(width_points_of(sid, list(c.sizes.width_values))) if c.sizes.widths else set()
        if c.sizes.widths:
            notes.widths(sid, points)
        if points:
            start, tails_at = handed.get(source.name, (0, 0))
            product = source.contracts(sid)
            widths, start, after = product_widths(order, points, c.sizes.widths, start, tails_at if product else -1)
            handed[source.name] = (start, after if product else tails_at)
            wide = [str(SeedId(sid, width=w)) for w in widths]
            notes.past_cap(wide)
            out += wide
    for line in notes.lines():
        log.warning("note: %s", line)
    return out


def _few(names: list[str], n: int = 3) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def _seeds(n: int) -> str:
    return f"{n} seed{'s' * (n != 1)}"


class _SizeNotes:
    """What a campaign's size and width axes asked for and some seed cannot take, one line per kind."""

    def __init__(self, c: Campaign):
        self.c, self.seeds = c, 0
        self.no_size, self.own_sizes, self.no_width, self.some_widths = [], [], [], {}
        self.over_cap: dict[str, int] = {}  # a width seed past capture.max_params -> its parameters
        self.counted = 0

    def sizes(self, sid: str, points: list[int], along: list[int]) -> None:
        if not points and not along:
            self.no_size.append(sid)
        elif tuple(self.c.sizes.values) != DIMENSION_SIZES and not set(points) <= set(self.c.sizes.values):
            self.own_sizes.append(sid)

    def widths(self, sid: str, points: set[int]) -> None:
        refused = [w for w in self.c.sizes.width_values if w not in points]
        if not points:
            self.no_width.append(sid)
        elif refused:
            self.some_widths[sid] = refused

    def past_cap(self, wide: list[str]) -> None:
        """Width seeds past every built-in width (``WIDTHS``) counted on the meta device, at most
        ``MAX_COUNTED`` in a campaign: one past the parameter cap would be recorded as skipped, so it is said."""
        cap = self.c.capture.max_params
        for wsid in wide:
            if cap is None or SeedId.parse(wsid).width <= max(WIDTHS) or self.counted >= MAX_COUNTED:
                continue
            self.counted += 1
            params = width_params(wsid)
            if params is not None and params > cap:
                self.over_cap[wsid] = params

    def lines(self) -> list[str]:
        out, n = [], self.seeds
        if self.no_size:
            out.append(f"sizes.per_seed: {len(self.no_size)} of {_seeds(n)} take no other size ({_few(self.no_size)}): "
                       f"their source cannot rebuild them at one; they run at their own size")
        if self.own_sizes:
            out.append(f"sizes.values: {_seeds(len(self.own_sizes))} rebuilt at their source's own sizes (image "
                       f"sides, sequence lengths), not at sizes.values ({_few(self.own_sizes)})")
        if self.no_width:
            out.append(f"sizes.widths: {len(self.no_width)} of {_seeds(n)} take none of the widths "
                       f"{list(self.c.sizes.width_values)} ({_few(self.no_width)}); they run at their own width")
        if self.some_widths:
            shown = [f"{s}: not {', '.join(map(str, w))}" for s, w in self.some_widths.items()]
            out.append(f"sizes.width_values: {_seeds(len(shown))} cannot be rebuilt at some of these widths "
                       f"({_few(shown, 2)}); they take the others")
        if self.over_cap:
            shown = [f"{s}: {n:.2g} parameters" for s, n in self.over_cap.items()]
            out.append(f"sizes.width_values: {_seeds(len(shown))} at a width past capture.max_params "
                       f"{self.c.capture.max_params} ({_few(shown, 2)}); they are recorded as skipped")
        return out


def variant_count(c: Campaign, seed_id: str) -> int:
    """Variants per seed: ``variants.per_seed``, or ``sizes.variants`` for a seed rebuilt at a size or width,
    ``INTEGER_SIZED_VARIANTS`` at least for an integer one (``SeedSource.integer``): a lone integer operator
    is exact at any size; a fault past a size is in a chain (int16 ``abs`` then ``argmax``) a mutation builds."""
    if not SeedId.parse(seed_id).rebuilt:
        return c.variants.per_seed
    return rebuilt_variants(c, source_of(seed_id).integer(seed_id))


def rebuilt_variants(c: Campaign, integer: bool) -> int:
    wanted = max(c.sizes.variants, INTEGER_SIZED_VARIANTS) if integer and c.variants.mutators else c.sizes.variants
    return min(wanted, c.variants.per_seed)


def pair_counts(c: Campaign, seed_ids: list[str]) -> dict[tuple[str, str], int]:
    """(backend, mode) -> the (variant, backend) pairs a fresh campaign runs there, counted from the settings
    (each seed's variants, on each backend in each mode it runs in), not enumerated as ``plan`` does."""
    variants = sum(variant_count(c, s) for s in seed_ids)
    return {(s.name, str(mode)): variants for s in c.backends.all() for mode in c.modes if s.runs_in(mode)}


def planned_pairs(c: Campaign, seed_ids: list[str]) -> dict[tuple[str, str, str], int]:
    """(backend, mode, seed) -> the pairs a fresh campaign runs there (``pair_counts`` per seed)."""
    return {(s.name, str(mode), seed): variant_count(c, seed) for seed in seed_ids for s in c.backends.all()
            for mode in c.modes if s.runs_in(mode)}


def check_size(c: Campaign, seed_ids: list[str], at_least: bool = False) -> None:
    """Refuse a plan past ``MAX_PAIRS`` pairs or ``MAX_RUNS`` runs (``core.setting``), in one line, from its
    counts and before it is built: every count within its bound can still multiply into billions. ``at_least``:
    ``seed_ids`` before the sizes are added (``with_sizes``, which only adds), so the plan is at least this."""
    pairs = sum(pair_counts(c, seed_ids).values())
    runs = pairs * c.probes.per_variant
    if pairs <= MAX_PAIRS and runs <= MAX_RUNS:
        return
    more, n = "at least " if at_least else "", len(seed_ids)
    raise CampaignError(f"{c.source}: plans {more}{runs:,} runs ({more}{pairs:,} pairs of a variant and a backend, "
                        f"from {n:,} seed{'s' * (n != 1)}, x {c.probes.per_variant:,} probes); a campaign may plan at "
                        f"most {MAX_RUNS:,} runs and {MAX_PAIRS:,} pairs: select fewer seeds or lower "
                        f"variants.per_seed, probes.per_variant or sizes")


def sized_seeds(c: Campaign, seed_ids: list[str], tick: Callable[[int, int], None] | None = None) -> list[str]:
    """``with_sizes`` between two ``check_size``: a plan too large already is refused before its sizes are
    chosen (seconds a seed), one too large with them before it is built."""
    check_size(c, seed_ids, at_least=True)
    sized = with_sizes(c, seed_ids, tick)
    check_size(c, sized)
    return sized


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


def ready(release) -> str:
    """How ``release``'s environment stands in the cache (``workers.run.releases``), in words."""
    from gapfuzz.workers.run.releases import state

    found, instead = state(release)
    return {"cached": "is cached", "broken": f"is broken (it holds {instead}), will be made again"}.get(
        found, "will be made")


def plan_lines(c: Campaign, seed_ids: list[str]) -> list[str]:
    """What a campaign would run, for ``gapfuzz run --check``: its seeds and variants per mode, then the
    (variant, backend) pairs and the runs (a pair runs each of its probes) per backend and mode."""
    rebuilt = sum(SeedId.parse(s).rebuilt for s in seed_ids)
    lines = [f"{c.source}: valid; campaign {c.name!r}, writing to {c.output}/{c.name}",
             f"seeds: {len(seed_ids)} ({len(seed_ids) - rebuilt} selected, {rebuilt} rebuilt at another size or "
             f"width), in {', '.join(str(m) for m in c.modes)}"]
    for mode in c.modes:
        n = sum(variant_count(c, s) for s in seed_ids)
        lines.append(f"variants in {mode}: {n} (up to {c.variants.per_seed} a seed, {c.sizes.variants} a rebuilt one, "
                     f"{rebuilt_variants(c, True)} a rebuilt integer operator)")
    lines.append(f"a pair runs its variant's probes ({c.probes.per_variant} value probes), each timed "
                 f"{c.run.repeats} time(s) after its first call")
    rows = [(name, mode, pairs) for (name, mode), pairs in pair_counts(c, seed_ids).items() if pairs]
    width = max([len("backend"), *(len(r[0]) for r in rows)])
    lines.append(f"{'backend':<{width}}  {'mode':<10} {'pairs':>7} {'runs':>8}")
    lines += [f"{name:<{width}}  {mode:<10} {pairs:>7} {pairs * c.probes.per_variant:>8}" for name, mode, pairs in rows]
    total = sum(r[2] for r in rows)
    lines.append(f"{'total':<{width}}  {'':<10} {total:>7} {total * c.probes.per_variant:>8}")
    lines.append("runs: pairs x probes per variant (relation and layout probes come beside them); nothing was run")
    workers = c.pool("cpu").workers
    lines.append(estimate(planned_pairs(c, seed_ids), workers).line(workers))
    released: dict = {}
    for s in (s for s in c.backends.all() if s.pool != s.device):  # releases not installed
        released.setdefault(s.release, s)
    for r, s in released.items():
        lines.append(f"release {r}: runs in the image {s.image!r} (on nodes with podman)" if s.image else
                     f"release {r}: its environment {ready(r)} in {r.folder}")
    return lines
