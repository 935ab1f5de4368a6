"""A campaign's backends and pools, resolved once: which backends run here, on which device
kinds, with which pool settings, and whether the machine or the cluster has room for them.

A backend that is not available here is an error, or left out with a warning when the campaign
says ``skip_unavailable`` (never the reference or the oracle); so is a device kind the cluster has
no node for. The driver reads the result and never the raw campaign again.
"""
from __future__ import annotations

import logging
import os
import shutil
import sys
from dataclasses import replace

from gapfuzz.fuzzer.config.campaign import Campaign, CampaignError, manifest_of
from gapfuzz.results.manifest import RunManifest
from gapfuzz.workers.run.fleet import unplaceable
from gapfuzz.workers.run.pool import AUTO, PoolSettings, connect, read_gpus
from gapfuzz.workers.run.registry import POOL_MARK, unavailable_in
from gapfuzz.workers.run.releases import ReleaseError, environment, runtime_env

log = logging.getLogger("gapfuzz.fuzzer")
BUILD_DEVICE = "cpu"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Pools:
    def __init__(self, campaign: Campaign):
        self.c = campaign
        self.specs = {s.name: s for s in campaign.backends.all()}
        self.reference = campaign.reference.name
        self.oracle = campaign.oracle.name if campaign.oracle else None
        self.home = campaign.reference.pool  # where the reference runs: every variant's first pool
        self.settings: dict[str, PoolSettings] = {p: self._settings(p) for p in self.names}
        self.released = False  # whether each release's pool has its runtime environment (``releases``)

    @property
    def names(self) -> list[str]:
        """The pools, the reference's first: one per device kind, and one per release not installed here."""
        return sorted({s.pool for s in self.specs.values()} | {BUILD_DEVICE}, key=lambda d: (d != self.home, d))

    def _settings(self, pool: str) -> PoolSettings:
        """A pool's settings: its device's (``pools:`` of the campaign), named after it."""
        return replace(self.c.pool(pool.partition(POOL_MARK)[0]), name=pool)

    def releases(self, here: bool, say=None) -> None:
        """Each release's pool in its Ray runtime environment: on this machine an environment made (or found)
        here, its stack checked there; on a cluster, Ray's own from the same pins on each node (or the
        target's image). A release that cannot be had is one line naming it, before any work."""
        for name, pool in self.settings.items():
            spec = next((s for s in self.specs.values() if s.pool == name != s.device), None)
            if spec is None:
                continue
            python = None
            if here and spec.image and not shutil.which("podman"):  # Ray's image_uri: its workers start in podman
                raise CampaignError(f"{self.c.source}: backend {spec.name}: its release runs in the image "
                                    f"{spec.image!r}, and this machine has no podman to run it (images are for a "
                                    f"cluster whose nodes have podman: give --address; or leave 'images' out)")
            if here and not spec.image:
                try:
                    python = environment(spec.release, say).python
                except ReleaseError as e:
                    raise CampaignError(f"{self.c.source}: backend {spec.name}: {e}") from None
                for other in (s for s in self.specs.values() if s.pool == name):
                    why = unavailable_in(python, other)
                    if why:
                        raise CampaignError(f"{self.c.source}: backend {other.name} is not available in the "
                                            f"environment of {spec.release}: {why}")
            try:
                self.settings[name] = replace(pool, runtime_env=runtime_env(spec.release, python, spec.image,
                                                                           spec.device))
            except ReleaseError as e:
                raise CampaignError(f"{self.c.source}: backend {spec.name}: {e}") from None
        self.released = True

    def check_available(self) -> None:
        """Each backend can run on this machine (a cluster's are checked by its nodes)."""
        for spec in list(self.specs.values()):
            why = spec.unavailable_reason()
            if why and self.c.backends.skip_unavailable and spec.name not in (self.reference, self.oracle):
                log.warning("skipping backend %s: %s", spec.name, why)
                del self.specs[spec.name]
            elif why:
                raise CampaignError(f"{self.c.source}: backend {spec.name} is not available here: {why}")
        if len(self.specs) <= 1 + (self.oracle is not None):
            raise CampaignError(f"{self.c.source}: no target backend is available here")
        self.settings = {d: s for d, s in self.settings.items() if d in self.names}
        self.releases(here=True, say=_say)

    def connect(self, address: str | None) -> bool:
        """Join the campaign's Ray cluster, or start an embedded one sized for the pools; True when started."""
        import ray

        if ray.is_initialized():
            return False
        if not self.released:  # a driver used without check_available (a notebook, a test)
            self.releases(here=not address, say=_say)
        if not address:
            self._size_for_this_machine()
        cpus = sum(((os.cpu_count() or 1) if p.workers == AUTO else p.workers) * p.cpus_per_worker
                   for p in self.settings.values())
        return connect(address, self.c.num_cpus or max(os.cpu_count() or 1, int(cpus + 0.999)))

    def _size_for_this_machine(self) -> None:
        """A CUDA pool of ``workers: auto`` on this machine alone: as many warm workers as its GPUs' free memory
        and its cores hold (``PoolSettings.on_one_machine``), unless the campaign gives ``gpus_per_worker``."""
        s = self.settings.get("cuda")
        if s is None or s.workers != AUTO or "gpus_per_worker" in self.c.config["pools"].get("cuda", {}):
            return
        free = [g.free_gb for g in read_gpus() if g.free_gb is not None]
        self.settings["cuda"] = s.on_one_machine(os.cpu_count() or 1, free)
        if free:
            log.info("pool cuda: %d warm worker(s) for %d GPU(s) (%.0f GiB free on the fullest, %d cores)",
                     self.settings["cuda"].workers, len(free), min(free), os.cpu_count() or 1)

    def drop_absent(self) -> list[str]:
        """With ``skip_unavailable``, leave out each device kind the cluster has no node for, and its
        backends (a cluster campaign names every kind; each cluster has some). The backends left out."""
        if not self.c.backends.skip_unavailable:
            return []
        dropped = []
        for d in [d for d in self.names if d not in (self.home, BUILD_DEVICE)]:
            why = unplaceable(self.settings[d])
            if why:
                names = [n for n, spec in self.specs.items() if spec.pool == d]
                log.warning("skipping pool %s and its backends %s: %s", d, ", ".join(names), why)
                for n in names:
                    del self.specs[n]
                del self.settings[d]
                dropped += names
        return dropped

    def check_resources(self) -> None:
        """A pool of fixed size needs its resource now; an ``auto`` one may wait for an autoscaler's node."""
        for s in self.settings.values():
            why = unplaceable(s)
            if why and s.workers != AUTO:
                raise CampaignError(f"pool {s.device}: {why}")

    def manifest(self) -> RunManifest:
        """What analysis reads of this run (``run.json``): the backends as resolved here."""
        return manifest_of(self.c, list(self.specs.values()))

    def targets_on(self, device: str) -> list[str]:
        return [n for n, s in self.specs.items() if s.pool == device]
