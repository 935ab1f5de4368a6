"""Probes named by a record, checked before they are replayed: ``gapfuzz repro`` feeds a variant the
inputs its record's ``probe_recipe`` describes, and a value no probe of gapfuzz has (``special:banana``,
a resize to a billion elements) would fail deep in tensor code, or allocate without end, instead of
being one line naming the record's value and what is allowed.
"""
from __future__ import annotations

import json

from gapfuzz.core.registry import did_you_mean
from gapfuzz.workers.run.probes import KINDS, PROBE_KINDS, Probe
from gapfuzz.workers.run.probes import kind as kind_of
from gapfuzz.workers.run.probes.kinds.resized import MAX_RESIZE_LENGTH

__all__ = ["MAX_RESIZE_LENGTH", "checked_recipe", "name_problem", "probe_problem"]


def checked_recipe(text: str | None) -> Probe:
    """``Probe.from_recipe``, with its kind, every parameter and its seed checked: ``ValueError`` (one line
    naming the value and what is allowed) for one ``choose`` never makes."""
    d = json.loads(text or "{}")
    if not isinstance(d, dict):
        raise ValueError(f"a JSON object is expected, not {type(d).__name__}")
    seed = d.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 31:
        raise ValueError(f"seed {str(seed)[:40]!r} is not a probe's seed (a whole number from 0 to 2**31 - 1)")
    probe = Probe.from_recipe(text)
    problem = probe_problem(probe.kind, dict(probe.params))
    if problem:
        raise ValueError(problem)
    return probe


def _params(name: str) -> dict:
    """Each parameter of the kind and the values it takes (None: checked by the kind's ``problem``)."""
    return kind_of(name).params


def _kinds(name: str) -> str:
    return did_you_mean(name, list(KINDS)) if name else f" (kinds: {_shown(KINDS)})"


def _shown(values) -> str:
    return ", ".join(str(v) for v in values)


def _known(value, allowed) -> bool:
    return any(value == a and type(value) is type(a) for a in allowed)  # True is not 1, nor "True"


def probe_problem(kind, params: dict) -> str | None:
    """Why a recorded probe (a kind and its parameters) is not one ``choose`` makes, one line; None if it is."""
    if kind not in PROBE_KINDS:
        return f"no probe kind {str(kind)[:40]!r}{_kinds(str(kind))}"
    expected = _params(kind)
    for key, value in params.items():
        if key not in expected:
            return f"a {kind} probe takes no {str(key)[:40]!r} (it takes: {_shown(expected) or 'nothing'})"
        allowed = expected[key]
        if allowed is not None and not _known(value, allowed):
            return f"{str(value)[:40]!r} is not a {kind} probe's {key} ({key}s: {_shown(allowed)})"
    missing = [k for k in expected if k not in params]
    if missing:
        return f"a {kind} probe needs its {missing[0]}"
    return kind_of(kind).problem(params)


def name_problem(name: str) -> str | None:
    """Why a record's ``probe`` column (``Probe.name``: ``special:nan:row``) names no probe gapfuzz makes, one
    line; None if its kind is known and each part after it is a value one of the kind's parameters takes (older
    names left some out)."""
    kind, *values = str(name).split(":")
    shown = repr(str(name)[:60])
    if kind not in PROBE_KINDS:
        return f"probe {shown}: no probe kind {kind[:40]!r}{_kinds(kind)}"
    expected = _params(kind)
    if len(values) > len(expected):
        return f"probe {shown}: a {kind} probe has {len(expected)} part(s) after its kind, not {len(values)}"
    if any(allowed is None for allowed in expected.values()):
        return None  # a resize probe's positions and length: its recipe is checked
    for value in values:
        if not any(value in map(str, allowed) for allowed in expected.values()):
            known = "; ".join(f"{key}s: {_shown(allowed)}" for key, allowed in expected.items())
            return f"probe {shown}: {value[:40]!r} is no {kind} probe's value ({known})"
    return None
