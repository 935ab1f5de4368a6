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
from . import task
from .align import align_case
from .ir import tensor_from_wire
from .outcome import RunOutcome
from .registry import BackendSpec
from .sandbox import Fault, RemoteError, Sandbox

DIVERGENT = ("target-divergent", "reference-divergent", "ill-conditioned")


@dataclass
class JobSettings:
    reference: str
    oracle: str | None = None
    timeout_s: float = 300.0
    repeats: int = 3
    retry_faults: bool = True
    compare: dict = field(default_factory=dict)
    output_kind: str = "tensor"  # the seed's, for tier 3
    output_names: list = field(default_factory=list)
    detection_adapter: bool = True  # canonical candidate order before comparing and before NMS
    align: bool = True  # tier 2 for target-divergent runs
    ledger: object = None  # an AlignLedger (or its Ray actor): tier 2 once per case, not per run

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
    """One variant's runs in one sandbox. ``payload`` None: the sandbox built the variant and keeps
    it; ``fetch()`` gives the payload when it does not (any more, after a crash)."""

    def __init__(self, sandbox: Sandbox, variant_id: str, payload: dict | None, settings: JobSettings, worker: str,
                 fetch=None):
        self.sb, self.vid, self.payload, self.s, self.worker = sandbox, variant_id, payload, settings, worker
        self.fetch = fetch
        self.seed_outputs = payload.get("seed_outputs") if payload else None
        self.loaded = False
        self.outputs: dict[str, list] = {}

    def _load(self) -> None:
        if self.loaded:
            return
        try:
            reply = self.sb.request("load", self.vid, self.payload, timeout=max(60.0, self.s.timeout_s))
        except RemoteError:
            if self.payload is not None or self.fetch is None:
                raise
            self.payload = self.fetch()  # the sandbox that built it is gone: send it after all
            self.seed_outputs = self.payload.get("seed_outputs")
            return self._load()
        if isinstance(reply, Fault):
            raise RuntimeError(f"executor died loading variant {self.vid}: {reply.cause} {reply.message}")
        if self.payload is None:
            self.seed_outputs = reply.get("seed_outputs")
        self.loaded = True

    def _run_once(self, spec: BackendSpec):
        self._load()
        reply = self.sb.request("run", self.vid, spec.to_dict(), self.s.repeats,
                                timeout=spec.timeout_s or self.s.timeout_s)
        if isinstance(reply, Fault):
            self.loaded = False
        return reply

    def align(self, spec: BackendSpec, s: JobSettings) -> dict:
        """Tier 2 in the sandbox; a fault or error there leaves the run located nowhere, not lost."""
        self._load()
        ref_device = s.reference.split("@")[-1]
        try:
            reply = self.sb.request("align", self.vid, spec.to_dict(), s.compare,
                                    ref_device if ref_device == spec.device else "cpu",
                                    timeout=(spec.timeout_s or s.timeout_s) * 24)
        except RemoteError as e:
            return {"align_error": f"{e.info['error_type']}: {e.info['message'][:200]}"}
        if isinstance(reply, Fault):
            self.loaded = False
            return {"align_error": f"{reply.status} {reply.cause}"}
        return reply

    def run(self, spec: BackendSpec) -> RunOutcome:
        t0 = time.perf_counter()
        out = _outcome(spec, self.worker)
        try:
            reply = self._run_once(spec)
        except RemoteError as e:  # the harness failed around this run (a reply it could not decode)
            out.status, out.stage = "error", "run"
            out.error_type, out.message = e.info["error_type"], e.info["message"]
            out.worker_s = time.perf_counter() - t0
            return out
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


def run_variant(sandbox: Sandbox, variant_id: str, payload: dict | None, specs: list[dict], settings: dict,
                home_outputs: dict | None = None, worker: str = "", fetch=None) -> tuple[list[RunOutcome], dict]:
    """Outcomes for every spec, and the reference/oracle outputs for pools that run later."""
    s = JobSettings.from_dict(settings)
    job = VariantJob(sandbox, variant_id, payload, s, worker, fetch)
    outcomes = [job.run(BackendSpec(**d)) for d in specs]
    t0 = time.perf_counter()
    known = {**(home_outputs or {}), **job.outputs}
    seed_outputs = [tensor_from_wire(w) for w in job.seed_outputs] if job.seed_outputs else None
    judge = Judge(s, known.get(s.reference), known.get(s.oracle) if s.oracle else None, seed_outputs)
    for o, d in zip(outcomes, specs):
        if o.status == "ok" and o.backend != s.reference:
            judge(o, job.outputs[o.backend])
            if o.figures.get("verdict") == "target-divergent" and s.align:
                case = align_case(variant_id, o.backend, o.figures)
                known = _ask(s.ledger, "claim", case, variant_id) if s.ledger is not None else None
                if known:
                    o.figures["align_error"] = f"not run: {known}"
                    continue
                t1 = time.perf_counter()
                o.figures.update(job.align(BackendSpec(**d), s), align_s=time.perf_counter() - t1)
                if s.ledger is not None:
                    _ask(s.ledger, "settle", case, variant_id, o.figures.get("first_div_op"))
                if o.figures.get("amplified"):
                    o.figures["verdict"] = "amplified"
    share = (time.perf_counter() - t0) / max(1, len(outcomes))
    for o in outcomes:
        o.worker_s += share
    home = {k: v for k, v in job.outputs.items() if k in (s.reference, s.oracle)}
    return outcomes, home


def _ask(ledger, method: str, *args):
    """Call a ledger in this process, or the campaign's Ray actor."""
    fn = getattr(ledger, method)
    if hasattr(fn, "remote"):
        import ray

        return ray.get(fn.remote(*args))
    return fn(*args)


class Judge:
    """Tiers 1 and 3 and attribution for one target's outputs; the seed's outputs, for a
    semantics-preserving variant, break the tie when the fp64 oracle cannot."""

    def __init__(self, s: JobSettings, ref: list | None, oracle: list | None, seed_outputs: list | None):
        self.s, self.settings = s, cmp.Settings.from_dict(s.compare)
        canon = task.canonicalize if s.output_kind == "boxes" and s.detection_adapter else (lambda o, n: o)
        self.canon = lambda out: None if out is None else canon(out, s.output_names)
        self.ref, self.oracle, self.seed = self.canon(ref), self.canon(oracle), self.canon(seed_outputs)

    def __call__(self, o: RunOutcome, outputs: list) -> None:
        if self.ref is None:
            o.figures = {"verdict": "no-reference"}
            return
        out = self.canon(outputs)
        is_oracle = o.backend == self.s.oracle
        v = cmp.attribute(out, self.ref, None if is_oracle else self.oracle, self.settings)
        o.figures = v.columns()
        if self.seed is not None and not is_oracle:
            self._metamorphic(o, v, out)
        if is_oracle:
            o.figures["verdict"] = "oracle"
            return
        o.figures.update(task.task_agreement(self.s.output_kind, out, self.ref, self.s.output_names,
                                             self.s.detection_adapter, v.closeness.max_abs_err))
        if o.figures["verdict"] in DIVERGENT:
            o.status, o.stage = "mismatch", "compare"

    def _metamorphic(self, o: RunOutcome, v, out: list) -> None:
        meta = cmp.compare(out, self.seed, self.settings)
        o.figures["metamorphic_err"] = meta.tol_ratio
        if v.verdict == "ill-conditioned" and not meta.passed and cmp.compare(self.ref, self.seed, self.settings).passed:
            o.figures["verdict"] = "target-divergent"  # the reference keeps the seed's meaning; the target does not
