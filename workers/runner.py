"""Run one variant on a pool's backends in a sandbox, compare, and return outcomes.

Everything here is the pool's job, not the backend's: timeouts, isolation, the retry
that tells a reproducible crash from a flaky one, timing and comparing.
"""
from __future__ import annotations

import platform
import socket
import time
from dataclasses import dataclass, field

from . import compare as cmp
from .outcome import RunOutcome
from .registry import BackendSpec
from .sandbox import Fault, Sandbox

DIVERGENT = ("target-divergent", "reference-divergent", "ill-conditioned")


@dataclass
class JobSettings:
    reference: str
    oracle: str | None = None
    timeout_s: float = 300.0
    repeats: int = 3
    retry_faults: bool = True
    compare: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: dict) -> JobSettings:
        return cls(**d)


def _versions() -> dict:
    import torch

    return {"torch": torch.__version__, "python": platform.python_version(), "os": platform.platform()}


def _outcome(spec: BackendSpec, worker: str) -> RunOutcome:
    cls = spec.backend_cls()
    version = cls.version() if hasattr(cls, "version") else "unknown"
    return RunOutcome(backend=spec.name, stack=spec.stack, device=spec.device, options=dict(spec.options),
                      backend_version=version, host=socket.gethostname(), worker=worker, versions=_versions())


class VariantJob:
    def __init__(self, sandbox: Sandbox, variant_id: str, payload: dict, settings: JobSettings, worker: str):
        self.sb, self.vid, self.payload, self.s, self.worker = sandbox, variant_id, payload, settings, worker
        self.loaded = False
        self.outputs: dict[str, list] = {}

    def _load(self) -> None:
        if not self.loaded:
            reply = self.sb.request("load", self.vid, self.payload, timeout=max(60.0, self.s.timeout_s))
            if isinstance(reply, Fault):
                raise RuntimeError(f"executor died loading variant {self.vid}: {reply.cause} {reply.message}")
            self.loaded = True

    def _run_once(self, spec: BackendSpec):
        self._load()
        reply = self.sb.request("run", self.vid, spec.to_dict(), self.s.repeats,
                                timeout=spec.timeout_s or self.s.timeout_s)
        if isinstance(reply, Fault):
            self.loaded = False
        return reply

    def run(self, spec: BackendSpec) -> RunOutcome:
        t0 = time.perf_counter()
        out = _outcome(spec, self.worker)
        reply = self._run_once(spec)
        if isinstance(reply, Fault):
            out.status, out.cause, out.message = reply.status, reply.cause, reply.message
            out.stage = "run"
            out.error_type = reply.cause.split(":")[-1].split()[0] if reply.cause else None
            if self.s.retry_faults:
                again = self._run_once(spec)
                out.reproducible = isinstance(again, Fault)
        else:
            self.outputs[spec.name] = reply.pop("outputs", None)
            reply.pop("traceback", None)
            info = reply.pop("info", None) or {}
            for k, v in reply.items():
                if hasattr(out, k):
                    setattr(out, k, v)
            out.backend_info = info
        out.worker_s = time.perf_counter() - t0
        return out


def run_variant(sandbox: Sandbox, variant_id: str, payload: dict, specs: list[dict], settings: dict,
                home_outputs: dict | None = None, worker: str = "") -> tuple[list[RunOutcome], dict]:
    """Outcomes for every spec, and the reference/oracle outputs for pools that run later."""
    s = JobSettings.from_dict(settings)
    job = VariantJob(sandbox, variant_id, payload, s, worker)
    outcomes = [job.run(BackendSpec(**d)) for d in specs]
    t0 = time.perf_counter()
    known = {**(home_outputs or {}), **job.outputs}
    ref, oracle = known.get(s.reference), known.get(s.oracle) if s.oracle else None
    csettings = cmp.Settings.from_dict(s.compare)
    for o in outcomes:
        if o.status != "ok" or o.backend == s.reference:
            continue
        if ref is None:
            o.figures = {"verdict": "no-reference"}
            continue
        v = cmp.attribute(job.outputs[o.backend], ref, oracle if o.backend != s.oracle else None, csettings)
        o.figures = v.columns()
        if o.backend == s.oracle:
            o.figures["verdict"] = "oracle"
        elif v.verdict in DIVERGENT:
            o.status, o.stage = "mismatch", "compare"
    share = (time.perf_counter() - t0) / max(1, len(outcomes))
    for o in outcomes:
        o.worker_s += share
    home = {k: v for k, v in job.outputs.items() if k in (s.reference, s.oracle)}
    return outcomes, home
