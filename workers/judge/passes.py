"""Post-run analyses as passes, run in order by one small manager (in the spirit of torch.fx's PassManager).

Each analysis that reads a judged run and adds to its record (an explanation, a location, a culprit)
says once what it applies to (the verdicts, run modes and settings switch, and any other condition on
a run such as its stack) and which record columns it writes. A new analysis is then one ``Pass`` in a
list, not a flag tested inline; its columns are checked when the list is made (no two passes own a
column; a pass revises only a column that an earlier pass, or the run itself, wrote) and when it runs
(a pass that writes a column it did not declare is a bug, reported as one). A pass that runs in the
sandbox names its ``stage`` of a pair's wall budget (``workers.run.budget``): a run whose pair is over its
budget is left out of it, and its ``note`` column, if it has one, says so.
"""
from __future__ import annotations

import dataclasses
import difflib
import time
from dataclasses import dataclass
from typing import Callable

from gapfuzz.results.schema import RunRecord

COLUMNS = tuple(f.name for f in dataclasses.fields(RunRecord))


def _column(name: str, where: str) -> str:
    if name not in COLUMNS:
        near = difflib.get_close_matches(name, COLUMNS, n=1)
        raise ValueError(f"{where}: {name!r} is not a record column" + (f"; did you mean {near[0]!r}?" if near else ""))
    return name


@dataclass(frozen=True)
class Pass:
    """One analysis: ``run(context, runs)`` on the runs its precondition admits, writing ``owns`` (columns
    it is the first to write) and ``revises`` (columns an earlier pass or the run wrote, that it may change).

    The precondition: ``flag`` names the settings field that switches it on; ``modes`` the run modes
    (``core.modes.Mode``) it applies to; ``verdicts`` the verdicts of the runs it takes; ``when(context,
    run)`` any other condition on a run (its stack, a column an earlier pass left empty). None: any.

    ``stage``: the pair's budget stage it runs in (None: it costs no sandbox time); ``note``: one of its
    columns, where a run left out for its pair's budget says why."""

    name: str
    run: Callable
    owns: tuple = ()
    revises: tuple = ()
    verdicts: frozenset | None = None
    modes: frozenset | None = None
    flag: str | None = None
    when: Callable | None = None
    stage: str | None = None
    note: str | None = None

    def __post_init__(self):
        for field in ("owns", "revises"):
            names = tuple(_column(c, f"pass {self.name!r} {field}") for c in getattr(self, field))
            object.__setattr__(self, field, names)
        if self.note is not None and self.note not in self.writes:
            raise ValueError(f"pass {self.name!r} notes in column {self.note!r}, which it neither owns nor revises")
        for field in ("verdicts", "modes"):
            if getattr(self, field) is not None:
                object.__setattr__(self, field, frozenset(getattr(self, field)))

    @property
    def writes(self) -> frozenset:
        return frozenset(self.owns) | frozenset(self.revises)

    def enabled(self, context) -> bool:
        """Whether the pass applies to this context at all: its settings switch, its modes."""
        return (self.flag is None or bool(getattr(context.settings, self.flag))) and \
            (self.modes is None or context.mode in self.modes)

    def admits(self, context, run: RunRecord) -> bool:
        return (self.verdicts is None or run.verdict in self.verdicts) and \
            (self.when is None or bool(self.when(context, run)))


class PassManager:
    """Passes run in the order given, each on the runs it admits, skipped when it is off or admits none.

    ``given``: columns the run itself wrote, which a pass may revise; ``after``: a manager whose passes
    run before this one's (their columns count as owned)."""

    def __init__(self, passes, given: tuple = (), after: PassManager | None = None):
        self.passes = tuple(passes)
        self.owner: dict[str, str] = dict(after.owner) if after is not None else {}
        self.owner.update({_column(c, "given"): "the run" for c in given if c not in self.owner})
        names = set(after.names) if after is not None else set()
        later = {c: p.name for p in reversed(self.passes) for c in p.owns}
        for p in self.passes:
            if p.name in names:
                raise ValueError(f"two passes are named {p.name!r}")
            names.add(p.name)
            for c in p.owns:
                if c in self.owner:
                    raise ValueError(f"pass {p.name!r} owns column {c!r}, which {self.owner[c]} owns already")
            for c in p.revises:
                if c not in self.owner:
                    why = f"pass {later[c]!r} owns it, after" if c in later else "no pass owns it"
                    raise ValueError(f"pass {p.name!r} revises column {c!r} before anything wrote it ({why})")
            self.owner.update(dict.fromkeys(p.owns, f"pass {p.name!r}"))
        self.names = tuple(sorted(names))

    def run(self, context, runs: list) -> dict[str, float]:
        """Each enabled pass on the ``runs`` it admits, in order; the seconds each one that ran took. A pass
        with a ``stage`` admits no run whose pair is over its budget (``context.budget``, if it has one)."""
        seconds = {}
        budget = getattr(context, "budget", None)
        for p in self.passes:
            if not p.enabled(context):
                continue
            admitted = [o for o in runs if p.admits(context, o)]
            if budget is not None and p.stage is not None:
                admitted = _within(p, admitted, budget)
            if not admitted:
                continue
            before = [dict(o.__dict__) for o in runs]
            t0 = time.perf_counter()
            p.run(context, admitted)
            seconds[p.name] = time.perf_counter() - t0
            _check_writes(p, runs, before)
        return seconds


def _within(p: Pass, runs: list, budget) -> list:
    """The runs whose pair has budget left; each of the others says why it is left out, in ``p.note``."""
    late = [o for o in runs if budget.over(o.backend)]
    if p.note is not None:
        for o in late:
            setattr(o, p.note, budget.why(o.backend))
    return [o for o in runs if o not in late]


def _check_writes(p: Pass, runs: list, before: list[dict]) -> None:
    """A pass that changed a column it did not declare."""
    for o, was in zip(runs, before):
        wrote = {k for k, v in o.__dict__.items() if v is not was.get(k) and v != was.get(k)}
        if wrote - p.writes:
            raise RuntimeError(f"pass {p.name!r} wrote {sorted(wrote - p.writes)} on {o.backend} "
                               f"probe {o.probe}, which it does not declare (owns or revises)")
