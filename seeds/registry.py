"""Seed sources register here with a decorator; ids are listed without building anything."""
from __future__ import annotations

import fnmatch
import importlib

from workers.registry import import_plugins

from .spec import BuiltSeed

_SOURCES: dict[str, type] = {}
_PREFIX: dict[str, str] = {}


class SeedError(LookupError):
    """An unknown seed id or source (bad input: one clear line)."""


class SeedSource:
    """One library of architectures. ``prefix`` starts every id it owns."""

    name = ""
    prefix = ""

    def list_ids(self) -> list[str]:
        raise NotImplementedError

    def build(self, seed_id: str) -> BuiltSeed:
        raise NotImplementedError


def register_source(cls):
    _SOURCES[cls.name] = cls
    _PREFIX[cls.prefix] = cls.name
    return cls


_BUILTIN = ("timm", "torchvision", "transformers", "ops")
_instances: dict[str, SeedSource] = {}


def _load_builtins() -> None:
    for mod in _BUILTIN:
        importlib.import_module(f"seeds.sources.{mod}")
    import_plugins()


def source_names() -> list[str]:
    _load_builtins()
    return sorted(_SOURCES)


def get_source(name: str) -> SeedSource:
    _load_builtins()
    if name not in _SOURCES:
        raise SeedError(f"unknown seed source {name!r} (known: {', '.join(sorted(_SOURCES))})")
    if name not in _instances:
        _instances[name] = _SOURCES[name]()
    return _instances[name]


def source_of(seed_id: str) -> SeedSource:
    _load_builtins()
    prefix = seed_id.split("/", 1)[0]
    if prefix not in _PREFIX:
        raise SeedError(f"seed id {seed_id!r} has no known source prefix ({', '.join(sorted(_PREFIX))})")
    return get_source(_PREFIX[prefix])


def list_seeds(filter: str | list[str] | None = None, source: str | None = None,
               exclude: str | list[str] | None = None) -> list[str]:
    """Seed ids, optionally restricted to a source and to glob patterns (matched on the full id
    and on the id without its source prefix, so both 'timm/test_*' and 'test_*' work)."""
    inc = [filter] if isinstance(filter, str) else (filter or [])
    names = [source] if source else source_names()
    prefixes = {p.split("/", 1)[0] for p in inc if "/" in p}
    if not source and inc and all("/" in p for p in inc) and prefixes <= set(_PREFIX):
        names = sorted({_PREFIX[p] for p in prefixes})  # 'timm/res*' needs only timm's listing
    ids = [i for n in names for i in get_source(n).list_ids()]
    exc = [exclude] if isinstance(exclude, str) else (exclude or [])

    def hit(seed_id, patterns):
        short = seed_id.split("/", 1)[1] if "/" in seed_id else seed_id
        return any(fnmatch.fnmatchcase(seed_id, p) or fnmatch.fnmatchcase(short, p) for p in patterns)

    if inc:
        ids = [i for i in ids if hit(i, inc)]
    if exc:
        ids = [i for i in ids if not hit(i, exc)]
    return ids


def create_seed(seed_id: str) -> BuiltSeed:
    return source_of(seed_id).build(seed_id)
