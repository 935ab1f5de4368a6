"""The one job loop on Ray: keep every worker busy, collect what ends, run a lost job again.

A campaign (seed builds and variant runs over several pools) and a seed scan (one function over
many seeds) differ only in their ``Jobs``: what to submit to an idle worker, what to do with an
answer, and how to queue a lost job again. The loop is the same: submit, wait, hand each answer
over, retry a job lost with its worker up to ``MAX_LOST`` times (after that its loss is its
answer), stop with ``Stranded`` when work waits on a pool that has had no worker for
``fleet.STRANDED_S``, and refresh the progress line, with what the busy workers are doing (``Watch``).
With a deadline (a campaign's time budget) it starts nothing after it and leaves the rest for a resume.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Protocol

import ray

from gapfuzz.workers.run.dispatch import Dispatcher, Done
from gapfuzz.workers.run.fleet import STRANDED_S, Fleet

MAX_LOST = 3  # times one job may be lost with a worker before its loss is recorded
WATCH_EVERY_S = 5.0  # how often the busy workers are asked what they are doing (one small call each)
GRACE_S = 60.0  # past a campaign's time budget, how long the jobs running may take to end before they are left


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


class Watch:
    """What each busy worker is doing (``PoolWorker.doing``, answered beside its run), asked every ``every_s``
    and read without waiting, for the progress line's oldest running pair."""

    def __init__(self, every_s: float = WATCH_EVERY_S):
        self.every_s = every_s
        self.asked: dict = {}  # ObjectRef -> actor
        self.answers: dict = {}  # actor -> (its answer, time.monotonic() when read)
        self.last = float("-inf")

    def poll(self, busy: list) -> list[dict]:
        """The latest answers of the ``busy`` actors, their ages as of now; asks again when due (an answer that
        has not come in three rounds is given up: its actor is gone or starting)."""
        now = time.monotonic()
        if self.asked:
            ready, _ = ray.wait(list(self.asked), num_returns=len(self.asked), timeout=0)
            for ref in ready:
                actor = self.asked.pop(ref)
                try:
                    self.answers[actor] = (ray.get(ref), now)
                except ray.exceptions.RayError:
                    self.answers.pop(actor, None)
            if now - self.last > 3 * self.every_s:
                self.asked.clear()
        if not self.asked and now - self.last >= self.every_s:
            self.last = now
            self.asked = {a.doing.remote(): a for a in busy if hasattr(a, "doing")}
        self.answers = {a: got for a, got in self.answers.items() if a in busy}
        return [{**d, "age_s": d["age_s"] + now - at} for d, at in self.answers.values() if d]


class JobLoop:
    def __init__(self, fleet: Fleet, dispatch: Dispatcher, progress=None, on_tick=None, max_lost: int = MAX_LOST):
        self.fleet, self.dispatch, self.progress, self.on_tick = fleet, dispatch, progress, on_tick
        self.max_lost = max_lost
        self.lost: Counter = Counter()  # job key -> times lost
        self.retried = 0
        self.watch = Watch()

    def run(self, jobs: Jobs, deadline: float | None = None, grace_s: float = GRACE_S) -> bool:
        """Run ``jobs`` to the end; True. With a ``deadline`` (``time.monotonic()``), no job starts after it,
        those running get ``grace_s`` more to end, and the rest are left for a resume: False."""
        while jobs.needs() or self.dispatch:
            self.fleet.poll()
            late = deadline is not None and time.monotonic() >= deadline
            if late and (not self.dispatch or time.monotonic() >= deadline + grace_s):
                return False
            if not late:
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
                if getattr(self.progress, "enabled", True):
                    self.progress.running = self.watch.poll(self.dispatch.busy())
                self.progress.update()
        return True

    def _wait_for_workers(self, needed: set[str]) -> None:
        """Nothing in flight and work waiting: its pools have no worker now (their nodes are gone).
        Wait for one to start, up to ``STRANDED_S``; then stop, resumable, with nothing lost."""
        stranded = self.fleet.stranded(needed)
        if stranded:
            raise Stranded(f"pool {stranded}: no worker for {STRANDED_S:.0f} s (are its nodes gone?); "
                           f"the records so far are kept, resume once it has nodes again")
        self.fleet.wait(timeout=1.0)
