"""The one job loop on Ray: keep every worker busy, collect what ends, run a lost job again.

A campaign (seed builds and variant runs over several pools) and a seed scan (one function over
many seeds) differ only in their ``Jobs``: what to submit to an idle worker, what to do with an
answer, and how to queue a lost job again. The loop is the same: submit, wait, hand each answer
over, retry a job lost with its worker up to ``MAX_LOST`` times (after that its loss is its
answer), stop with ``Stranded`` when work waits on a pool that has had no worker for
``fleet.STRANDED_S``, and refresh the progress line.
"""
from __future__ import annotations

from collections import Counter
from typing import Protocol

from gapfuzz.workers.run.dispatch import Dispatcher, Done
from gapfuzz.workers.run.fleet import STRANDED_S, Fleet

MAX_LOST = 3  # times one job may be lost with a worker before its loss is recorded


class Stranded(RuntimeError):
    """Work waits for a pool whose workers are all gone (its nodes left the cluster)."""


class Jobs(Protocol):
    def fill(self, dispatch: Dispatcher) -> None:
        """Submit work to idle workers (``dispatch.idle``, ``dispatch.submit``)."""

    def needs(self) -> set[str]:
        """The device kinds whose pools queued work waits for; empty when nothing is queued."""

    def finished(self, done: Done) -> None:
        """A job's answer (or, lost too often or for good, its loss)."""

    def again(self, done: Done) -> None:
        """Queue a job lost with its worker again."""

    def key(self, job) -> str:
        """What counts a job's losses (a seed id, a variant id)."""


class JobLoop:
    def __init__(self, fleet: Fleet, dispatch: Dispatcher, progress=None, on_tick=None, max_lost: int = MAX_LOST):
        self.fleet, self.dispatch, self.progress, self.on_tick = fleet, dispatch, progress, on_tick
        self.max_lost = max_lost
        self.lost: Counter = Counter()  # job key -> times lost
        self.retried = 0

    def run(self, jobs: Jobs) -> None:
        while jobs.needs() or self.dispatch:
            self.fleet.poll()
            jobs.fill(self.dispatch)
            if not self.dispatch:
                self._wait_for_workers(jobs.needs())
                continue
            for done in self.dispatch.wait(also=self.fleet.waiting()):
                if done.actor_died:
                    self.fleet.lose(done.actor)
                if done.lost is not None and done.again and self.lost[jobs.key(done.job)] < self.max_lost:
                    self.lost[jobs.key(done.job)] += 1
                    self.retried += 1
                    jobs.again(done)
                else:
                    jobs.finished(done)
            if self.on_tick is not None:
                self.on_tick()
            if self.progress is not None:
                self.progress.update()

    def _wait_for_workers(self, needed: set[str]) -> None:
        """Nothing in flight and work waiting: its pools have no worker now (their nodes are gone).
        Wait for one to start, up to ``STRANDED_S``; then stop, resumable, with nothing lost."""
        stranded = self.fleet.stranded(needed)
        if stranded:
            raise Stranded(f"pool {stranded}: no worker for {STRANDED_S:.0f} s (are its nodes gone?); "
                           f"the records so far are kept, resume once it has nodes again")
        self.fleet.wait(timeout=1.0)
