"""Mutation operators: registered plug-ins, each a pass over a variant's graph.

List them with ``gapfuzz mutators``; select them in a campaign with names or globs.
"""
from __future__ import annotations

import fnmatch

from gapfuzz.core.registry import Registry
from gapfuzz.fuzzer.mutators.base import Mutator, MutatorError, Rejected


def _has_family(cls) -> None:
    if not cls.family:
        raise MutatorError(f"mutator {cls.__qualname__} needs a name and a family")


MUTATORS: Registry[Mutator] = Registry(
    "mutator", __name__, ("activation", "insert_unary", "structure", "substitution", "injection", "numeric",
                          "precision", "semantic", "data_dependent", "chain"),
    "gapfuzz.mutators", MutatorError, check=_has_family)
register_mutator = MUTATORS.register


def list_mutators(filter: str | None = None) -> list[str]:
    return MUTATORS.names(filter)


def get_mutator(name: str) -> Mutator:
    return MUTATORS.get(name)()


def resolve_mutators(include: list[str], exclude: list[str] | None = None) -> list[str]:
    """Names matching any include glob and no exclude glob; a glob matching nothing is an error."""
    names = list_mutators()
    chosen = []
    for pattern in include:
        hits = [n for n in names if fnmatch.fnmatchcase(n, pattern) or MUTATORS.get(n).family == pattern]
        if not hits:
            raise MutatorError(f"no mutator matches {pattern!r} (see 'gapfuzz mutators')")
        chosen += [h for h in hits if h not in chosen]
    for pattern in exclude or []:
        chosen = [n for n in chosen if not (fnmatch.fnmatchcase(n, pattern) or MUTATORS.get(n).family == pattern)]
    return chosen


def mutator_table() -> list[tuple[str, str, bool, str]]:
    return [(n, c.family, c.preserves_semantics, (c.__doc__ or "").strip().splitlines()[0])
            for n, c in sorted(MUTATORS, key=lambda kv: (kv[1].family, kv[0]))]


__all__ = ["MUTATORS", "Mutator", "MutatorError", "Rejected", "get_mutator", "list_mutators", "mutator_table",
           "register_mutator", "resolve_mutators"]
