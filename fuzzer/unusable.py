"""A stack that cannot run on a host says so once, and costs no more runs there.

A stack whose preparation kills its process (a signal, before any output) with one and the same
signature on variant after variant is broken on that host, not on a graph: AOTInductor's package
loader died in ``aoti_load_package`` on any package at all in one machine's image. Each further
variant would cost a crash, its re-run and a sandbox restart, find nothing new, and swell a crash
cluster that reads as a vendor finding. ``Unusable`` watches the records as they come back to the
driver (``fuzzer.schedule``): once a target's prepare has died with the same signature on
``THRESHOLD`` different variants on one host, that target is unusable on that host for the rest of
the campaign. The driver says so in one line; every pair of it still owed on that host gets a
``skipped`` record that says why (``core.failures.UNUSABLE``, with the crash's signature), so that
``--resume`` does not run it again and nothing goes missing. The crash records stay as written:
triage classes them "unusable here" (``analysis.clusters``), not a vendor finding, unless the same
signature shows on a second host or release.
"""
from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from dataclasses import dataclass

from gapfuzz.core.bugs import Stage, Status
from gapfuzz.core.failures import UNUSABLE, Failure
from gapfuzz.results.schema import RunRecord

THRESHOLD = 3  # different variants whose prepare died alike on one host
PREPARE_FRAME = " in _prepared\n"  # faulthandler's line for ``workers.run.backend_run._prepared``: died preparing
log = logging.getLogger("gapfuzz.fuzzer")


@dataclass(frozen=True)
class Mark:
    """A target unusable on a host: the crash that made it so, and the variants it was seen on."""

    backend: str
    host: str
    signature: str
    cause: str
    version: str
    variants: tuple[str, ...]

    def line(self) -> str:
        cause = self.cause.split(":")[-1] if self.cause else "a crash"
        return (f"{self.backend}: every prepare dies with {cause} on host {self.host} here "
                f"({len(self.variants)} variants); its remaining runs on this host are skipped")

    def failure(self, under_way: bool = False) -> Failure:
        """A skipped pair's failure columns; ``under_way``: a run already sent when the mark was made,
        which died the same way."""
        why = f"{self.line()} (seen on {', '.join(self.variants)})"
        if under_way:
            why = f"died the same way, already under way when it was marked: {why}"
        return Failure(Status.SKIPPED, Stage.COMPILE, UNUSABLE, why, self.cause)


def died_preparing(r: RunRecord) -> bool:
    """A crash (a signal) inside the stack's prepare, that its re-run did not contradict."""
    return r.status == Status.CRASH and r.reproducible is not False and PREPARE_FRAME in (r.message or "")


class Unusable:
    """The marks of one session: per target and host, the variants whose prepare died alike (``see``),
    and whether a target may still run on a worker's host (``marked``)."""

    def __init__(self, targets, threshold: int = THRESHOLD):
        self.targets, self.threshold = set(targets), threshold
        self.seen: dict[tuple, set[str]] = defaultdict(set)  # (backend, host, signature) -> variants
        self.marks: dict[tuple[str, str], Mark] = {}  # (backend, host) -> its mark
        self.hosts: dict = {}  # actor -> its host, from the records it sent

    def marked(self, actor, backend: str) -> Mark | None:
        """The mark that says ``backend`` cannot run on ``actor``'s host, if one does."""
        host = self.hosts.get(actor)
        return None if host is None else self.marks.get((backend, host))

    def see(self, actor, records: list[RunRecord]) -> list[RunRecord]:
        """Learn from one call's records; a crash like the mark's of a run that was under way when its
        target was marked becomes a skipped record (the class has its crashes already). Returns the
        records to keep."""
        kept = []
        for r in records:
            if r.host:
                self.hosts[actor] = r.host
            mark = self.marks.get((r.backend, r.host))
            if mark is not None and died_preparing(r) and r.signature == mark.signature:
                kept.append(skipped_like(r, mark, under_way=True))
                continue
            kept.append(r)
            if mark is None and r.backend in self.targets and died_preparing(r):
                self._count(r)
        return kept

    def _count(self, r: RunRecord) -> None:
        variants = self.seen[(r.backend, r.host, r.signature)]
        variants.add(r.variant_id)
        if len(variants) >= self.threshold:
            mark = Mark(r.backend, r.host, r.signature or "", r.cause or "", r.backend_version,
                        tuple(sorted(variants)))
            self.marks[(r.backend, r.host)] = mark
            log.warning(mark.line())


def skipped_like(r: RunRecord, mark: Mark, under_way: bool = False) -> RunRecord:
    """``r`` (a record with its variant's columns) as a pair skipped for ``mark``: the crash's signature,
    host and release, so that triage can tell which crashes made the mark."""
    out = dataclasses.replace(r, host=mark.host, backend_version=mark.version, reproducible=None)
    mark.failure(under_way).onto(out)
    out.signature = mark.signature
    return out
