"""Drive a campaign on Ray: builds on the CPU pool, runs on each backend's device pool.

Read top-down: ``run`` plans what is still to do, starts Ray and the pools, and loops; the loop
fills idle workers (``_fill``: a seed build, or a built variant's next pool) and hands what ends
to ``_built`` (a ``SeedBuild``: variants to run, or one failure record) or ``_ran`` (the
``RunOutcome``s of one pool: records). Per variant, the pool of the reference runs first
(reference, oracle and that pool's targets, compared in place); other pools get the reference
outputs through the object store. Scheduling is the ``Dispatcher``'s, writing the ``RecordSink``'s.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import ray

from core.bugs import Stage, Status, bug_key_list
from workers.align import AlignLedger
from workers.dispatch import Dispatcher, Done
from workers.messages import CallReply, JudgeSettings, RunRequest
from workers.outcome import RunOutcome
from workers.pool import PoolSettings, connect, start_pool

from .campaign import Campaign, CampaignError
from .generate import build_seed_variants
from .guidance import Feedback
from .messages import BuildRequest, BuiltVariant, SeedBuild
from .plan import SeedWork, plan, seed_failure_id, select_seeds, with_sizes
from .progress import Progress
from .records import catalog_row, run_record, seed_failure_record
from .session import SessionStats
from .sink import RecordSink

log = logging.getLogger("gapfuzz.fuzzer")
BUILD_DEVICE = "cpu"


@dataclass
class VariantWork:
    """A built variant on its way through the pools that still owe it runs."""

    build: SeedBuild
    variant: BuiltVariant
    payload: object  # ObjectRef
    missing: set[str]  # backends still to run
    devices: deque = field(default_factory=deque)  # pools still to run, home pool first
    home: object = None  # ObjectRef to the reference/oracle outputs
    builder: object = None  # the worker that built it: it runs it without a transfer


class Driver:
    def __init__(self, campaign: Campaign, run_dir: Path, address: str | None = None, progress: bool = True):
        self.c, self.run_dir, self.address = campaign, Path(run_dir), address or campaign.address
        self.specs = {s.name: s for s in campaign.backends.all()}
        self.ref_name = campaign.reference.name
        self.oracle_name = campaign.oracle.name if campaign.oracle else None
        self.home = campaign.reference.device
        self.progress = Progress(0, unit="pairs", enabled=progress)  # (variant, backend) pairs: a pair runs all its probes
        self.stats = SessionStats(self.run_dir)
        self.sink = RecordSink(self.run_dir, campaign.run.flush_every, self.progress, self.stats)
        self.feedback = Feedback(campaign.variants.mutators)
        self.dispatch = Dispatcher()
        self.pools: dict[str, list] = {}
        self.judge: JudgeSettings | None = None  # made once Ray runs (its ledger is an actor)
        self.started_ray = False
        self.seeds_total = self.seeds_done = self.variants_done = 0

    @property
    def devices(self) -> list[str]:
        """The device kinds with a pool, the reference's first."""
        return sorted({s.device for s in self.specs.values()} | {BUILD_DEVICE}, key=lambda d: (d != self.home, d))

    def check_available(self) -> None:
        """Unavailable backends are an error, or dropped with a warning when the campaign says so."""
        for spec in list(self.specs.values()):
            why = spec.unavailable_reason()
            if why and self.c.backends.skip_unavailable and spec.name not in (self.ref_name, self.oracle_name):
                log.warning("skipping backend %s: %s", spec.name, why)
                del self.specs[spec.name]
            elif why:
                raise CampaignError(f"{self.c.source}: backend {spec.name} is not available here: {why}")
        if len(self.specs) <= 1 + (self.c.oracle is not None):
            raise CampaignError(f"{self.c.source}: no target backend is available here")

    # ------------------------------------------------------------------ the campaign
    def run(self, seed_ids: list[str] | None = None) -> None:
        seed_ids = with_sizes(self.c, select_seeds(self.c) if seed_ids is None else seed_ids)
        work = plan(self.c, seed_ids, self.sink.store.done_keys(), list(self.specs))
        self.progress.total = sum(len(m) for w in work for m in w.missing.values())
        self.seeds_total, self.seeds_done = len(seed_ids), len(seed_ids) - len(work)
        if not work:
            return
        t0 = time.monotonic()
        self.connect()
        cut_short = True
        try:
            self._start_pools()
            self.stats["start_s"] = time.monotonic() - t0  # Ray and warm workers, before the first build
            self._loop(deque(work))
            cut_short = False
        finally:
            self.sink.flush()
            self.progress.close()
            self._finish(wait_s=2.0 if cut_short else 10.0)

    def connect(self) -> None:
        """Join the campaign's Ray cluster, or start an embedded one sized for the pools."""
        if not ray.is_initialized():
            cpus = sum(self.c.pool(d).workers * self.c.pool(d).cpus_per_worker for d in self.devices)
            self.started_ray = connect(self.address, self.c.num_cpus or max(os.cpu_count() or 1, int(cpus + 0.999)))

    def _start_pools(self) -> None:
        c = self.c
        ledger = ray.remote(num_cpus=0)(AlignLedger).remote() if c.compare.align_scope == "seed" else None
        self.judge = JudgeSettings(self.ref_name, self.oracle_name, c.run.timeout_s, c.run.repeats,
                                   c.run.retry_faults, c.compare.settings, c.compare.detection_adapter,
                                   c.compare.align, ledger, c.probes, c.compare.explain)
        for device in self.devices:
            settings = c.pool(device)
            self._check_resources(settings)
            self.pools[device] = start_pool(settings)
            self.dispatch.add(self.pools[device])

    def _check_resources(self, s: PoolSettings) -> None:
        have = ray.cluster_resources()
        opts = s.actor_options()
        need = {"CPU": opts["num_cpus"], "GPU": opts.get("num_gpus", 0), **opts.get("resources", {})}
        for key, amount in need.items():
            if amount and have.get(key, 0) < amount:
                raise CampaignError(f"pool {s.device}: the Ray cluster has no {key!r} resource for its workers "
                                    f"(has: {', '.join(sorted(have))})")

    def _loop(self, builds: deque) -> None:
        ready: deque[VariantWork] = deque()
        while builds or ready or self.dispatch:
            self._fill(builds, ready)
            if not self.dispatch:
                break
            for done in self.dispatch.wait():
                if done.lost is not None:
                    self._replace(done.actor)
                if isinstance(done.job, SeedWork):
                    self.seeds_done += 1
                    ready.extend(self._built(done))
                else:
                    self._ran(done.job, done)
                    self._next_pool(done.job, ready)
            self.progress.context = f"seeds {self.seeds_done}/{self.seeds_total}  variants {self.variants_done}"
            self.progress.update()
            self.stats.poll(self._actors())

    def _fill(self, builds: deque, ready: deque) -> None:
        """Give every idle worker work: a ready variant's next pool, else (CPU) the next seed's build."""
        progress = True
        while progress:
            progress = False
            for vw in list(ready):
                device = vw.devices[0]
                actor = self.dispatch.idle(self.pools[device], vw.builder)
                if actor is not None and actor is not vw.builder and builds and device == BUILD_DEVICE and \
                        vw.builder in self.dispatch.load:
                    continue  # its builder runs it with no transfer; a free worker builds the next seed
                if actor is not None:
                    ready.remove(vw)
                    self._submit_run(actor, vw)
                    progress = True
            actor = self.dispatch.idle(self.pools[BUILD_DEVICE])
            waiting = any(vw.devices[0] == BUILD_DEVICE and vw.builder is actor for vw in ready)
            if builds and actor is not None and not waiting:
                self._submit_build(actor, builds.popleft())
                progress = True

    def _submit_build(self, actor, work: SeedWork) -> None:
        v = self.c.variants
        request = BuildRequest(work.seed_id, work.indices, v, self.c.seed, self.c.capture.max_params,
                               None if v.guidance == "uniform" else self.feedback.snapshot(v.guidance),
                               self.c.capture.cache)
        ref = actor.call.remote(build_seed_variants, request, timeout=self.c.capture.timeout_s, keep_payloads=True)
        self.dispatch.submit(ref, actor, work)

    def _submit_run(self, actor, vw: VariantWork) -> None:
        device = vw.devices[0]
        home_runs = (self.ref_name, self.oracle_name) if device == self.home else ()
        specs = [s for n, s in self.specs.items() if s.device == device and (n in vw.missing or n in home_runs)]
        seed = vw.build.seed
        request = RunRequest(vw.variant.variant_id, vw.build.seed_id, vw.payload, specs, self.judge,
                             seed.output_kind if seed else "tensor", vw.variant.output_names)
        outcomes, home = actor.run_variant.options(num_returns=2).remote(request, vw.home)
        if device == self.home:
            vw.home = home
        self.dispatch.submit(outcomes, actor, vw)

    # ------------------------------------------------------------------ what came back
    def _built(self, done: Done) -> list[VariantWork]:
        work: SeedWork = done.job
        reply: CallReply | None = done.value
        build = SeedBuild.from_reply(work.seed_id, reply, done.lost)
        self.sink.catalog_row(catalog_row(build))
        if not build.ok:
            rec = seed_failure_record(self.c.name, build, self.ref_name, self.home, seed_failure_id(work.seed_id))
            self.sink.records([rec])
            self.progress.total -= sum(len(m) for m in work.missing.values()) - 1
            return []
        self.stats["builds"].append({"seed_id": build.seed_id, "capture_s": build.capture_s, "build_s": build.build_s,
                                     "tried": build.tried, "rejected": build.rejected})
        out = []
        for v in build.variants:
            missing = work.missing.get(v.index, set())
            devices = deque(d for d in self.devices if d == self.home or any(self.specs[n].device == d for n in missing))
            payload = build.payloads.pop(v.variant_id)  # each variant holds its own payload, freed when it is done
            out.append(VariantWork(build, v, payload, missing, devices, builder=done.actor))
        return out

    def _ran(self, vw: VariantWork, done: Done) -> None:
        if done.lost is not None:  # the worker died (not a backend fault: the sandbox isolates those)
            outcomes = [RunOutcome(backend=n, stack=s.stack, device=s.device, status=Status.ERROR, stage=Stage.RUN,
                                   error_type="WorkerLost", message=str(done.lost)[:2000])
                        for n, s in self.specs.items() if s.device == vw.devices[0] and n in vw.missing]
        else:
            outcomes = done.value
        recs = [run_record(self.c.name, vw.build, vw.variant, o) for o in outcomes if o.backend in vw.missing]
        self.sink.records(recs)
        targets = [r for r in recs if r.backend not in (self.ref_name, self.oracle_name)]
        if targets and self.c.variants.guidance != "uniform":
            keys = bug_key_list([vars(r) for r in targets])
            self.feedback.update(vw.variant.recipe.mutations, vw.variant.ops,
                                 [(r.backend, r.status, k.id if k else None) for r, k in zip(targets, keys)])

    def _next_pool(self, vw: VariantWork, ready: deque) -> None:
        vw.devices.popleft()
        if vw.devices:
            ready.appendleft(vw)
        else:
            self.variants_done += 1

    def _replace(self, actor) -> None:
        """A fresh worker in place of one whose actor died."""
        device = next(d for d, actors in self.pools.items() if actor in actors)
        ray.kill(actor, no_restart=True)
        fresh = start_pool(dataclasses.replace(self.c.pool(device), workers=1))[0]
        self.pools[device] = [fresh if a is actor else a for a in self.pools[device]]
        self.dispatch.replace(actor, fresh)

    def _actors(self) -> list:
        return [a for actors in self.pools.values() for a in actors]

    def _finish(self, wait_s: float) -> None:
        """Stop the workers, all at once. A worker still inside a run (after Ctrl-C or an error) would
        answer only when that run ends: it is killed after ``wait_s``, and its sandbox dies with it."""
        actors = self._actors()
        self.stats.finish(actors, timeout=wait_s)
        calls = {a.shutdown.remote(): a for a in actors}
        _, late = ray.wait(list(calls), num_returns=len(calls), timeout=wait_s) if calls else ([], [])
        for ref in late:
            ray.kill(calls[ref], no_restart=True)
        if self.started_ray:
            ray.shutdown()
