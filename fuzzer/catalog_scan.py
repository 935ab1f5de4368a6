"""``gapfuzz seeds scan``: build, capture and run seeds on Ray in parallel, into a catalog.

Resumable: seeds already in the catalog are skipped, and the rest are scanned in a shuffled order,
so that a scan stopped part-way (a catalog of thousands takes hours) is a fair sample of its
sources and families. A seed whose scan kills its sandbox (segfault, hang, memory) is a row with
that status; the scan goes on. The workers are a pool like a campaign's (``workers.run.fleet``) and
the loop is a campaign's (``workers.run.jobs``): with no ``--workers`` the pool grows with the
cluster's CPU nodes, and a seed lost with its node is scanned again elsewhere.
"""
from __future__ import annotations

import os
import random
from collections import deque

from gapfuzz.core.bugs import Stage
from gapfuzz.fuzzer.builds import reply_failure
from gapfuzz.fuzzer.progress import Progress
from gapfuzz.results.catalog import Catalog, CatalogRow
from gapfuzz.seeds.scan import scan_seed
from gapfuzz.workers.run.dispatch import Dispatcher, Done
from gapfuzz.workers.run.fleet import Fleet
from gapfuzz.workers.run.jobs import JobLoop
from gapfuzz.workers.run.pool import AUTO, PoolSettings, connect


def pick(ids: list[str], sample: int | None, seed: int) -> list[str]:
    if sample is not None and sample < len(ids):
        return sorted(random.Random(seed).sample(ids, sample))
    return ids


class ScanJobs:
    """One ``scan_seed`` call per seed; rows are written every ``flush_every`` and at the end."""

    def __init__(self, todo: list[str], catalog: Catalog, fleet: Fleet, progress: Progress, max_params: int | None,
                 timeout_s: float, flush_every: int):
        self.todo, self.catalog, self.fleet, self.progress = deque(todo), catalog, fleet, progress
        self.max_params, self.timeout_s, self.flush_every = max_params, timeout_s, flush_every
        self.pending: list[CatalogRow] = []

    def needs(self) -> set[str]:
        return {"cpu"} if self.todo else set()

    def key(self, job) -> str:
        return job

    def fill(self, dispatch: Dispatcher) -> None:
        while self.todo and (actor := dispatch.idle(self.fleet.pools["cpu"])) is not None:
            seed_id = self.todo.popleft()
            dispatch.submit(actor.call.remote(scan_seed, seed_id, self.max_params, timeout=self.timeout_s), actor,
                            seed_id)

    def again(self, done: Done) -> None:
        self.todo.appendleft(done.job)

    def finished(self, done: Done) -> None:
        failure = reply_failure(done.value, done.lost, Stage.BUILD)
        if failure is None:
            row = done.value.value
        else:
            row = CatalogRow(seed_id=done.job)
            failure.onto(row, sign=True)
        self.pending.append(row)
        self.progress.count(row.status)
        if len(self.pending) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        self.catalog.write(self.pending)
        self.pending.clear()


def scan(ids: list[str], out_dir, workers: int = 0, timeout_s: float = 600, max_params: int | None = 100_000_000,
         memory_gb: float | None = None, flush_every: int = 20, address: str | None = None,
         progress: bool = True) -> Catalog:
    catalog = Catalog(out_dir)
    done = catalog.done()
    todo = [i for i in ids if i not in done]
    random.Random(len(ids)).shuffle(todo)  # a scan stopped part-way is a random sample, not the first letters
    bar = Progress(len(todo), unit="seeds", enabled=progress)
    bar.context = f"{len(ids) - len(todo)} already in the catalog" if len(todo) < len(ids) else ""
    if not todo:
        return catalog
    size = workers or (AUTO if address else max(1, os.cpu_count() or 1))
    started = connect(address, max(workers, os.cpu_count() or 1))
    dispatch = Dispatcher()
    fleet = Fleet({"cpu": PoolSettings(device="cpu", workers=size, memory_gb=memory_gb)}, dispatch)
    jobs = ScanJobs(todo, catalog, fleet, bar, max_params, timeout_s, flush_every)
    try:
        fleet.start()
        JobLoop(fleet, dispatch, bar).run(jobs)
    finally:
        jobs.flush()
        bar.close()
        fleet.stop(wait_s=30)
        if started:
            import ray

            ray.shutdown()
    return catalog
