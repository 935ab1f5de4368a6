"""Seed sources register here with a decorator; ids are listed without building anything."""
from __future__ import annotations

import fnmatch

from gapfuzz.core.ids import SeedId
from gapfuzz.core.registry import Registry

from .errors import SeedError
from .sizes import check_runs
from .spec import BuiltSeed


class SeedSource:
    """One library of architectures. ``prefix`` starts every id it owns."""

    name = ""
    prefix = ""

    def list_ids(self) -> list[str]:
        raise NotImplementedError

    def build(self, seed_id: str) -> BuiltSeed:
        raise NotImplementedError

    def size_points(self, seed_id: str, dimension_sizes: list[int]) -> list[int]:
        """The sizes ``seed_id`` can be rebuilt at, as ``<id>@<n>`` (see ``seeds.sizes``); none
        unless the source says otherwise. ``dimension_sizes`` is the campaign's list of lengths
        along a dimension, for sources whose size is one."""
        return []

    def along_points(self, seed_id: str, dimension_sizes: list[int]) -> list[int]:
        """The lengths ``seed_id`` can be rebuilt at along the dimension its operator works along, as
        ``<id>@d<n>``, when that is not the one ``size_points`` changes; none unless the source has one."""
        return []

    def width_points(self, seed_id: str, widths: list[int]) -> list[int]:
        """The widths ``seed_id`` can be rebuilt at, as ``<id>@w<n>``, out of the campaign's ``widths``;
        none unless the source can change a width."""
        return []

    def integer(self, seed_id: str) -> bool:
        """Whether the seed computes on integer or boolean tensors (an operator seed of such a dtype): at
        another size it gets a mutated variant too (``fuzzer.config.plan.variant_count``)."""
        return False

    def contracts(self, seed_id: str) -> bool:
        """Whether the seed's width is a matrix product's contraction (an operator seed of ``mm``,
        ``bmm``, ``einsum``, ...): its first width is then a tail past 2048 (``sizes.product_widths``)."""
        return False

    def width_params(self, seed_id: str) -> int | None:
        """The parameter count of a seed rebuilt at a width, counted on the meta device (no weights),
        so one past the cap is refused before gigabytes are drawn; None if the source cannot tell."""
        return None


SOURCES: Registry[SeedSource] = Registry("seed source", "gapfuzz.seeds.sources",
                                         ("timm", "torchvision", "transformers", "ops"), "gapfuzz.seeds", SeedError)
register_source = SOURCES.register
_instances: dict[str, SeedSource] = {}


def source_names() -> list[str]:
    return SOURCES.names()


def get_source(name: str) -> SeedSource:
    if name not in _instances:
        _instances[name] = SOURCES.get(name)()
    return _instances[name]


def _prefixes() -> dict[str, str]:
    return {cls.prefix: name for name, cls in SOURCES}


def source_of(seed_id: str) -> SeedSource:
    prefix, prefixes = SeedId.parse(seed_id).source, _prefixes()
    if prefix not in prefixes:
        raise SeedError(f"seed id {seed_id!r} has no known source prefix ({', '.join(sorted(prefixes))})")
    return get_source(prefixes[prefix])


def list_seeds(filter: str | list[str] | None = None, source: str | None = None,
               exclude: str | list[str] | None = None) -> list[str]:
    """Seed ids, optionally restricted to a source and to glob patterns (matched on the full id
    and on the id without its source prefix, so both 'timm/test_*' and 'test_*' work)."""
    inc = [filter] if isinstance(filter, str) else (filter or [])
    names = [source] if source else source_names()
    prefixes, known = {p.split("/", 1)[0] for p in inc if "/" in p}, _prefixes()
    if not source and inc and all("/" in p for p in inc) and prefixes <= set(known):
        names = sorted({known[p] for p in prefixes})  # 'timm/res*' needs only timm's listing
    ids = [i for n in names for i in get_source(n).list_ids()]
    exc = [exclude] if isinstance(exclude, str) else (exclude or [])

    def hit(seed_id, patterns):
        short = SeedId.parse(seed_id).name
        return any(fnmatch.fnmatchcase(seed_id, p) or fnmatch.fnmatchcase(short, p) for p in patterns)

    if inc:
        ids = [i for i in ids if hit(i, inc)]
    if exc:
        ids = [i for i in ids if not hit(i, exc)]
    return ids


def create_seed(seed_id: str) -> BuiltSeed:
    """The built seed; one rebuilt at a size or width (``<id>@<n>``, ``<id>@w<n>``, ``<id>@d<n>``) is run once in eager
    first, so a size its layers do not fit is a ``SizeError`` (skipped), never a capture failure."""
    built = source_of(seed_id).build(seed_id)
    sized = SeedId.parse(seed_id)
    if not sized.rebuilt:
        return built
    return check_runs(built, sized.shown)


def width_points_of(seed_id: str, widths: list[int]) -> list[int]:
    """The widths of ``widths`` that ``seed_id`` can be rebuilt at (``SeedSource.width_points``). A source
    may answer for the whole list at once and refuse it for its largest width (a model that cannot be
    built that wide): then the smallest is asked alone and, where it is taken, each of the others, so
    one width too large for a model costs that width and not the whole axis."""
    source, asked = source_of(seed_id), sorted(set(widths))
    points = source.width_points(seed_id, asked)
    if not asked or len(set(points)) == len(asked) or (not points and not source.width_points(seed_id, asked[:1])):
        return sorted(set(points))
    return [w for w in asked if w in points or source.width_points(seed_id, [w])]


def width_params(seed_id: str) -> int | None:
    """``SeedSource.width_params`` of a seed rebuilt at a width; None for any other seed, or on an
    unknown id (the build says what is wrong)."""
    try:
        return source_of(seed_id).width_params(seed_id) if SeedId.parse(seed_id).width is not None else None
    except Exception:  # noqa: BLE001 - counting is an optimisation; the build reports the problem
        return None
