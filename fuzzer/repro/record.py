"""The record a reproduction reads, as a ``RunRecord``, and the one error a reproduction stops with.

A representative comes out of its run folder as triage reads it: a row of the record's columns and
what triage derived of them (``dtype_specific``, which its bug key reads). A run from an older schema
lacks later columns, and a test gives only a few: either reads with the record's defaults. A nested
column that is not what gapfuzz writes there (a torn or foreign record) is one ``ReproError`` line
naming the run and the column.
"""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import Callable, Mapping

from gapfuzz.core.bugs import BugKey, bug_key
from gapfuzz.results.columns import NESTED, decode
from gapfuzz.results.schema import RunRecord

# the columns a record has no default for; a row without one (a test's few columns) has it as None
REQUIRED = tuple(f.name for f in dataclasses.fields(RunRecord)
                 if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
PARSE_ERRORS = (ValueError, KeyError, TypeError, AttributeError)  # what reading a value no writer made raises


class ReproError(ValueError):
    """A cluster that cannot be minimised or explained, for a reason a person can act on (one line).
    ``stage``: the stage of the reproduction it stopped (``fuzzer.repro.replayed.stage``)."""

    stage = ""


def record_of(row: RunRecord | Mapping) -> RunRecord:
    """``row`` (a triage row, an older run's, a test's mapping) as a typed record: a missing or null column
    takes the record's default; a nested column that does not read is a ``ReproError`` naming it."""
    if isinstance(row, RunRecord):
        return row
    given = {k: v for k, v in row.items() if not missing(v)}
    who = f"{given.get('variant_id')} on {given.get('backend')}"
    for name in NESTED:  # each read on its own first, so that a torn one is named
        if name in given:
            _parse(who, name, given[name], partial(decode, name))
    return _parse(who, "columns", given, lambda g: RunRecord.from_row({**dict.fromkeys(REQUIRED), **g}))


def bug_of(row: RunRecord | Mapping) -> BugKey | None:
    """The bug a record shows; of a triage row, with what triage derived for its key (``dtype_specific``)."""
    return bug_key(row.key_fields() if isinstance(row, RunRecord) else row)


def parsed(record: RunRecord, name: str, parse: Callable):
    """``parse`` of the record's column ``name`` (JSON text a recipe or probe is read from): a value that is
    not what gapfuzz writes there is one ``ReproError`` line naming the run and the column."""
    return _parse(f"{record.variant_id} on {record.backend}", name, getattr(record, name), parse)


def _parse(who: str, name: str, value, parse: Callable):
    try:
        return parse(value)
    except PARSE_ERRORS as e:
        detail = " ".join(str(e).split())[:160]
        raise ReproError(f"{who}: its record's {name} is not what gapfuzz writes there "
                         f"({type(e).__name__}: {detail})") from None


def missing(v) -> bool:
    """None, NaN and pandas' NA: a column a row has no value in."""
    if v is None:
        return True
    try:
        return bool(v != v)
    except (TypeError, ValueError):  # an array's comparison is an array: a value
        return False
