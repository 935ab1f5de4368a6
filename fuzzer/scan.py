"""``gapfuzz seeds scan``: build, capture and run seeds on Ray in parallel, into a catalog.

Resumable: seeds already in the catalog are skipped. A seed whose scan kills its sandbox
(segfault, hang, memory) is a row with that status; the scan goes on.
"""
from __future__ import annotations

import os
import random

import ray

from analysis.catalog import Catalog, CatalogRow
from core.bugs import Stage, Status
from core.failures import signature
from seeds.scan import scan_seed
from workers.dispatch import Done, map_calls
from workers.pool import PoolSettings, connect, start_pool

from .progress import Progress


def pick(ids: list[str], sample: int | None, seed: int) -> list[str]:
    if sample is not None and sample < len(ids):
        return sorted(random.Random(seed).sample(ids, sample))
    return ids


def scan(ids: list[str], out_dir, workers: int = 0, timeout_s: float = 600, max_params: int | None = 100_000_000,
         memory_gb: float | None = None, flush_every: int = 20, address: str | None = None,
         progress: bool = True) -> Catalog:
    catalog = Catalog(out_dir)
    todo = [i for i in ids if i not in catalog.done()]
    bar = Progress(len(todo), unit="seeds", enabled=progress)
    bar.context = f"{len(ids) - len(todo)} already in the catalog" if len(todo) < len(ids) else ""
    if not todo:
        return catalog
    workers = workers or max(1, os.cpu_count() or 1)
    started = connect(address, max(workers, os.cpu_count() or 1))
    actors = start_pool(PoolSettings(device="cpu", workers=workers, memory_gb=memory_gb))
    pending: list[CatalogRow] = []

    def on_result(done: Done) -> None:
        seed_id, reply = done.job, done.value
        if done.lost is None and reply.ok:
            row = reply.value
        else:
            fault = None if done.lost is not None else reply.fault
            error = {"error_type": "WorkerLost", "message": str(done.lost)} if done.lost is not None else reply.error
            row = CatalogRow(seed_id=seed_id, status=fault.status if fault else Status.ERROR, stage=Stage.BUILD,
                             error_type=fault.cause if fault else error["error_type"],
                             message=fault.message if fault else error["message"])
            row.signature = signature(row.stage, row.error_type, row.message)
        pending.append(row)
        bar.status[row.status] += 1
        if len(pending) >= flush_every:
            catalog.write(pending)
            pending.clear()

    try:
        map_calls(actors, ((i, (i, max_params)) for i in todo),
                  lambda actor, args: actor.call.remote(scan_seed, *args, timeout=timeout_s), on_result,
                  on_tick=bar.update)
    finally:
        catalog.write(pending)
        bar.close()
        for a in actors:
            try:
                ray.get(a.shutdown.remote(), timeout=30)
            except ray.exceptions.RayError:
                pass
        if started:
            ray.shutdown()
    return catalog
