"""``gapfuzz seeds scan``: build, capture and run seeds on Ray in parallel, into a catalog.

Resumable: seeds already in the catalog are skipped. A seed whose scan kills its sandbox
(segfault, hang, memory) is a row with that status; the scan goes on.
"""
from __future__ import annotations

import logging
import os
import random

import ray

from analysis.catalog import Catalog, CatalogRow
from analysis.signature import signature
from workers.pool import PoolSettings, map_calls, start_pool

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
    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        else:
            ray.init(num_cpus=max(workers, os.cpu_count() or 1), include_dashboard=False,
                     logging_level=logging.ERROR, log_to_driver=False)
    actors = start_pool(PoolSettings(device="cpu", workers=workers, memory_gb=memory_gb))
    pending: list[CatalogRow] = []

    def on_result(seed_id: str, reply: dict) -> None:
        if "value" in reply:
            row = reply["value"]
        else:
            bad = reply.get("fault") or {"status": "error", "cause": None, **reply["error"]}
            row = CatalogRow(seed_id=seed_id, status=bad["status"], stage="build",
                             error_type=bad.get("error_type") or bad.get("cause"), message=bad.get("message"))
            row.signature = signature(row.stage, row.error_type, row.message)
        pending.append(row)
        bar.status[row.status] += 1
        if len(pending) >= flush_every:
            catalog.write(pending)
            pending.clear()

    try:
        map_calls(actors, ((i, (i, max_params)) for i in todo), "seeds.scan:scan_seed", timeout_s, on_result,
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
