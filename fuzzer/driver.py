"""Drive a campaign on Ray: plan what is still to do, start the pools, run the job loop, finish.

Read top-down: ``run`` plans (``fuzzer.config.plan``: the seeds, sizes and variants no record holds yet),
resolves the backends and pools once (``fuzzer.config.pools``), starts Ray and the workers (``workers.
fleet``: grown as nodes join, replaced as they go), and hands the campaign's jobs (``fuzzer.
schedule``: builds on the CPU pool, each variant through its pools) to the one job loop
(``workers.run.jobs``), which retries a job lost with its node. Records go to the ``RecordSink``,
flushed as they come and at the end, so a stopped campaign resumes with nothing lost; a finished
campaign's are compacted to one file per backend (``results.compact``).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pyarrow as pa
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from gapfuzz.fuzzer.config.campaign import Campaign, CampaignError
from gapfuzz.fuzzer.config.estimate import remember
from gapfuzz.fuzzer.config.plan import SeedWork, plan, select_seeds, sized_seeds
from gapfuzz.fuzzer.config.pools import Pools
from gapfuzz.fuzzer.config.settings import AlignScope
from gapfuzz.fuzzer.progress import Progress
from gapfuzz.fuzzer.schedule import CampaignJobs
from gapfuzz.fuzzer.session import SessionStats
from gapfuzz.results.compact import compact
from gapfuzz.results.folder import Folder, ResultsError
from gapfuzz.results.sink import RecordSink
from gapfuzz.workers.judge.align import AlignLedger
from gapfuzz.workers.run.dispatch import Dispatcher
from gapfuzz.workers.run.fleet import Fleet
from gapfuzz.workers.run.jobs import JobLoop
from gapfuzz.workers.run.pool import gpu_utilisation


class Driver:
    def __init__(self, campaign: Campaign, run_dir: str | Path | Folder, address: str | None = None,
                 progress: bool = True, budget_s: float | None = None):
        self.c, self.address = campaign, address or campaign.address
        self.budget_s = budget_s or campaign.run.budget_s  # the command line's, else the campaign's
        self.run_dir = run_dir if isinstance(run_dir, Folder) else Folder(run_dir)  # local, or any pyarrow filesystem
        self.pools = Pools(campaign)
        # (variant, backend) pairs: a pair runs all its probes
        self.progress = Progress(0, unit="pairs", enabled=progress)
        self.stats = SessionStats(self.run_dir)
        self.sink = RecordSink(self.run_dir, campaign.run.flush_every)
        self.fleet: Fleet | None = None
        self.loop: JobLoop | None = None
        self.started_ray = False
        self.out_of_time = False  # the time budget ended the campaign before its plan did

    def check_available(self) -> None:
        """Unavailable backends are an error, or dropped with a warning when the campaign says so."""
        self.pools.check_available()

    def connect(self) -> None:
        """Join the campaign's Ray cluster, or start an embedded one sized for the pools."""
        self.started_ray = self.pools.connect(self.address) or self.started_ray

    # ------------------------------------------------------------------ the campaign
    def run(self, seed_ids: list[str] | None = None, sized: bool = False) -> None:
        """``sized``: ``seed_ids`` hold the seeds rebuilt at other sizes already (``plan.sized_seeds``). With a
        time budget, no pair starts after it (``out_of_time``); a resume does the rest."""
        deadline = time.monotonic() + self.budget_s if self.budget_s else None
        if not sized:
            seed_ids = sized_seeds(self.c, select_seeds(self.c) if seed_ids is None else seed_ids)
        work = plan(self.c, seed_ids, self.sink.store.done_keys(), list(self.pools.specs))
        self._count(work)
        seeds_total = len(seed_ids) * len(self.c.modes)  # a seed is built once per mode
        if not work:
            return
        t0 = time.monotonic()
        self.connect()
        if self.pools.drop_absent():
            work = self._without_dropped(work)
        self.pools.manifest().write(self.run_dir)
        cut_short = True
        try:
            jobs = self._start(work)
            jobs.seeds_total, jobs.seeds_done = seeds_total, seeds_total - len(work)
            self.stats["start_s"] = time.monotonic() - t0  # Ray and warm workers, before the first build
            self.out_of_time = not self.loop.run(jobs, deadline)
            cut_short = self.out_of_time
        finally:
            self._finish(wait_s=2.0 if cut_short else 10.0)
        self._remember()
        if not self.out_of_time:  # a campaign its budget stopped goes on later: its files stay as written
            self._compact()

    def _remember(self) -> None:
        """The run's pair times, for the next ``run --check`` (``config.estimate``); never at the records' cost."""
        try:
            remember(self.sink.store.read(columns=["variant_id", "backend", "seed_id", "mode", "worker_s"]))
        except (OSError, pa.ArrowException, ResultsError):
            pass

    def _count(self, work: list[SeedWork]) -> None:
        self.progress.total = sum(len(m) for w in work for m in w.missing.values())

    def _without_dropped(self, work: list[SeedWork]) -> list[SeedWork]:
        """The work still owed by the backends left (``Pools.drop_absent``)."""
        for w in work:
            w.missing = {i: {n for n in m if n in self.pools.specs} for i, m in w.missing.items()}
            w.missing = {i: m for i, m in w.missing.items() if m}
            w.indices = sorted(w.missing)
        work = [w for w in work if w.missing]
        self._count(work)
        return work

    def _start(self, work: list[SeedWork]) -> CampaignJobs:
        """The judge's settings (with the tier-2 ledger), the workers, the loop and the campaign's jobs."""
        c, p = self.c, self.pools
        ledger = None
        if c.compare.align_scope == AlignScope.SEED:  # on the driver's node: it lives as long as the campaign does
            here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
            ledger = ray.remote(num_cpus=0)(AlignLedger).options(scheduling_strategy=here).remote()
        judge = c.judge_settings(p.reference, p.oracle, ledger=ledger, device_references={
            d: n for d, n in c.backends.device_references.items() if n in p.specs})
        p.check_resources()
        if "cuda" in p.settings:  # this machine's GPUs beside the pair rate (nothing where none can be read)
            self.progress.gpu_reader = gpu_utilisation
        dispatch = Dispatcher()
        self.fleet = Fleet(p.settings, dispatch)
        try:
            self.fleet.start()
        except TimeoutError as e:
            raise CampaignError(str(e)) from None
        self.loop = JobLoop(self.fleet, dispatch, self.progress, on_tick=self._tick)
        return CampaignJobs(c, p, self.fleet, judge, self.sink, self.progress, work, self.stats)

    def _tick(self) -> None:
        self.stats["write_s"], self.stats["lost"] = self.sink.write_s, self.loop.retried
        self.stats.poll(self.fleet.actors())

    def _compact(self) -> None:
        """The finished campaign's records as one file per backend (``results.compact``); one that cannot be
        compacted (a full disk) keeps its small files, every row in them."""
        try:
            compact(self.sink.store)
        except (OSError, pa.ArrowException, ResultsError) as e:
            print(f"warning: records not compacted ({' '.join(str(e).split())[:200]}); they read as they are",
                  file=sys.stderr)

    def _finish(self, wait_s: float) -> None:
        """Write what is pending, then stop the workers, all at once. A worker still inside a run (after
        Ctrl-C or an error) would answer only when that run ends: it is killed after ``wait_s``, and its
        sandbox dies with it."""
        self.sink.flush()
        self.progress.close()
        self.stats["write_s"] = self.sink.write_s
        self.stats["lost"] = self.loop.retried if self.loop else 0
        if self.fleet is not None:
            self.stats["pools"] = self.fleet.summary()
            self.stats.finish(self.fleet.actors(), timeout=wait_s)
            self.fleet.stop(wait_s)
        if self.started_ray:
            ray.shutdown()
