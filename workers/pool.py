"""Worker pools: one per device kind, each worker a Ray actor that owns a warm sandbox.

A worker asks Ray for its device's resource (``num_gpus`` for cuda, a custom resource
named after the device otherwise), so on a heterogeneous cluster each run lands on a
machine that has the device.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import ray

from .runner import run_variant
from .sandbox import Fault, RemoteError, Sandbox


@dataclass
class PoolSettings:
    device: str = "cpu"
    workers: int = 1
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 1.0  # a fraction lets several workers share one large GPU
    memory_gb: float | None = None  # per-worker limit; past it the run ends as status oom
    threads: int = 1  # intra-op threads inside each worker's sandbox
    env: dict | None = None

    def actor_options(self) -> dict:
        opts = {"num_cpus": self.cpus_per_worker, "max_restarts": 0}
        if self.device == "cuda":
            opts["num_gpus"] = self.gpus_per_worker
        elif self.device != "cpu":
            opts["resources"] = {self.device: 1}
        return opts


class PoolWorker:
    """The Ray actor body; kept a plain class so tests can drive it without Ray."""

    def __init__(self, device: str, index: int, threads: int = 1, memory_gb: float | None = None,
                 env: dict | None = None):
        node = ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
        self.name = f"{device}-{index}@{node[:8]}" if node else f"{device}-{index}"
        self.device = device
        self.sandbox = Sandbox(threads=threads, memory_limit_gb=memory_gb, env=env)
        self.sandbox.start()
        self.busy_s = 0.0
        self.started = time.monotonic()
        self.built: set[str] = set()  # variants the current sandbox process built and keeps
        self.built_in = 0  # the sandbox start those belong to
        self.local_loads = 0

    def ready(self) -> str:
        self.sandbox.request("ping", timeout=120)
        return self.name

    def run_variant(self, variant_id: str, payload, specs: list, settings: dict, home_outputs=None):
        """``payload``: the payload, or ``[ObjectRef]`` (not resolved by Ray), fetched only when this
        worker's sandbox did not build the variant itself."""
        t0 = time.perf_counter()
        fetch = None
        if isinstance(payload, list):
            ref = payload[0]
            fetch = lambda: ray.get(ref)  # noqa: E731
            local = variant_id in self.built and self.built_in == self.sandbox.starts
            payload = None if local else fetch()
            self.local_loads += local
        self.built.discard(variant_id)
        try:
            outcomes, home = run_variant(self.sandbox, variant_id, payload, specs, settings, home_outputs, self.name,
                                         fetch)
        finally:
            self.busy_s += time.perf_counter() - t0
        return [o.to_dict() for o in outcomes], home

    def call(self, fn_path: str, args: tuple = (), kwargs: dict | None = None, timeout: float | None = None,
             put_key: str | None = None) -> dict:
        """Run ``module:function`` in the sandbox: ``{"value"}``, ``{"fault"}`` or ``{"error"}``.

        With ``put_key``, each ``value["variants"][i][put_key]`` is put in the object store
        from here, so large payloads never pass through the caller, and the sandbox keeps them
        too, so that this worker runs them without a transfer."""
        t0 = time.perf_counter()
        try:
            reply = self.sandbox.request("call", fn_path, tuple(args), dict(kwargs or {}), keep_key=put_key,
                                         timeout=timeout)
        except RemoteError as e:
            return {"error": e.info, "worker": self.name}
        finally:
            self.busy_s += time.perf_counter() - t0
        if isinstance(reply, Fault):
            return {"fault": reply.__dict__, "worker": self.name}
        if put_key and isinstance(reply, dict):
            if self.built_in != self.sandbox.starts:
                self.built, self.built_in = set(), self.sandbox.starts
            for item in reply.get("variants", []):
                item[put_key] = ray.put(item[put_key])
                self.built.add(item["variant_id"])
        return {"value": reply, "worker": self.name}

    def stats(self) -> dict:
        return {"worker": self.name, "busy_s": self.busy_s, "alive_s": time.monotonic() - self.started,
                "sandbox_starts": self.sandbox.starts, "local_loads": self.local_loads}

    def shutdown(self) -> None:
        self.sandbox.close()


RemotePoolWorker = ray.remote(PoolWorker)


def start_pool(settings: PoolSettings) -> list:
    """Actors for one device kind, started and warm (their sandboxes have imported torch)."""
    actors = [RemotePoolWorker.options(**settings.actor_options()).remote(
        settings.device, i, settings.threads, settings.memory_gb, settings.env) for i in range(settings.workers)]
    ray.get([a.ready.remote() for a in actors])
    return actors


def map_calls(actors: list, jobs, fn_path: str, timeout: float | None, on_result, on_tick=None,
              max_inflight: int = 2) -> None:
    """Run ``fn_path(*args)`` for each ``(key, args)`` of ``jobs`` in the actors' sandboxes,
    keeping every actor busy; ``on_result(key, reply)`` gets each :meth:`PoolWorker.call` reply."""
    jobs = iter(jobs)
    load = {a: 0 for a in actors}
    inflight: dict = {}
    exhausted = False
    while True:
        while not exhausted:
            actor = min(load, key=load.get)
            if load[actor] >= max_inflight:
                break
            try:
                key, args = next(jobs)
            except StopIteration:
                exhausted = True
                break
            inflight[actor.call.remote(fn_path, tuple(args), {}, timeout=timeout)] = (key, actor)
            load[actor] += 1
        if not inflight:
            return
        done, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
        for ref in done:
            key, actor = inflight.pop(ref)
            load[actor] -= 1
            on_result(key, ray.get(ref))
        if on_tick:
            on_tick()
