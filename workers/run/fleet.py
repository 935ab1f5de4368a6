"""A campaign's workers, pool by pool: started, grown as nodes join, replaced as nodes go.

A pool asks for ``workers`` actors, or (``workers: auto``) for as many as the cluster can place:
on a cluster whose accelerator nodes come and go, each joining node's resource gets a worker
without restarting the campaign. Workers start in the background: the campaign runs on the ones
that are ready, and one Ray cannot place yet (a replacement while its node is down, an ``auto``
pool with no node at all) waits for a node without holding anything up. A pool that has had no
worker for ``STRANDED_S`` while work waits for it is an error the caller can report.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass

import ray

from gapfuzz.workers.run.dispatch import Dispatcher
from gapfuzz.workers.run.pool import AUTO, PoolSettings, RemotePoolWorker

GROW_EVERY_S = 5.0  # how often an auto pool looks for room on the cluster
GROW_AT_ONCE = 64  # workers an auto pool starts at one look (those the free resources hold)
START_GRACE_S = 60.0  # once every pool has a worker, how long the start waits for the rest
STRANDED_S = 600.0  # a pool with work and no worker this long: the campaign stops (resumable)
log = logging.getLogger("gapfuzz.workers")


def unplaceable(s: PoolSettings) -> str | None:
    """Why the cluster has nowhere for one worker of this pool (its resource on no node), None if it has."""
    have = ray.cluster_resources()
    for key, amount in s.resources_needed().items():
        if amount and have.get(key, 0) < amount:
            return f"the Ray cluster has no {key!r} resource for its workers (has: {', '.join(sorted(have))})"
    return None


@dataclass
class Starting:
    device: str
    actor: object
    since: float


class Fleet:
    def __init__(self, settings: dict[str, PoolSettings], dispatch: Dispatcher):
        self.settings = settings
        self.dispatch = dispatch
        self.pools: dict[str, list] = {d: [] for d in settings}  # ready actors
        self.starting: dict = {}  # ready() ObjectRef -> Starting
        self.started = Counter()  # actors started per pool (their index)
        self.lost = Counter()  # actors lost per pool
        self.empty_since: dict[str, float] = {}
        self.grown = 0.0

    # ------------------------------------------------------------------ start and grow
    def start(self, timeout_s: float = 600.0) -> None:
        """The first workers of every pool (device pools first: their nodes' CPUs are theirs), waited for."""
        for device in self._device_pools_first():
            s = self.settings[device]
            for _ in range(s.workers if s.workers != AUTO else max(1, self._room(s))):
                self._launch(device)
        t0 = time.monotonic()
        while self.starting and time.monotonic() - t0 < timeout_s:
            self._take(list(self.starting), timeout=1.0)
            fixed_pending = any(self.settings[st.device].workers != AUTO for st in self.starting.values())
            if all(self.pools.values()) and (not fixed_pending or time.monotonic() - t0 > START_GRACE_S):
                break  # every pool can run; the rest join as Ray places them
        empty = [d for d, actors in self.pools.items() if not actors]
        if empty:
            raise TimeoutError(f"pool {empty[0]}: no worker became ready in {timeout_s:.0f} s (is a node with its "
                               f"resource up?)")

    def _device_pools_first(self) -> list[str]:
        """Accelerator pools place their workers before the CPU pools: a joining GPU node's CPUs go to
        the worker that drives its GPU, not to CPU work that any node could do."""
        return sorted(self.settings, key=lambda d: self.settings[d].device == "cpu")

    def _launch(self, device: str) -> None:
        s = self.settings[device]
        actor = RemotePoolWorker.options(**s.actor_options()).remote(s.device, self.started[device], s.threads,
                                                                      s.memory_gb, s.env, s.gpus_per_worker, device)
        self.started[device] += 1
        self.starting[actor.ready.remote()] = Starting(device, actor, time.monotonic())

    def _room(self, s: PoolSettings) -> int:
        """How many more workers of this pool the cluster's free resources hold now."""
        free = ray.available_resources()
        need = s.resources_needed()
        return min((int(free.get(k, 0) // v) for k, v in need.items() if v), default=0)

    def poll(self) -> None:
        """Take the workers that have become ready; now and then, start as many more for an auto pool as
        the cluster's free resources hold (or one when it has none at all: it waits for a node)."""
        if self.starting:
            self._take(list(self.starting), timeout=0)
        now = time.monotonic()
        for device, actors in self.pools.items():
            if actors or any(s.device == device for s in self.starting.values()):
                self.empty_since.pop(device, None)
            else:
                self.empty_since.setdefault(device, now)
        if now - self.grown < GROW_EVERY_S:
            return
        self.grown = now
        for device in self._device_pools_first():
            s = self.settings[device]
            pending = any(st.device == device for st in self.starting.values())
            if s.device == "cpu" and any(self.settings[st.device].device != "cpu" and now - st.since < 2 * GROW_EVERY_S
                                       for st in self.starting.values()):
                break  # accelerator workers just started may be taking CPUs: counted at the next look
            if s.workers == AUTO and not pending:
                for _ in range(min(GROW_AT_ONCE, max(self._room(s), 0 if self.pools[device] else 1))):
                    self._launch(device)

    def _take(self, refs: list, timeout: float) -> None:
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        for ref in ready:
            st = self.starting.pop(ref)
            try:
                ray.get(ref)
            except ray.exceptions.RayError:  # died while starting (its node went): counted as lost
                self._gone(st.device, st.actor)
                continue
            self.pools[st.device].append(st.actor)
            self.dispatch.add([st.actor])

    # ------------------------------------------------------------------ losses
    def lose(self, actor) -> None:
        """A worker that died (its node went away): dropped, and replaced in a pool of fixed size."""
        device = next((d for d, actors in self.pools.items() if actor in actors), None)
        if device is None:
            return  # already dropped (several of its calls came back lost)
        self.pools[device].remove(actor)
        self.dispatch.drop(actor)
        try:
            ray.kill(actor, no_restart=True)
        except ray.exceptions.RayError:
            pass
        self._gone(device, actor)

    def _gone(self, device: str, actor) -> None:
        self.lost[device] += 1
        fixed = self.settings[device].workers != AUTO
        log.warning("pool %s: a worker was lost (its process or node died); its jobs run again%s", device,
                    ", on a worker started in its place" if fixed else "")
        if fixed:
            self._launch(device)  # waits for resources if its node is gone

    def stranded(self, devices) -> str | None:
        """A pool among ``devices`` (the ones work waits for) with no worker for STRANDED_S, if any."""
        now = time.monotonic()
        return next((d for d in devices if now - self.empty_since.get(d, now) > STRANDED_S), None)

    # ------------------------------------------------------------------ the whole fleet
    def actors(self) -> list:
        return [a for actors in self.pools.values() for a in actors]

    def wait(self, timeout: float) -> None:
        """Until a starting worker is ready, or ``timeout``."""
        if self.starting:
            ray.wait(list(self.starting), num_returns=1, timeout=timeout)
        else:
            time.sleep(timeout)
        self.poll()

    def waiting(self) -> list:
        """References that end when a starting worker is ready (to wait on with the calls in flight)."""
        return list(self.starting)

    def summary(self) -> dict:
        return {d: {"workers": len(self.pools[d]), "started": self.started[d], "lost": self.lost[d]}
                for d in self.settings}

    def stop(self, wait_s: float) -> None:
        """Shut every worker down at once; one still inside a run after ``wait_s`` is killed (its
        sandbox dies with it), as is every worker still starting."""
        for st in self.starting.values():
            ray.kill(st.actor, no_restart=True)
        self.starting.clear()
        actors = self.actors()
        calls = {a.shutdown.remote(): a for a in actors}
        _, late = ray.wait(list(calls), num_returns=len(calls), timeout=wait_s) if calls else ([], [])
        for ref in late:
            ray.kill(calls[ref], no_restart=True)
