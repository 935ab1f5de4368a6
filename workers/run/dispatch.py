"""The one dispatch loop: calls in flight on Ray actors, a bounded number per actor, and what ended.

A campaign (builds on the CPU pool, runs on every device's pool) and a seed scan (one function
over many seeds) both keep their workers busy through a ``Dispatcher``: submit a call with the
job it belongs to, ask for an idle actor, and collect ``Done`` items as calls finish. A call
whose actor died, or whose inputs died with another node's objects, comes back with ``lost`` set
instead of a value (``actor_died`` tells which); the caller decides whether to run it again.
Every call that has ended is collected in one wait, so the driver's cost per call does not grow
with the number of calls in flight.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import ray

MAX_INFLIGHT = 2  # per worker: one running, one queued behind it


@dataclass
class Done:
    job: object  # what the caller submitted the call for
    actor: object
    value: object = None
    # the actor or the call's inputs died (not a backend fault: the sandbox isolates those)
    lost: Exception | None = None
    actor_died: bool = False  # lost because the actor itself died (its node went away, or its process did)
    again: bool = True  # a lost call worth running again (not one Ray failed for a reason of its own)


class Dispatcher:
    def __init__(self, max_inflight: int = MAX_INFLIGHT):
        self.max_inflight = max_inflight
        self.load: dict = {}  # actor -> calls in flight
        self.inflight: dict = {}  # ObjectRef -> (job, actor)

    def add(self, actors: Iterable) -> None:
        for a in actors:
            self.load.setdefault(a, 0)

    def idle(self, actors: Iterable, prefer=None):
        """The least loaded of ``actors`` with room, ``prefer`` among equals; None when all are full."""
        best = min(actors, key=lambda a: (self.load[a], a is not prefer), default=None)
        return best if best is not None and self.load[best] < self.max_inflight else None

    def submit(self, ref, actor, job) -> None:
        self.inflight[ref] = (job, actor)
        self.load[actor] += 1

    def __bool__(self) -> bool:
        return bool(self.inflight)

    def busy(self) -> list:
        """The actors with a call in flight."""
        return [a for a, n in self.load.items() if n > 0]

    def drop(self, actor) -> None:
        """An actor that is gone: no more calls go to it (its calls in flight still end, as lost)."""
        self.load.pop(actor, None)

    def wait(self, timeout: float = 1.0, also: list | None = None) -> list[Done]:
        """Every call that has ended, waiting up to ``timeout`` for the first (or for one of ``also``:
        other references the caller waits on, such as workers starting)."""
        if not self.inflight:
            return []
        refs = list(self.inflight)
        ready, _ = ray.wait(refs + (also or []), num_returns=1, timeout=timeout)
        if ready:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        out = []
        for ref in ready:
            job, actor = self.inflight.pop(ref)
            if actor in self.load:
                self.load[actor] -= 1
            try:
                out.append(Done(job, actor, ray.get(ref)))
            except (ray.exceptions.RayActorError, ray.exceptions.OutOfMemoryError) as e:
                # OutOfMemoryError: Ray's memory monitor killed the worker (the node ran low, not the sandbox);
                # a RayTaskError is raised inside the worker, which lives (another actor it called died)
                died = not isinstance(e, ray.exceptions.RayTaskError)
                out.append(Done(job, actor, lost=e, actor_died=died))
            except ray.exceptions.ObjectLostError as e:  # an input lived on (or was owned by) a node that is gone
                out.append(Done(job, actor, lost=e))
            except ray.exceptions.RayError as e:  # Ray itself failed this call (an argument it could not read):
                out.append(Done(job, actor, lost=e, again=False))  # recorded, not run again
        return out
