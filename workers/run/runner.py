"""Run one variant on a pool's backends in a sandbox, compare, and return outcomes.

Everything here is the pool's job, not the backend's: timeouts, isolation, the retry that tells a
reproducible crash from a flaky one, the probes (each prepared backend is called on several input
sets, ``workers.run.probes``: one record per probe), timing, and the sandbox calls the judging chain
makes (``workers.judge.chain``: the passes that judge, explain, locate and attribute each run once all
ran). A crash in a batch of probes is pinned on the input that caused it by running the example
alone, then each probe alone. Every sandbox call made for one backend is charged to its (variant,
backend) pair, within one wall budget per pair (``workers.run.budget``, which says how a pair over it
is recorded).
"""
from __future__ import annotations

import dataclasses
import platform
import socket
import time

from gapfuzz.core.bugs import FAILED, Stage, Status, Verdict
from gapfuzz.core.failures import Failure
from gapfuzz.core.ir import packed_outputs, tensor_from_wire, unpacked_outputs
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.judge.chain import PROBE_CHAIN, VARIANT_CHAIN, WITNESSES, Judging
from gapfuzz.workers.judge.comparisons import Judges
from gapfuzz.workers.judge.consensus import bit_exact, dtype_bound
from gapfuzz.workers.judge.verdict import RefusedProbe
from gapfuzz.workers.run.budget import RUNNING, PairClock
from gapfuzz.workers.run.executor import Executor
from gapfuzz.workers.run.judging_calls import FromJob
from gapfuzz.workers.run.messages import Execution, JudgeSettings, RunRequest
from gapfuzz.workers.run.outcome import new_outcome
from gapfuzz.workers.run.probes import EXAMPLE, RESIZE, Probe, ProbeRun
from gapfuzz.workers.run.registry import BackendSpec
from gapfuzz.workers.run.resize import takes_resizes
from gapfuzz.workers.run.sandbox import Fault, RemoteError, Sandbox


def _versions() -> dict:
    import torch

    return {"torch": torch.__version__, "python": platform.python_version(), "os": platform.platform()}


def _provenance(out: RunRecord, spec: BackendSpec, worker: str) -> RunRecord:
    """Where and with what an outcome was had: the options, the stack's version, the host and worker."""
    out.backend_options, out.backend_version = dict(spec.options), spec.backend_cls().version()
    out.host, out.worker, out.versions = socket.gethostname(), worker, _versions()
    out.torch_version = out.versions["torch"]
    return out


def _probe_outcome(example: RunRecord, run: ProbeRun) -> RunRecord:
    """A probe's record: the example's backend and provenance, the probe's own call."""
    failed = run.status != Status.OK
    return dataclasses.replace(
        example, probe=run.probe.name, probe_recipe=run.probe.recipe(), status=run.status,
        stage=Stage.RUN if failed else None, error_type=run.error_type, message=run.message, cause=None,
        prepare_s=None, first_run_s=None, latency_ms=None if run.run_s is None else 1e3 * run.run_s, run_s=run.run_s,
        runs=1, nondeterministic=None, inputs_mutated=None, input_checksum=run.input_checksum, worker_s=0.0)


class VariantJob(FromJob):
    """One variant's runs in one sandbox. ``payload`` None: the sandbox built the variant and keeps
    it; ``fetch()`` gives the payload when it does not (any more, after a crash). ``clock``: the pairs'
    budgets (``workers.run.budget``), charged by each sandbox call made for one backend."""

    def __init__(self, sandbox: Sandbox, variant_id: str, payload: dict | None, settings: JudgeSettings, worker: str,
                 fetch=None, clock: PairClock | None = None):
        self.sb, self.vid, self.payload, self.s, self.worker = sandbox, variant_id, payload, settings, worker
        self.fetch = fetch
        self.clock = clock or PairClock(variant_id, {})
        self.seed_outputs = payload.get("seed_outputs") if payload else None
        self.loaded = False
        self.probes: list[Probe] = [Probe()]  # the variant's, the example first (from the executor's load)
        self.stack_probes: dict = {}  # Backend.any_strides -> the probes of a stack that takes it (fewer layouts)
        self.outputs: dict[tuple[str, str], list] = {}  # (backend, probe) -> outputs
        self.emulated: dict[str, dict] = {}  # probe -> each explanation hypothesis's emulation, measured
        self.dtype_bound = False  # a graph whose result is its dtype's representation: judged without the oracle
        self.bit_exact = False  # a graph of operators exact by contract: a bitwise difference is strict
        self.ops: tuple = ()  # the variant's ATen operators
        self.strict: dict[str, dict] = {}  # backend -> probe -> its outputs with TF32 off (None: failed)

    def _load(self) -> None:
        if self.loaded:
            return
        try:
            reply = self.sb.request(Executor.load, self.vid, self.payload, self.s.probes,
                                    timeout=max(60.0, self.s.timeout_s))
        except RemoteError:
            if self.payload is not None or self.fetch is None:
                raise
            self.payload = self.fetch()  # the sandbox that built it is gone: send it after all
            self.seed_outputs = self.payload.get("seed_outputs")
            return self._load()
        if isinstance(reply, Fault):
            raise RuntimeError(f"executor died loading variant {self.vid}: {reply.cause} {reply.message}")
        if self.payload is None:
            self.seed_outputs = reply["seed_outputs"]
        self.probes = reply["probes"]
        self.stack_probes = reply.get("stack_probes", {})
        self.dtype_bound = dtype_bound(reply.get("ops", ()), self.s.compare.dtype_bound_ops)
        self.bit_exact = bit_exact(reply.get("ops", ()))
        self.ops = tuple(reply.get("ops", ()))
        self.loaded = True

    def probes_for(self, spec: BackendSpec) -> list[Probe]:
        """The probes ``spec`` runs: every one for the reference and the oracle, else those its stack
        takes without compiling again for each layout (``Backend.any_strides``, ``workers.run.probes.choose``),
        and resize probes only where it compiled for dynamic shapes (``workers.run.resize.takes_resizes``)."""
        if spec.name in (self.s.reference, self.s.oracle):
            return self.probes
        chosen = self.stack_probes.get(spec.backend_cls().any_strides, self.probes)
        return chosen if takes_resizes(spec.options) else [p for p in chosen if p.kind != RESIZE]

    def _charged(self, backend: str, stage: str, method, *args, timeout: float):
        """``method`` in the sandbox on behalf of ``backend``'s pair, doing ``stage``, within the pair's budget:
        its reply, or a timeout ``Fault`` whose cause names the budget when that ran out (before or during it)."""
        with self.clock.spend(backend, stage) as left:
            if left <= 0:
                return Fault(Status.TIMEOUT, self.clock.cause(backend), self.clock.why(backend))
            reply = self.sb.request(method, *args, timeout=min(timeout, left))
        if isinstance(reply, Fault):
            self.loaded = self.loaded and self.sb.alive()  # a process killed or dead holds the variant no more
            if reply.status == Status.TIMEOUT and left < timeout:
                return dataclasses.replace(reply, cause=self.clock.cause(backend))
        return reply

    def over_budget(self, backend: str) -> str | None:
        """Why ``backend``'s pair runs nothing more (``over the pair's budget ...``); None while it has time."""
        return self.clock.why(backend) if self.clock.over(backend) else None

    def run_once(self, spec: BackendSpec, probes: list[Probe], repeats: int | None = None,
                 stage: str = RUNNING) -> Execution | Fault:
        """``spec`` prepared and run on the example and ``probes`` (``repeats`` timed calls: the settings'
        by default), charged to its pair as ``stage``; a fault means the executor that held the variant is gone
        (or the pair's budget ran out)."""
        self._load()
        return self._charged(spec.name, stage, Executor.run, self.vid, spec,
                             self.s.repeats if repeats is None else repeats, tuple(probes),
                             timeout=spec.timeout_s or self.s.timeout_s)

    def run(self, spec: BackendSpec) -> list[RunRecord]:
        """One outcome per probe (the example's first), or the one failure that stopped the backend."""
        t0 = time.perf_counter()
        try:
            self._load()
            others = [p for p in self.probes_for(spec) if p.kind != EXAMPLE]
            reply = self.run_once(spec, others)
        except RemoteError as e:  # the harness failed around this run (a reply it could not decode)
            reply = new_outcome(spec, Failure.from_error(e.info, Stage.RUN))
        if isinstance(reply, Fault):
            outcomes = self._isolate(spec, reply, others)
        elif isinstance(reply, Execution):
            outcomes = self._take(spec, reply)
        else:
            outcomes = [reply]
        for out in outcomes:
            _provenance(out, spec, self.worker)
        outcomes[0].worker_s = time.perf_counter() - t0
        return outcomes

    def _take(self, spec: BackendSpec, reply: Execution) -> list[RunRecord]:
        example = reply.outcome
        self.outputs[(spec.name, EXAMPLE)] = reply.outputs
        outcomes = [example]
        for run in reply.probes:
            self.outputs[(spec.name, run.probe.name)] = run.outputs
            outcomes.append(_probe_outcome(example, run))
        return outcomes

    def _isolate(self, spec: BackendSpec, fault: Fault, others: list[Probe]) -> list[RunRecord]:
        """The process died: the example alone (the retry that tells a reproducible fault), then each probe
        alone, so that each record says which input set killed it; none of it once the pair's budget ran out
        (the probes not run then are each a timeout)."""
        out = new_outcome(spec, Failure.from_fault(fault, Stage.RUN))
        if self.over_budget(spec.name):
            return [out]
        if not others:  # no probes: the retry only tells a reproducible fault from a flaky one
            if self.s.retry_faults:
                out.reproducible = isinstance(self.run_once(spec, []), Fault)
            return [out]
        alone = self.run_once(spec, [])
        if isinstance(alone, Fault):
            out.reproducible = True
            return [out]  # the backend dies before any probe could run
        outcomes = self._take(spec, alone)
        for probe in others:
            if self.over_budget(spec.name):
                why, cause = self.clock.why(spec.name), self.clock.cause(spec.name)
                over = Failure(Status.TIMEOUT, Stage.RUN, "timeout", why, cause)
                outcomes.append(new_outcome(spec, over, probe))
                continue
            reply = self.run_once(spec, [probe], repeats=0)
            if isinstance(reply, Fault):
                outcomes.append(new_outcome(spec, Failure.from_fault(reply, Stage.RUN), probe))
            else:
                outcomes += self._take(spec, reply)[1:]
        return outcomes


def run_variant(sandbox: Sandbox, request: RunRequest, home_outputs: dict | None = None, worker: str = "",
                fetch=None, clock: PairClock | None = None) -> tuple[list[RunRecord], dict]:
    """Outcomes for every spec and probe, and the reference/oracle outputs for pools that run later; ``clock``:
    the pairs' budgets, read by the worker for what it is doing (``PairClock.of(request)`` when not given)."""
    s = _with_resizes(request)
    job = VariantJob(sandbox, request.variant_id, request.payload, s, worker, fetch, clock or PairClock.of(request, s))
    outcomes = [o for spec in request.specs for o in job.run(spec)]
    t0 = time.perf_counter()
    home_outputs = dict(home_outputs or {})
    witnesses = home_outputs.pop(WITNESSES, {})  # the home pool's divergent targets: the consensus's too
    known = {**{k: unpacked_outputs(v) for k, v in home_outputs.items()}, **job.outputs}
    seed_outputs = [tensor_from_wire(w) for w in job.seed_outputs] if job.seed_outputs else None
    specs = {spec.name: spec for spec in request.specs}
    for o in outcomes:
        if o.backend == s.reference and o.status in FAILED:  # the example too: a reproducer runs on the probe
            known[(s.reference, o.probe)] = RefusedProbe(o.error_type or "", o.message or "")
            if o.status in (Status.ERROR, Status.UNSUPPORTED):  # an input the model refuses: not a finding
                o.status = Status.SKIPPED
                o.message = f"the reference refuses this probe: {o.error_type}: {o.message or ''}"[:2000]
    judging = Judging(job, request, s, specs, known, outcomes, witnesses=witnesses)
    for probe in job.probes:
        refused = known.get((s.reference, probe.name))
        if isinstance(refused, RefusedProbe):
            _excuse(job, s, probe, refused, [o for o in outcomes if o.probe == probe.name and o.backend != s.reference])
            continue
        judges = Judges(s, request, known, probe.name, seed_outputs if probe.kind == EXAMPLE else None, job.ops,
                        dtype_bound=job.dtype_bound, strict=job.bit_exact)
        on_probe = judging.on(probe, judges)
        PROBE_CHAIN.run(on_probe, [o for o in on_probe.here if o.status == Status.OK and o.backend != s.reference])
    VARIANT_CHAIN.run(judging, outcomes)
    share = (time.perf_counter() - t0) / max(1, len(outcomes))
    for o in outcomes:
        o.worker_s += share
    mine = {(o.backend, o.probe): specs[o.backend].stack for o in outcomes if request.hands_on and o.backend in specs
            and o.verdict in (Verdict.TARGET_DIVERGENT, Verdict.REFERENCE_SUSPECT) and o.judged_against == s.reference
            and not o.tf32}  # for the consensus of the pools that run later (a release's, another device's)
    home = {k: packed_outputs(v) for k, v in known.items() if k[0] in (s.reference, s.oracle) or k in mine}
    home[WITNESSES] = mine
    return outcomes, home


def _with_resizes(request: RunRequest) -> JudgeSettings:
    """The request's settings, asking for resize probes where a stack compiled for dynamic shapes runs
    beside the reference, which must run them too (a target in another pool gets none)."""
    s = request.settings
    names = {spec.name for spec in request.specs}
    if s.probes is None or s.reference not in names or not any(takes_resizes(spec.options) for spec in request.specs):
        return s
    return dataclasses.replace(s, probes=dataclasses.replace(s.probes, resize=True))


def _excuse(job: VariantJob, s: JudgeSettings, probe: Probe, refused: RefusedProbe, targets: list[RunRecord]) -> None:
    """The reference refused the probe: no target is judged on it (``RefusedProbe.excuse``); a PyTorch
    compiler that returned where eager checked the input is told which operator's check it dropped."""
    returned = refused.checks_input and any(o.status == Status.OK and o.backend != s.oracle for o in targets)
    op = job.raising_op(probe) if returned else None
    for o in targets:
        refused.excuse(o, op, target=o.backend != s.oracle)
