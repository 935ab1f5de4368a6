"""Drive a campaign on Ray: builds on the CPU pool, runs on each backend's device pool.

Read top-down: ``run`` plans what is still to do, starts Ray and the pools, and loops; the loop
fills idle workers (``_fill``: a seed build, or a built variant's next pool) and hands what ends
to ``_built`` (a ``SeedBuild``: variants to run, or one failure record) or ``_ran`` (the
``RunOutcome``s of one pool: records). Per variant, the pool of the reference runs first
(reference, oracle and that pool's targets, compared in place); other pools get the reference
outputs through the object store. Scheduling is the ``Dispatcher``'s, the workers the ``Fleet``'s
(grown as nodes join, replaced as they go), writing the ``RecordSink``'s.

A call lost with its worker's node is run again, not recorded: on another worker of the pool when
only the worker died, or built again from its recipe when its inputs died too (a variant is
reproducible from its recipe); only a job lost ``MAX_LOST`` times becomes a ``WorkerLost`` record.
"""
from __future__ import annotations

import logging
import os
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from analysis.folder import Folder
from core.bugs import Stage, Status, bug_key_list
from workers.align import AlignLedger
from workers.dispatch import Dispatcher, Done
from workers.fleet import STRANDED_S, Fleet, unplaceable
from workers.messages import CallReply, JudgeSettings, RunRequest
from workers.outcome import RunOutcome
from workers.pool import AUTO, PoolSettings, connect

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
MAX_LOST = 3  # times one build or variant may be lost with a node before it is recorded as lost
BACKLOG_PER_WORKER = 4  # built variants waiting for a pool, per worker, before builds pause for the slowest pool


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
    def __init__(self, campaign: Campaign, run_dir: str | Path | Folder, address: str | None = None,
                 progress: bool = True):
        self.c, self.address = campaign, address or campaign.address
        self.run_dir = run_dir if isinstance(run_dir, Folder) else Folder(run_dir)  # local, or any pyarrow filesystem
        self.specs = {s.name: s for s in campaign.backends.all()}
        self.ref_name = campaign.reference.name
        self.oracle_name = campaign.oracle.name if campaign.oracle else None
        self.home = campaign.reference.device
        self.progress = Progress(0, unit="pairs", enabled=progress)  # (variant, backend) pairs: a pair runs all its probes
        self.stats = SessionStats(self.run_dir)
        self.sink = RecordSink(self.run_dir, campaign.run.flush_every, self.progress, self.stats)
        self.feedback = Feedback(campaign.variants.mutators)
        self.dispatch = Dispatcher()
        self.fleet: Fleet | None = None
        self.lost: Counter = Counter()  # seed or variant id -> times lost with a worker
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
        self.seeds_total = len(seed_ids) * len(self.c.modes)  # a seed is built once per mode
        self.seeds_done = self.seeds_total - len(work)
        if not work:
            return
        t0 = time.monotonic()
        self.connect()
        work = self._without_absent_pools(work)
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
            pools = [self.c.pool(d) for d in self.devices]
            cpus = sum(((os.cpu_count() or 1) if p.workers == AUTO else p.workers) * p.cpus_per_worker for p in pools)
            self.started_ray = connect(self.address, self.c.num_cpus or max(os.cpu_count() or 1, int(cpus + 0.999)))

    def _start_pools(self) -> None:
        c = self.c
        ledger = None
        if c.compare.align_scope == "seed":  # on the driver's node: it lives as long as the campaign does
            here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
            ledger = ray.remote(num_cpus=0)(AlignLedger).options(scheduling_strategy=here).remote()
        self.judge = JudgeSettings(self.ref_name, self.oracle_name, c.run.timeout_s, c.run.repeats,
                                   c.run.retry_faults, c.compare.settings, c.compare.detection_adapter,
                                   c.compare.align, ledger, c.probes, c.compare.explain, c.compare.bisect,
                                   c.compare.bisect_budget_s)
        settings = {device: c.pool(device) for device in self.devices}
        for s in settings.values():
            self._check_resources(s)
        self.fleet = Fleet(settings, self.dispatch)
        try:
            self.fleet.start()
        except TimeoutError as e:
            raise CampaignError(str(e)) from None

    def _without_absent_pools(self, work: list[SeedWork]) -> list[SeedWork]:
        """With ``skip_unavailable``, a device kind the cluster has no node for is left out, its backends
        with it (a cluster campaign names every kind; each cluster has some)."""
        if not self.c.backends.skip_unavailable:
            return work
        absent = {d for d in self.devices if d not in (self.home, BUILD_DEVICE) and unplaceable(self.c.pool(d))}
        for d in sorted(absent):
            names = [n for n, spec in self.specs.items() if spec.device == d]
            log.warning("skipping pool %s and its backends %s: %s", d, ", ".join(names), unplaceable(self.c.pool(d)))
            for n in names:
                del self.specs[n]
        for w in work:
            w.missing = {i: {n for n in m if n in self.specs} for i, m in w.missing.items()}
            w.missing = {i: m for i, m in w.missing.items() if m}
            w.indices = sorted(w.missing)
        work = [w for w in work if w.missing]
        self.progress.total = sum(len(m) for w in work for m in w.missing.values())
        return work

    def _check_resources(self, s: PoolSettings) -> None:
        """A pool of fixed size needs its resource now; an ``auto`` one may wait for an autoscaler's node."""
        why = unplaceable(s)
        if why and s.workers != AUTO:
            raise CampaignError(f"pool {s.device}: {why}")

    def _loop(self, builds: deque) -> None:
        ready: deque[VariantWork] = deque()
        while builds or ready or self.dispatch:
            self.fleet.poll()
            self._fill(builds, ready)
            if not self.dispatch:
                self._wait_for_workers(builds, ready)
                continue
            for done in self.dispatch.wait(also=self.fleet.waiting()):
                if done.actor_died:
                    self.fleet.lose(done.actor)
                if done.lost is not None and done.again and self._again(done, builds, ready):
                    continue
                if isinstance(done.job, SeedWork):
                    self.seeds_done += not done.job.again
                    ready.extend(self._built(done))
                else:
                    self._ran(done.job, done)
                    self._next_pool(done.job, ready)
            self.progress.context = f"seeds {self.seeds_done}/{self.seeds_total}  variants {self.variants_done}"
            self.progress.update()
            self.stats.poll(self.fleet.actors())

    def _wait_for_workers(self, builds: deque, ready: deque) -> None:
        """Nothing in flight and work waiting: its pools have no worker now (their nodes are gone).
        Wait for one to start, up to ``STRANDED_S``; then stop, resumable, with nothing lost."""
        needed = {vw.devices[0] for vw in ready} | ({BUILD_DEVICE} if builds else set())
        stranded = self.fleet.stranded(needed)
        if stranded:
            raise CampaignError(f"pool {stranded}: no worker for {STRANDED_S:.0f} s (are its nodes gone?); "
                                f"the records so far are kept, resume once it has nodes again")
        self.fleet.wait(timeout=1.0)

    def _again(self, done: Done, builds: deque, ready: deque) -> bool:
        """Queue a job lost with a worker again (see the module docstring); False once it was lost too often."""
        job = done.job
        key = job.seed_id if isinstance(job, SeedWork) else job.variant.variant_id
        self.lost[key] += 1
        if self.lost[key] > MAX_LOST:
            return False
        self.stats["lost"] += 1
        if isinstance(job, SeedWork):
            builds.appendleft(job)
        elif done.actor_died:  # its payload and reference outputs are in the object store still
            job.builder = None
            ready.appendleft(job)
        else:  # its inputs went with a node: built again from the recipe, for the backends it still owes
            self.stats["rebuilt"] += 1
            index = job.variant.index
            owed = {n for n in job.missing if self.specs[n].device in job.devices}
            builds.appendleft(SeedWork(job.build.seed_id, [index], {index: owed}, again=True, mode=job.variant.mode))
        return True

    def _fill(self, builds: deque, ready: deque) -> None:
        """Give every idle worker work: a ready variant's next pool, else (CPU) the next seed's build, unless
        built variants already wait for a slower pool (their payloads would pile up in the object store)."""
        backlog_limit = BACKLOG_PER_WORKER * max(1, len(self.fleet.actors()))
        progress = True
        while progress:
            progress = False
            for vw in list(ready):
                device = vw.devices[0]
                actor = self.dispatch.idle(self.fleet.pools[device], vw.builder)
                if actor is not None and actor is not vw.builder and builds and device == BUILD_DEVICE and \
                        vw.builder in self.dispatch.load:
                    continue  # its builder runs it with no transfer; a free worker builds the next seed
                if actor is not None:
                    ready.remove(vw)
                    self._submit_run(actor, vw)
                    progress = True
            actor = self.dispatch.idle(self.fleet.pools[BUILD_DEVICE])
            waiting = any(vw.devices[0] == BUILD_DEVICE and vw.builder is actor for vw in ready)
            if builds and actor is not None and not waiting and len(ready) < backlog_limit:
                self._submit_build(actor, builds.popleft())
                progress = True

    def _submit_build(self, actor, work: SeedWork) -> None:
        v = self.c.variants
        request = BuildRequest(work.seed_id, work.indices, v, self.c.seed, self.c.capture.max_params,
                               None if v.guidance == "uniform" else self.feedback.snapshot(v.guidance),
                               self.c.capture.cache, work.mode, self.c.train_layers)
        ref = actor.call.remote(build_seed_variants, request, timeout=self.c.capture.timeout_s, keep_payloads=True)
        self.dispatch.submit(ref, actor, work)

    def _submit_run(self, actor, vw: VariantWork) -> None:
        device = vw.devices[0]
        home_runs = (self.ref_name, self.oracle_name) if device == self.home else ()
        specs = [s.for_variant(vw.variant.variant_id, self.c.seed) for n, s in self.specs.items()
                 if s.device == device and (n in vw.missing or n in home_runs)]
        seed = vw.build.seed
        request = RunRequest(vw.variant.variant_id, vw.build.seed_id, vw.payload, specs, self.judge,
                             seed.output_kind if seed else "tensor", vw.variant.output_names, vw.variant.mode)
        outcomes, home = actor.run_variant.options(num_returns=2).remote(request, vw.home)
        if device == self.home:
            vw.home = home
        self.dispatch.submit(outcomes, actor, vw)

    # ------------------------------------------------------------------ what came back
    def _built(self, done: Done) -> list[VariantWork]:
        work: SeedWork = done.job
        reply: CallReply | None = done.value
        build = SeedBuild.from_reply(work.seed_id, reply, done.lost)
        if build.ok or work.mode == self.c.modes[0]:  # a seed eager cannot train still runs in inference
            self.sink.catalog_row(catalog_row(build))
        if not build.ok:
            rec = seed_failure_record(self.c.name, build, self.ref_name, self.home, seed_failure_id(work.seed_id, work.mode),
                                      work.mode)
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
            error = "WorkerLost" if done.again else type(done.lost).__name__
            outcomes = [RunOutcome(backend=n, stack=s.stack, device=s.device, status=Status.ERROR, stage=Stage.RUN,
                                   error_type=error, message=str(done.lost)[:2000])
                        for n, s in self.specs.items() if s.device == vw.devices[0] and n in vw.missing]
        else:
            outcomes = done.value
        recs = [run_record(self.c.name, vw.build, vw.variant, o) for o in outcomes if o.backend in vw.missing]
        self.sink.records(recs)
        targets = [r for r in recs if r.backend not in (self.ref_name, self.oracle_name)]
        if targets and self.c.variants.guidance != "uniform":
            keys = bug_key_list([vars(r) for r in targets])
            self.feedback.update(vw.variant.recipe.mutations, vw.variant.ops,
                                 [(r.backend, r.status, k.id if k else None) for r, k in zip(targets, keys)],
                                 {(r.backend, p) for r in targets for p in (*r.compiler_passes, *r.compiler_patterns)})

    def _next_pool(self, vw: VariantWork, ready: deque) -> None:
        vw.devices.popleft()
        if vw.devices:
            ready.appendleft(vw)
        else:
            self.variants_done += 1

    def _finish(self, wait_s: float) -> None:
        """Stop the workers, all at once. A worker still inside a run (after Ctrl-C or an error) would
        answer only when that run ends: it is killed after ``wait_s``, and its sandbox dies with it."""
        if self.fleet is not None:
            self.stats["pools"] = self.fleet.summary()
            self.stats.finish(self.fleet.actors(), timeout=wait_s)
            self.fleet.stop(wait_s)
        if self.started_ray:
            ray.shutdown()
