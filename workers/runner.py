"""Run one variant on a pool's backends in a sandbox, compare, and return outcomes.

Everything here is the pool's job, not the backend's: timeouts, isolation, the retry
that tells a reproducible crash from a flaky one, timing and comparing.
"""
from __future__ import annotations

import platform
import socket
import time

from core.bugs import DIVERGENT, Stage, Status, Verdict, bug_key
from core.ir import tensor_from_wire

from .align import align_case
from .compare import Settings, attribute, compare
from .executor import Executor
from .messages import Execution, JudgeSettings, RunRequest
from .outcome import RunOutcome
from .registry import BackendSpec
from .sandbox import Fault, RemoteError, Sandbox
from .task import canonicalize, task_agreement

def _versions() -> dict:
    import torch

    return {"torch": torch.__version__, "python": platform.python_version(), "os": platform.platform()}


def _provenance(out: RunOutcome, spec: BackendSpec, worker: str) -> RunOutcome:
    """Where and with what an outcome was had: the options, the stack's version, the host and worker."""
    out.options, out.backend_version = dict(spec.options), spec.backend_cls().version()
    out.host, out.worker, out.versions = socket.gethostname(), worker, _versions()
    return out


class VariantJob:
    """One variant's runs in one sandbox. ``payload`` None: the sandbox built the variant and keeps
    it; ``fetch()`` gives the payload when it does not (any more, after a crash)."""

    def __init__(self, sandbox: Sandbox, variant_id: str, payload: dict | None, settings: JudgeSettings, worker: str,
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
            reply = self.sb.request(Executor.load, self.vid, self.payload, timeout=max(60.0, self.s.timeout_s))
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

    def _run_once(self, spec: BackendSpec) -> Execution | Fault:
        self._load()
        reply = self.sb.request(Executor.run, self.vid, spec, self.s.repeats, timeout=spec.timeout_s or self.s.timeout_s)
        if isinstance(reply, Fault):
            self.loaded = False
        return reply

    def align(self, spec: BackendSpec) -> dict:
        """Tier 2 in the sandbox; a fault or error there leaves the run located nowhere, not lost."""
        self._load()
        ref_device = self.s.reference.split("@")[-1]
        try:
            reply = self.sb.request(Executor.align, self.vid, spec, self.s.compare,
                                    ref_device if ref_device == spec.device else "cpu",
                                    timeout=(spec.timeout_s or self.s.timeout_s) * 24)
        except RemoteError as e:
            return {"align_error": f"{e.info['error_type']}: {e.info['message'][:200]}"}
        if isinstance(reply, Fault):
            self.loaded = False
            return {"align_error": f"{reply.status} {reply.cause}"}
        return reply

    def run(self, spec: BackendSpec) -> RunOutcome:
        t0 = time.perf_counter()
        try:
            reply = self._run_once(spec)
        except RemoteError as e:  # the harness failed around this run (a reply it could not decode)
            reply = RunOutcome(spec.name, spec.stack, spec.device, status=Status.ERROR, stage=Stage.RUN,
                               error_type=e.info["error_type"], message=e.info["message"])
        if isinstance(reply, Fault):
            out = RunOutcome(spec.name, spec.stack, spec.device, status=reply.status, stage=Stage.RUN,
                             cause=reply.cause, message=reply.message,
                             error_type=reply.cause.split(":")[-1].split()[0] if reply.cause else None)
            if self.s.retry_faults:
                out.reproducible = isinstance(self._run_once(spec), Fault)
        elif isinstance(reply, Execution):
            out, self.outputs[spec.name] = reply.outcome, reply.outputs
        else:
            out = reply
        _provenance(out, spec, self.worker)
        out.worker_s = time.perf_counter() - t0
        return out


def run_variant(sandbox: Sandbox, request: RunRequest, home_outputs: dict | None = None, worker: str = "",
                fetch=None) -> tuple[list[RunOutcome], dict]:
    """Outcomes for every spec, and the reference/oracle outputs for pools that run later."""
    s = request.settings
    job = VariantJob(sandbox, request.variant_id, request.payload, s, worker, fetch)
    outcomes = [job.run(spec) for spec in request.specs]
    t0 = time.perf_counter()
    known = {**(home_outputs or {}), **job.outputs}
    seed_outputs = [tensor_from_wire(w) for w in job.seed_outputs] if job.seed_outputs else None
    judge = Judge(s, request, known.get(s.reference), known.get(s.oracle) if s.oracle else None, seed_outputs)
    for o, spec in zip(outcomes, request.specs):
        if o.status == Status.OK and o.backend != s.reference:
            judge(o, job.outputs[o.backend])
            if o.figures.get("verdict") == Verdict.TARGET_DIVERGENT and s.align:
                _locate(job, spec, o, align_case(request.seed_id, bug_key(o.key_fields())), s.ledger)
    share = (time.perf_counter() - t0) / max(1, len(outcomes))
    for o in outcomes:
        o.worker_s += share
    home = {k: v for k, v in job.outputs.items() if k in (s.reference, s.oracle)}
    return outcomes, home


def _locate(job: VariantJob, spec: BackendSpec, o: RunOutcome, case: str, ledger) -> None:
    """Tier 2 for one target-divergent run, unless the ledger says its case is located elsewhere."""
    known = _ask(ledger.claim, case, job.vid) if ledger is not None else None
    if known:
        o.figures["align_error"] = f"not run: {known}"
        return
    t1 = time.perf_counter()
    o.figures.update(job.align(spec), align_s=time.perf_counter() - t1)
    if ledger is not None:
        _ask(ledger.settle, case, job.vid, o.figures.get("first_div_op"))
    if o.figures.get("amplified"):
        o.figures["verdict"] = Verdict.AMPLIFIED


def _ask(fn, *args):
    """Call a ledger's method in this process, or on the campaign's Ray actor."""
    if hasattr(fn, "remote"):
        import ray

        return ray.get(fn.remote(*args))
    return fn(*args)


def judge_outputs(out: list, ref: list, oracle: list | None, settings: Settings, kind: str, names: list,
                  detection_adapter: bool = True) -> dict:
    """Tiers 1 and 3 of one target's outputs against the reference, attributed with the oracle:
    the record's comparison columns (a reproducer judges with this very function)."""
    v = attribute(out, ref, oracle, settings)
    figures = v.columns()
    figures.update(task_agreement(kind, out, ref, names, detection_adapter, v.closeness.max_abs_err))
    return figures


class Judge:
    """Tiers 1 and 3 and attribution for one target's outputs; the seed's outputs, for a
    semantics-preserving variant, break the tie when the fp64 oracle cannot."""

    def __init__(self, s: JudgeSettings, request: RunRequest, ref: list | None, oracle: list | None,
                 seed_outputs: list | None):
        self.s, self.kind, self.names = s, request.output_kind, request.output_names
        boxes = self.kind == "boxes" and s.detection_adapter
        self.canon = lambda out: None if out is None else (canonicalize(out, self.names) if boxes else out)
        self.ref, self.oracle, self.seed = self.canon(ref), self.canon(oracle), self.canon(seed_outputs)

    def __call__(self, o: RunOutcome, outputs: list) -> None:
        if self.ref is None:
            o.figures = {"verdict": Verdict.NO_REFERENCE}
            return
        out = self.canon(outputs)
        if o.backend == self.s.oracle:
            o.figures = {**attribute(out, self.ref, None, self.s.compare).columns(), "verdict": Verdict.ORACLE}
            return
        o.figures = judge_outputs(out, self.ref, self.oracle, self.s.compare, self.kind, self.names,
                                  self.s.detection_adapter)
        if self.seed is not None:
            self._metamorphic(o, out)
        if o.figures["verdict"] in DIVERGENT:
            o.status, o.stage = Status.MISMATCH, Stage.COMPARE

    def _metamorphic(self, o: RunOutcome, out: list) -> None:
        meta = compare(out, self.seed, self.s.compare)
        o.figures["metamorphic_err"] = meta.tol_ratio
        if o.figures["verdict"] == Verdict.ILL_CONDITIONED and not meta.passed and \
                compare(self.ref, self.seed, self.s.compare).passed:
            o.figures["verdict"] = Verdict.TARGET_DIVERGENT  # the reference keeps the seed's meaning; the target does not
