"""``gapfuzz seeds scan``: build, capture and run seeds on Ray in parallel, into a catalog.

Resumable: seeds already in the catalog are skipped, and the rest are scanned in a shuffled order,
so that a scan stopped part-way (a catalog of thousands takes hours) is a fair sample of its
sources and families. A seed whose scan kills its sandbox
(segfault, hang, memory) is a row with that status; the scan goes on. On a cluster the scan's
workers are a pool like a campaign's (``workers.fleet``): with no ``--workers`` it grows with
the cluster's CPU nodes, and a seed lost with its node is scanned again elsewhere.
"""
from __future__ import annotations

import os
import random
from collections import Counter, deque

from analysis.catalog import Catalog, CatalogRow
from core.bugs import Stage, Status
from core.failures import signature
from seeds.scan import scan_seed
from workers.dispatch import Dispatcher, Done
from workers.fleet import Fleet
from workers.pool import AUTO, PoolSettings, connect

from .progress import Progress

MAX_LOST = 3  # times a seed may be lost with its worker's node before it is a WorkerLost row


def pick(ids: list[str], sample: int | None, seed: int) -> list[str]:
    if sample is not None and sample < len(ids):
        return sorted(random.Random(seed).sample(ids, sample))
    return ids


def _row(done: Done) -> CatalogRow:
    seed_id, reply = done.job, done.value
    if done.lost is None and reply.ok:
        return reply.value
    fault = None if done.lost is not None else reply.fault
    error = {"error_type": "WorkerLost", "message": str(done.lost)} if done.lost is not None else reply.error
    row = CatalogRow(seed_id=seed_id, status=fault.status if fault else Status.ERROR, stage=Stage.BUILD,
                     error_type=fault.cause if fault else error["error_type"],
                     message=fault.message if fault else error["message"])
    row.signature = signature(row.stage, row.error_type, row.message)
    return row


def scan(ids: list[str], out_dir, workers: int = 0, timeout_s: float = 600, max_params: int | None = 100_000_000,
         memory_gb: float | None = None, flush_every: int = 20, address: str | None = None,
         progress: bool = True) -> Catalog:
    catalog = Catalog(out_dir)
    done = catalog.done()
    todo = [i for i in ids if i not in done]
    random.Random(len(ids)).shuffle(todo)  # a scan stopped part-way is a random sample, not the first letters
    todo = deque(todo)
    bar = Progress(len(todo), unit="seeds", enabled=progress)
    bar.context = f"{len(ids) - len(todo)} already in the catalog" if len(todo) < len(ids) else ""
    if not todo:
        return catalog
    size = workers or (AUTO if address else max(1, os.cpu_count() or 1))
    started = connect(address, max(workers, os.cpu_count() or 1))
    dispatch = Dispatcher()
    fleet = Fleet({"cpu": PoolSettings(device="cpu", workers=size, memory_gb=memory_gb)}, dispatch)
    pending: list[CatalogRow] = []
    lost: Counter = Counter()
    try:
        fleet.start()
        while todo or dispatch:
            fleet.poll()
            while todo and (actor := dispatch.idle(fleet.pools["cpu"])) is not None:
                seed_id = todo.popleft()
                dispatch.submit(actor.call.remote(scan_seed, seed_id, max_params, timeout=timeout_s), actor, seed_id)
            if not dispatch:
                fleet.wait(1.0)  # every worker lost: wait for one
                continue
            for done in dispatch.wait(also=fleet.waiting()):
                if done.actor_died:
                    fleet.lose(done.actor)
                if done.lost is not None and done.again and lost[done.job] < MAX_LOST:
                    lost[done.job] += 1
                    todo.appendleft(done.job)
                    continue
                row = _row(done)
                pending.append(row)
                bar.status[row.status] += 1
                if len(pending) >= flush_every:
                    catalog.write(pending)
                    pending.clear()
            bar.update()
    finally:
        catalog.write(pending)
        bar.close()
        fleet.stop(wait_s=30)
        if started:
            import ray

            ray.shutdown()
    return catalog
