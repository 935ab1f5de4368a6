"""Probe kinds, registered as mutators and backends are: a kind is one class in one module of
``probes/kinds/`` (found there, no list to extend), or a plug-in's (``GAPFUZZ_PLUGINS``, entry points
``gapfuzz.probes``)."""
from __future__ import annotations

import importlib
import pkgutil

from gapfuzz.core.registry import Registry
from gapfuzz.workers.run.probes import kinds as _kinds
from gapfuzz.workers.run.probes.base import SHOWN, ProbeKind, ProbeKindError


def _declared(cls) -> None:
    if cls.counted and not (cls.rounds and cls.needs):
        raise ProbeKindError(f"probe kind {cls.name!r} is counted: it needs its rounds and the role it needs")
    if any(not isinstance(values, (tuple, type(None))) for values in cls.params.values()):
        raise ProbeKindError(f"probe kind {cls.name!r}: each parameter takes a tuple of values, or None")
    SHOWN[cls.name] = cls().shown_params  # what its probes' names show (base.Probe.name)


BUILTIN = tuple(sorted(m.name for m in pkgutil.iter_modules(_kinds.__path__)))
PROBE_KINDS: Registry[ProbeKind] = Registry("probe kind", _kinds.__name__, BUILTIN, "gapfuzz.probes", ProbeKindError,
                                            check=_declared)
for _module in BUILTIN:  # the built-in kinds, now: KINDS is a constant campaigns are checked against
    importlib.import_module(f"{_kinds.__name__}.{_module}")


_BUILT_IN = dict(PROBE_KINDS._table)  # read before any plug-in: loading those waits for the first lookup


def ordered(names) -> tuple[str, ...]:
    return tuple(sorted(names, key=lambda n: ((_BUILT_IN.get(n) or PROBE_KINDS.get(n)).order, n)))


KINDS = ordered(_BUILT_IN)  # the built-in kinds, the example first
DEFAULT_KINDS = KINDS  # layouts as each stack takes them; a list of the campaign's own naming layout: all, everywhere


def kind(name: str) -> ProbeKind:
    """The kind's class, as an instance (kinds hold no state); "did you mean" for a wrong name."""
    return PROBE_KINDS.get(name)()


def all_kinds() -> list[ProbeKind]:
    """Every kind, plug-ins' included, in their order."""
    return [kind(n) for n in ordered(PROBE_KINDS.names())]


def counted_rounds() -> list[tuple[ProbeKind, dict]]:
    """The counted kinds' probes in the order ``choose`` takes them: each round, the next of every kind."""
    counted = [k for k in all_kinds() if k.counted]
    depth = max((len(k.rounds) for k in counted), default=0)
    return [(k, params) for r in range(depth) for k in counted if r < len(k.rounds) for params in k.rounds[r]]


COUNTED = tuple(n for n in KINDS if n == "example" or _BUILT_IN[n].counted)  # what ``per_variant`` counts
BESIDE = tuple(k for k in KINDS if k not in COUNTED)  # each on some graphs only
