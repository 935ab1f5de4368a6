"""A campaign's jobs for the job loop (``workers.run.jobs``): seed builds on the CPU pool, then each
built variant through the pools that owe it runs, the reference's pool first.

The reference's pool runs the reference, the oracle and that pool's targets, compared in place;
later pools get the reference outputs through the object store. A job lost with its worker is run
again: a run on another worker of its pool when only the worker died, or the variant built again
from its recipe when its inputs died too (a variant is reproducible from its recipe).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from gapfuzz.core.bugs import Stage, Status, bug_key_list
from gapfuzz.core.failures import Failure
from gapfuzz.fuzzer.builds import BuildRequest, BuiltVariant, SeedBuild
from gapfuzz.fuzzer.config.campaign import Campaign
from gapfuzz.fuzzer.config.plan import SeedWork, seed_failure_id
from gapfuzz.fuzzer.config.pools import BUILD_DEVICE, Pools
from gapfuzz.fuzzer.config.settings import GuidanceMode
from gapfuzz.fuzzer.generate import build_seed_variants
from gapfuzz.fuzzer.guidance import Feedback
from gapfuzz.fuzzer.progress import Progress
from gapfuzz.fuzzer.records import catalog_row, run_record, seed_failure_record
from gapfuzz.fuzzer.unusable import Unusable, skipped_like
from gapfuzz.results.sink import RecordSink
from gapfuzz.workers.run.dispatch import Dispatcher, Done
from gapfuzz.workers.run.messages import CallReply, JudgeSettings, RunRequest
from gapfuzz.workers.run.outcome import new_outcome

BACKLOG_PER_WORKER = 4  # built variants waiting for a pool, per worker, before builds pause for the slowest pool


@dataclass
class VariantWork:
    """A built variant on its way through the pools that still owe it runs."""

    build: SeedBuild
    variant: BuiltVariant
    payload: object  # ObjectRef
    missing: set[str]  # backends still to run
    devices: deque = field(default_factory=deque)  # pools still to run (a device's, a release's), home pool first
    home: object = None  # ObjectRef to the reference/oracle outputs
    builder: object = None  # the worker that built it: it runs it without a transfer


class CampaignJobs:
    def __init__(self, c: Campaign, pools: Pools, fleet, judge: JudgeSettings, sink: RecordSink, progress: Progress,
                 work: list[SeedWork], stats):
        self.c, self.pools, self.fleet, self.judge, self.sink, self.progress = c, pools, fleet, judge, sink, progress
        self.stats = stats
        self.builds: deque[SeedWork] = deque(work)
        self.ready: deque[VariantWork] = deque()
        self.feedback = Feedback(c.variants.mutators)
        self.unusable = Unusable(set(pools.specs) - {pools.reference, pools.oracle})
        self.seeds_total = self.seeds_done = self.variants_done = 0

    # ------------------------------------------------------------------ the loop's side
    def needs(self) -> set[str]:
        return {vw.devices[0] for vw in self.ready} | ({BUILD_DEVICE} if self.builds else set())

    def key(self, job) -> str:
        return job.seed_id if isinstance(job, SeedWork) else job.variant.variant_id

    def fill(self, dispatch: Dispatcher) -> None:
        """Give every idle worker work: a ready variant's next pool, else (CPU) the next seed's build, unless
        built variants already wait for a slower pool (their payloads would pile up in the object store)."""
        backlog_limit = BACKLOG_PER_WORKER * max(1, len(self.fleet.actors()))
        progress = True
        while progress:
            progress = False
            for vw in list(self.ready):
                device = vw.devices[0]
                actor = dispatch.idle(self.fleet.pools[device], vw.builder)
                if actor is not None and actor is not vw.builder and self.builds and device == BUILD_DEVICE and \
                        vw.builder in dispatch.load:
                    continue  # its builder runs it with no transfer; a free worker builds the next seed
                if actor is not None:
                    self.ready.remove(vw)
                    if self._skip_unusable(vw, actor):
                        self._next_pool(vw)
                    else:
                        dispatch.submit(self._run_call(actor, vw), actor, vw)
                    progress = True
            actor = dispatch.idle(self.fleet.pools[BUILD_DEVICE])
            waiting = any(vw.devices[0] == BUILD_DEVICE and vw.builder is actor for vw in self.ready)
            if self.builds and actor is not None and not waiting and len(self.ready) < backlog_limit:
                work = self.builds.popleft()
                dispatch.submit(self._build_call(actor, work), actor, work)
                progress = True

    def finished(self, done: Done) -> None:
        if isinstance(done.job, SeedWork):
            self.seeds_done += not done.job.again
            self.ready.extend(self._built(done))
        else:
            self._ran(done.job, done)
            self._next_pool(done.job)
        self.progress.context = f"seeds {self.seeds_done}/{self.seeds_total}  variants {self.variants_done}"

    def again(self, done: Done) -> None:
        job = done.job
        if isinstance(job, SeedWork):
            self.builds.appendleft(job)
        elif done.actor_died:  # its payload and reference outputs are in the object store still
            job.builder = None
            self.ready.appendleft(job)
        else:  # its inputs went with a node: built again from the recipe, for the backends it still owes
            self.stats["rebuilt"] += 1
            index = job.variant.index
            owed = {n for n in job.missing if self.pools.specs[n].pool in job.devices}
            self.builds.appendleft(SeedWork(job.build.seed_id, [index], {index: owed}, again=True,
                                            mode=job.variant.mode))

    # ------------------------------------------------------------------ calls
    def _build_call(self, actor, work: SeedWork):
        v = self.c.variants
        request = BuildRequest(work.seed_id, work.indices, v, self.c.seed, self.c.capture.max_params,
                               None if v.guidance == GuidanceMode.UNIFORM else self.feedback.snapshot(v.guidance),
                               self.c.capture.cache, work.mode, self.c.train_layers, self.c.compare.settings)
        return actor.call.remote(build_seed_variants, request, timeout=self.c.capture.timeout_s, keep_payloads=True)

    def _run_call(self, actor, vw: VariantWork):
        device, p = vw.devices[0], self.pools
        home_runs = (p.reference, p.oracle) if device == p.home else ()
        v = vw.variant
        specs = [s.for_variant(v.variant_id, self.c.seed, vw.build.seed_id, v.index, v.mode) for n, s in p.specs.items()
                 if s.pool == device and (n in vw.missing or n in home_runs)]
        seed = vw.build.seed
        request = RunRequest(vw.variant.variant_id, vw.build.seed_id, vw.payload, specs, self.judge,
                             seed.output_kind if seed else "tensor", vw.variant.output_names, vw.variant.mode,
                             hands_on=device == p.home and len(vw.devices) > 1)
        outcomes, home = actor.run_variant.options(num_returns=2).remote(request, vw.home)
        if device == p.home:
            vw.home = home
        return outcomes

    # ------------------------------------------------------------------ what came back
    def _built(self, done: Done) -> list[VariantWork]:
        work: SeedWork = done.job
        reply: CallReply | None = done.value
        build = SeedBuild.from_reply(work.seed_id, reply, done.lost)
        if build.ok or work.mode == self.c.modes[0]:  # a seed eager cannot train still runs in inference
            self.sink.catalog_row(catalog_row(build))
        if not build.ok:
            rec = seed_failure_record(self.c.name, build, self.pools.reference, self.c.reference.device,
                                      seed_failure_id(work.seed_id, work.mode), work.mode)
            self._records([rec])
            self.progress.total -= sum(len(m) for m in work.missing.values()) - 1
            return []
        self.stats["builds"].append({"seed_id": build.seed_id, "capture_s": build.capture_s, "build_s": build.build_s,
                                     "tried": build.tried, "rejected": build.rejected})
        out = []
        for v in build.variants:
            missing = work.missing.get(v.index, set())
            if v.unmutated:
                self._unmutated(build, v, missing)
                continue
            devices = deque(d for d in self.pools.names
                            if d == self.pools.home or any(self.pools.specs[n].pool == d for n in missing))
            payload = build.payloads.pop(v.variant_id)  # each variant holds its own payload, freed when it is done
            out.append(VariantWork(build, v, payload, missing, devices, builder=done.actor))
        return out

    def _unmutated(self, build: SeedBuild, v: BuiltVariant, missing: set[str]) -> None:
        """A variant meant to be mutated that no mutator could change: one skipped record per backend it
        owed, so the campaign neither runs its seed again nor plans it on ``--resume``."""
        tried = ", ".join(sorted(build.tried)) or "none applies to this graph"
        failure = Failure(Status.SKIPPED, Stage.MUTATE, "NoMutation",
                          f"no mutator changed this graph (drawn for its seed: {tried})")
        self._records([run_record(self.c.name, build, v, new_outcome(self.pools.specs[n], failure))
                       for n in sorted(missing)])
        self.variants_done += 1

    def _ran(self, vw: VariantWork, done: Done) -> None:
        if done.lost is not None:  # the worker died (not a backend fault: the sandbox isolates those)
            failure = Failure.lost(done.lost, Stage.RUN, done.again)
            outcomes = [new_outcome(self.pools.specs[n], failure)
                        for n in self.pools.targets_on(vw.devices[0]) if n in vw.missing]
        else:
            outcomes = done.value
        recs = [run_record(self.c.name, vw.build, vw.variant, o) for o in outcomes if o.backend in vw.missing]
        recs = self.unusable.see(done.actor, recs)
        self._records(recs)
        targets = [r for r in recs if r.backend not in (self.pools.reference, self.pools.oracle)]
        if targets and self.c.variants.guidance != GuidanceMode.UNIFORM:
            keys = bug_key_list([vars(r) for r in targets])
            self.feedback.update(vw.variant.recipe.mutations, vw.variant.ops,
                                 [(r.backend, r.status, k.id if k else None) for r, k in zip(targets, keys)],
                                 {(r.backend, p) for r in targets for p in (*r.compiler_passes, *r.compiler_patterns)})

    def _skip_unusable(self, vw: VariantWork, actor) -> bool:
        """A skipped record for each target the variant owes that cannot run on ``actor``'s host
        (``fuzzer.unusable``); True when its pool, not the home one, has nothing left to run."""
        device, specs = vw.devices[0], self.pools.specs
        marks = [m for n in sorted(vw.missing) if specs[n].pool == device and (m := self.unusable.marked(actor, n))]
        if marks:
            self._records([skipped_like(run_record(self.c.name, vw.build, vw.variant, new_outcome(specs[m.backend])),
                                        m) for m in marks])
            vw.missing -= {m.backend for m in marks}
        return device != self.pools.home and not any(specs[n].pool == device for n in vw.missing)

    def _records(self, records: list) -> None:
        """To the sink; the progress line counts (variant, backend) pairs, each by its first probe not ok."""
        pairs: dict[tuple[str, str], str] = {}
        for r in records:
            key = (r.variant_id, r.backend)
            if key not in pairs or pairs[key] == Status.OK:
                pairs[key] = r.status
        for (_, backend), status in pairs.items():
            self.progress.count(status, backend)
        self.sink.records(records)

    def _next_pool(self, vw: VariantWork) -> None:
        vw.devices.popleft()
        if vw.devices:
            self.ready.appendleft(vw)
        else:
            self.variants_done += 1
