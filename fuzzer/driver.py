"""Drive a campaign on Ray: builds on the CPU pool, runs on each backend's device pool.

Per variant, the pool of the reference runs first (reference, oracle and that pool's
targets, compared in place); other pools get the reference outputs through the object
store. Records are buffered and flushed as whole files; a killed campaign resumes from
what was written.
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import ray

from analysis.catalog import Catalog
from analysis.store import RecordBuffer, RecordStore
from workers.align import AlignLedger
from workers.pool import PoolSettings, start_pool
from workers.registry import unavailable_reason

from .campaign import Campaign, CampaignError
from .guidance import Feedback
from .mutators import resolve_mutators
from .mutators.injection import POOL
from .plan import SeedWork, plan, seed_failure_id, select_seeds
from .progress import Progress
from .session import SessionStats
from .records import catalog_row, cluster_key, run_record, seed_failure_record

log = logging.getLogger("gapfuzz.fuzzer")
BUILD_DEVICE = "cpu"
MAX_INFLIGHT = 2  # per worker: one running, one queued behind it


@dataclass
class VariantWork:
    seed_id: str
    seed: dict
    meta: dict  # everything the build said about the variant except its payload
    payload: object  # ObjectRef
    missing: set[str]
    devices: deque = field(default_factory=deque)  # pools still to run, home pool first
    home: object = None  # ObjectRef to the reference/oracle outputs
    builder: object = None  # the worker that built it: it runs it without a transfer


class Driver:
    def __init__(self, campaign: Campaign, run_dir: Path, address: str | None = None, progress: bool = True):
        self.c, self.run_dir, self.address = campaign, Path(run_dir), address
        self.store = RecordStore(run_dir)
        self.catalog: list = []  # seed catalog rows, written with the records
        self.buffer = RecordBuffer(self.store, max_records=campaign.config["run"]["flush_every"], max_age_s=10)
        self.specs = {s.name: s for s in campaign.backends()}
        self.home = campaign.reference.device
        self.devices = sorted({s.device for s in self.specs.values()} | {BUILD_DEVICE},
                              key=lambda d: (d != self.home, d))
        self.show_progress = progress
        self.started_ray = False
        self.stats = SessionStats(self.run_dir)
        self.ledger = None  # the campaign's AlignLedger actor, for compare.align_scope: seed

    # ------------------------------------------------------------------ setup
    def check_available(self) -> None:
        """Unavailable backends are an error, or dropped with a warning when the campaign says so."""
        skip = self.c.config["backends"]["skip_unavailable"]
        for spec in list(self.specs.values()):
            why = unavailable_reason(spec)
            if why and skip and spec.name not in (self.c.reference.name, getattr(self.c.oracle, "name", None)):
                log.warning("skipping backend %s: %s", spec.name, why)
                del self.specs[spec.name]
            elif why:
                raise CampaignError(f"{self.c.source}: backend {spec.name} is not available here: {why}")
        if len(self.specs) <= 1 + (self.c.oracle is not None):
            raise CampaignError(f"{self.c.source}: no target backend is available here")
        self.devices = sorted({s.device for s in self.specs.values()} | {BUILD_DEVICE},
                              key=lambda d: (d != self.home, d))

    def start_ray(self) -> None:
        if ray.is_initialized():
            return
        addr = self.address or self.c.config["ray"]["address"]
        if addr:
            ray.init(address=addr, logging_level=logging.ERROR, log_to_driver=False)
            return
        need = sum(self.c.pool(d)["workers"] * self.c.pool(d)["cpus_per_worker"] for d in self.devices)
        cpus = self.c.config["ray"]["num_cpus"] or max(os.cpu_count() or 1, int(need + 0.999))
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        self.started_ray = True

    def start_pools(self) -> None:
        self.pools, self.load = {}, {}
        if self.c.config["compare"]["align_scope"] == "seed":
            self.ledger = ray.remote(num_cpus=0)(AlignLedger).remote()
        for device in self.devices:
            settings = self._pool_settings(device)
            self._check_resources(settings)
            self.pools[device] = start_pool(settings)
            for a in self.pools[device]:
                self.load[a] = 0

    def _pool_settings(self, device: str, workers: int | None = None) -> PoolSettings:
        cfg = self.c.pool(device)
        return PoolSettings(device=device, workers=workers or cfg["workers"], cpus_per_worker=cfg["cpus_per_worker"],
                            gpus_per_worker=cfg["gpus_per_worker"], threads=cfg["threads"],
                            memory_gb=cfg["memory_gb"], env=cfg["env"] or None)

    def _check_resources(self, s: PoolSettings) -> None:
        have = ray.cluster_resources()
        opts = s.actor_options()
        need = {"CPU": opts["num_cpus"], "GPU": opts.get("num_gpus", 0), **opts.get("resources", {})}
        for key, amount in need.items():
            if amount and have.get(key, 0) < amount:
                raise CampaignError(f"pool {s.device}: the Ray cluster has no {key!r} resource for its workers "
                                    f"(has: {', '.join(sorted(have))})")

    # ------------------------------------------------------------------ dispatch
    def _idle(self, device: str, prefer=None):
        """The least loaded worker of a pool with room, ``prefer`` among equals; None if all are full."""
        actors = self.pools.get(device) or []
        best = min(actors, key=lambda a: (self.load[a], a is not prefer), default=None)
        return best if best is not None and self.load[best] < MAX_INFLIGHT else None

    def _settings(self, vw: VariantWork) -> dict:
        r, cmp_cfg = self.c.config["run"], self.c.config["compare"]
        return {"reference": self.c.reference.name, "oracle": self.c.oracle.name if self.c.oracle else None,
                "timeout_s": r["timeout_s"], "repeats": r["repeats"], "retry_faults": r["retry_faults"],
                "compare": {k: cmp_cfg[k] for k in ("tolerances", "multiplier", "far")},
                "output_kind": (vw.seed or {}).get("output_kind", "tensor"),
                "output_names": vw.meta.get("output_names", []),
                "detection_adapter": cmp_cfg["detection_adapter"], "align": cmp_cfg["align"],
                "ledger": self.ledger}

    def submit_build(self, actor, work: SeedWork):
        v = self.c.config["variants"]
        snapshot = None if v["guidance"] == "uniform" else self.feedback.snapshot(v["guidance"])
        cap = self.c.config["capture"]
        args = (work.seed_id, work.indices, v, self.c.config["seed"], self.mutators, cap["max_params"], snapshot,
                cap["cache"])
        return actor.call.remote("fuzzer.generate:build_seed_variants", args, {},
                                 timeout=self.c.config["capture"]["timeout_s"], put_key="payload")

    def submit_run(self, actor, vw: VariantWork, device: str):
        names = [n for n, s in self.specs.items() if s.device == device and
                 (n in vw.missing or (device == self.home and n in (self.ref_name, self.oracle_name)))]
        specs = [self.specs[n].to_dict() for n in names]
        outcomes, home = actor.run_variant.options(num_returns=2).remote(
            vw.meta["variant_id"], [vw.payload], specs, self._settings(vw), vw.home)  # in a list: fetched if needed
        if device == self.home:
            vw.home = home
        return outcomes

    # ------------------------------------------------------------------ results
    def on_build(self, work: SeedWork, reply: dict, builder=None) -> list[VariantWork]:
        if "value" not in reply:
            fault, err = reply.get("fault"), reply.get("error")
            result = ({"status": fault["status"], "stage": "capture", "error_type": fault["cause"],
                       "message": fault["message"], "cause": fault["cause"]} if fault else
                      {"status": "error", "stage": "capture", **{k: err[k] for k in ("error_type", "message")}})
            result["seed"] = None
        else:
            result = reply["value"]
        self.catalog.append(catalog_row(work.seed_id, result))
        if len(self.catalog) >= 20:
            self._write_catalog()
        if result["status"] != "ok":
            rec = seed_failure_record(self.c.name, work.seed_id, result, self.ref_name, self.home,
                                      seed_failure_id(work.seed_id))
            self.buffer.add([rec])
            self.progress.status[rec.status] += 1
            self.progress.total -= sum(len(m) for m in work.missing.values()) - 1
            return []
        self.stats["builds"].append({k: result.get(k) for k in ("seed_id", "capture_s", "build_s", "tried",
                                                                "rejected")})
        out = []
        for v in result["variants"]:
            index = int(v["variant_id"].rsplit("#", 1)[1])
            payload = v.pop("payload")
            v["capture_s"] = result.get("capture_s")
            missing = work.missing.get(index, set())
            devices = deque(d for d in self.devices if any(self.specs[n].device == d for n in missing)
                            or d == self.home)
            out.append(VariantWork(work.seed_id, result["seed"], v, payload, missing, devices, builder=builder))
        return out

    def _write_catalog(self) -> None:
        Catalog(self.run_dir).write(self.catalog)
        self.catalog = []

    def on_run(self, vw: VariantWork, outcomes: list[dict]) -> None:
        names = vw.meta.get("output_names")
        recs = [run_record(self.c.name, vw.seed_id, vw.seed, vw.meta, o, names) for o in outcomes
                if o["backend"] in vw.missing]
        for r in recs:
            self.progress.status[r.status] += 1
        t0 = time.perf_counter()
        self.buffer.add(recs)
        self.stats["write_s"] += time.perf_counter() - t0
        targets = [(r.backend, r.status, cluster_key(r)) for r in recs
                   if r.backend not in (self.ref_name, self.oracle_name)]
        if targets:
            self.feedback.update(json.loads(vw.meta["recipe"])["mutations"], vw.meta.get("ops", []), targets)

    def on_lost(self, vw: VariantWork, device: str, err: Exception) -> None:
        """A worker actor died (not a backend fault: the sandbox isolates those)."""
        for n, s in self.specs.items():
            if s.device == device and n in vw.missing:
                o = {"backend": n, "stack": s.stack, "device": device, "status": "error", "stage": "run",
                     "error_type": "WorkerLost", "message": str(err)[:2000]}
                self.on_run(vw, [o])

    # ------------------------------------------------------------------ main loop
    def run(self, seed_ids: list[str] | None = None) -> None:
        self.ref_name = self.c.reference.name
        self.oracle_name = self.c.oracle.name if self.c.oracle else None
        v = self.c.config["variants"]
        self.mutators = resolve_mutators(v["mutators"], v["exclude_mutators"])
        self.feedback = Feedback(self.mutators, pool_ops=sorted(POOL))
        seed_ids = select_seeds(self.c) if seed_ids is None else seed_ids
        work = plan(self.c, seed_ids, self.store.done_keys(), list(self.specs))
        total = sum(len(m) for w in work for m in w.missing.values())
        self.progress = Progress(total, enabled=self.show_progress)
        self.seeds_total, self.seeds_done, self.variants_done = len(seed_ids), len(seed_ids) - len(work), 0
        if not work:
            return
        t0 = time.monotonic()
        self.start_ray()
        cut_short = True
        try:
            self.start_pools()
            self.stats["start_s"] = time.monotonic() - t0  # Ray and warm workers, before the first build
            self._loop(deque(work))
            cut_short = False
        finally:
            self.buffer.flush()
            self._write_catalog()
            self.progress.close()
            self._finish(wait_s=2.0 if cut_short else 10.0)

    def _loop(self, builds: deque) -> None:
        ready: deque[VariantWork] = deque()
        inflight: dict = {}
        while builds or ready or inflight:
            self._fill(builds, ready, inflight)
            if not inflight:
                break
            done, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
            for ref in done:
                kind, item, actor, device = inflight.pop(ref)
                self.load[actor] -= 1
                try:
                    value = ray.get(ref)
                except ray.exceptions.RayActorError as e:
                    if kind == "build":
                        value = {"error": {"error_type": "WorkerLost", "message": str(e)[:2000]}}
                    else:
                        self.on_lost(item, device, e)
                        self._replace(actor, device)
                        self._next_pool(item, ready)
                        continue
                if kind == "build":
                    self.seeds_done += 1
                    ready.extend(self.on_build(item, value, actor))
                else:
                    self.on_run(item, value)
                    self._next_pool(item, ready)
            self.progress.context = f"seeds {self.seeds_done}/{self.seeds_total}  variants {self.variants_done}"
            self.progress.update()
            self.stats.poll(self._actors())

    def _next_pool(self, vw: VariantWork, ready: deque) -> None:
        vw.devices.popleft()
        if vw.devices:
            ready.appendleft(vw)
        else:
            self.variants_done += 1

    def _fill(self, builds: deque, ready: deque, inflight: dict) -> None:
        progress = True
        while progress:
            progress = False
            for vw in list(ready):
                actor = self._idle(vw.devices[0], vw.builder)
                if actor is not None and actor is not vw.builder and builds and vw.builder in self.load and \
                        vw.devices[0] == BUILD_DEVICE:
                    continue  # its builder runs it with no transfer; a free worker builds the next seed
                if actor is not None:
                    ready.remove(vw)
                    inflight[self.submit_run(actor, vw, vw.devices[0])] = ("run", vw, actor, vw.devices[0])
                    self.load[actor] += 1
                    progress = True
            actor = self._idle(BUILD_DEVICE)
            waiting = sum(1 for vw in ready if vw.devices[0] == BUILD_DEVICE and vw.builder is actor)
            if builds and actor is not None and not waiting:
                work = builds.popleft()
                inflight[self.submit_build(actor, work)] = ("build", work, actor, BUILD_DEVICE)
                self.load[actor] += 1
                progress = True

    def _replace(self, actor, device: str) -> None:
        ray.kill(actor, no_restart=True)
        fresh = start_pool(self._pool_settings(device, workers=1))[0]
        self.pools[device] = [fresh if a is actor else a for a in self.pools[device]]
        self.load.pop(actor, None)
        self.load[fresh] = 0

    def _actors(self) -> list:
        return [a for actors in getattr(self, "pools", {}).values() for a in actors]

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
