"""Mutation operators: registered plug-ins, each a pass over a variant's graph.

List them with ``gapfuzz mutators``; select them in a campaign with names or globs.
"""
from __future__ import annotations

import fnmatch
import importlib

from workers.registry import import_plugins

from .base import Mutator, MutatorError, Rejected

_MUTATORS: dict[str, type] = {}
_BUILTIN = ("activation", "insert_unary", "structure", "substitution", "injection", "numeric", "precision",
            "semantic")
_loaded = False


def register_mutator(cls):
    if not cls.name or not cls.family:
        raise MutatorError(f"mutator {cls.__qualname__} needs a name and a family")
    _MUTATORS[cls.name] = cls
    return cls


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for mod in _BUILTIN:
            importlib.import_module(f"{__name__}.{mod}")
        import_plugins()


def list_mutators(filter: str | None = None) -> list[str]:
    _load()
    return sorted(n for n in _MUTATORS if filter is None or fnmatch.fnmatchcase(n, filter))


def get_mutator(name: str) -> Mutator:
    _load()
    if name not in _MUTATORS:
        raise MutatorError(f"unknown mutator {name!r} (see 'gapfuzz mutators')")
    return _MUTATORS[name]()


def resolve_mutators(include: list[str], exclude: list[str] | None = None) -> list[str]:
    """Names matching any include glob and no exclude glob; a glob matching nothing is an error."""
    names = list_mutators()
    chosen = []
    for pattern in include:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern) or _MUTATORS[n].family == pattern]
        if not hits:
            raise MutatorError(f"no mutator matches {pattern!r} (see 'gapfuzz mutators')")
        chosen += [h for h in hits if h not in chosen]
    for pattern in exclude or []:
        chosen = [n for n in chosen if not (fnmatch.fnmatchcase(n, pattern) or _MUTATORS[n].family == pattern)]
    return chosen


def mutator_table() -> list[tuple[str, str, bool, str]]:
    _load()
    return [(n, c.family, c.preserves_semantics, (c.__doc__ or "").strip().splitlines()[0])
            for n, c in sorted(_MUTATORS.items(), key=lambda kv: (kv[1].family, kv[0]))]


__all__ = ["Mutator", "MutatorError", "Rejected", "get_mutator", "list_mutators", "mutator_table",
           "register_mutator", "resolve_mutators"]
