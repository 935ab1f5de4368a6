"""Attribute a variant's compiler findings inside their stacks, once per defect (``workers.judge.culprit``).

The judging chain's last pass (``workers.judge.chain``), after the judge and tier 2 (location), on what
they found: a target-divergent run that no hypothesis explains, or a run that raised at compile or
run time, of a stack that compiled it through ``torch.compile`` (bisected in the sandbox by
``Executor.bisect``) or that names option sets without its optimisations (run again with each, here).
A case is (stack, bug key): its first run is attributed and every other run of it, on any seed,
inherits the culprit (the ledger), so bisection costs once per defect, not once per run (a divergence
tier 2 did not locate has a provisional key: once per seed). What it cost is ``bisect_s``. It runs
within its pair's wall budget (``workers.run.budget``): a pair over it is not attributed, and its
``bisect_error`` says so.
"""
from __future__ import annotations

import dataclasses
import time

from gapfuzz.core.bugs import COMPLETED, Stage, Status, Symptom, Verdict, bug_key
from gapfuzz.workers.judge.align import ask as _ask
from gapfuzz.workers.judge.compare import compare
from gapfuzz.workers.judge.culprit import KERNEL_OR_CONVERSION, OPTIMISER, Culprit
from gapfuzz.workers.judge.pytorch_rule import TORCH_COMPILERS
from gapfuzz.workers.run.budget import BISECTING
from gapfuzz.workers.run.probes import EXAMPLE, Probe
from gapfuzz.workers.run.sandbox import Fault


def _finding(o) -> str | None:
    """``divergence``, ``failure`` or None: what of this run a culprit would explain."""
    if o.status in COMPLETED and o.verdict == Verdict.TARGET_DIVERGENT and not o.explanation:
        return "divergence"
    if o.status == Status.ERROR and o.stage in (Stage.COMPILE, Stage.RUN):
        return "failure"
    return None


def attributable(o, spec) -> bool:
    """A finding of a stack whose passes can be told apart; a missing check has no reference outputs
    to bisect against (eager raised)."""
    cls = spec.backend_cls()
    return _finding(o) is not None and o.symptom != Symptom.MISSING_ERROR and (
        o.compiler in TORCH_COMPILERS or bool(cls.unoptimised) or bool(cls.passes))


def attribute_findings(job, runs: list, specs: dict, known: dict, reference: str, seed_id: str, ledger) -> None:
    """Give each of ``runs`` (attributable ones: ``attributable``) its culprit columns: found here, or
    inherited from its case. ``job`` is the variant's ``runner.VariantJob``."""
    done: dict[tuple, Culprit] = {}
    for o in runs:
        spec = specs[o.backend]
        key = bug_key(o.key_fields())
        case = (o.backend, key.id if key else "")
        if case in done:
            done[case].inherit(o)
            continue
        over = job.over_budget(o.backend)  # it ran over attributing an earlier case of this variant
        if over:
            o.bisect_error = over
            continue
        # one defect, one bisection: a located or failing key is the same bug on every seed; an unlocated
        # divergence's key is provisional (no operator yet), so it stays the seed's
        where = "" if o.first_div_op or _finding(o) == "failure" else seed_id
        ledger_case = f"culprit|{where}|{o.backend}|{case[1]}"
        claimed = _ask(ledger.claim, ledger_case, job.vid, Culprit(job.vid)) if ledger is not None else None
        if claimed is not None:
            claimed.inherit(o)
            done[case] = claimed
            continue
        probe = next((p for p in job.probes if p.name == o.probe), Probe())
        ref = known.get((o.judged_against or reference, o.probe))
        t0 = time.perf_counter()
        columns = bisect_run(job, spec, o, probe, ref) if o.compiler in TORCH_COMPILERS else \
            differential(job, spec, o, probe, ref)
        columns.setdefault("bisect_s", time.perf_counter() - t0)
        o.update(**columns)
        culprit = Culprit.of(job.vid, o)
        done[case] = culprit
        if ledger is not None:
            _ask(ledger.settle, ledger_case, culprit)


def bisect_run(job, spec, o, probe: Probe, ref) -> dict:
    """PyTorch's CompilerBisector on the run, in the variant's sandbox."""
    failure = o.error_type if _finding(o) == "failure" else None
    if failure is None and not isinstance(ref, list):
        return {"bisect_error": "no reference outputs to bisect against"}
    return job.bisect(spec, probe, ref, failure)


def differential(job, spec, o, probe: Probe, ref) -> dict:
    """The stack again with each of its own passes off (``Backend.passes``), then with its
    optimisations off step by step (``Backend.unoptimised``): the first that no longer shows the
    finding names the part that causes it; a finding every step shows is in a kernel or the conversion."""
    stack = spec.backend_cls()
    for i, name in enumerate(stack.passes):  # a compiler's own passes, each disabled alone
        shown = _shows(job, spec, o, probe, ref, {"disabled_passes": [name]})
        if isinstance(shown, dict):
            return shown
        if not shown:
            return Culprit(job.vid, spec.stack, "passes", i, name, OPTIMISER, done=True).columns()
    for step, options in stack.unoptimised:
        shown = _shows(job, spec, o, probe, ref, options)
        if isinstance(shown, dict):
            return shown
        if not shown:
            return Culprit(job.vid, spec.stack, step, None, None, OPTIMISER, done=True).columns()
    return Culprit(job.vid, spec.stack, None, None, None, KERNEL_OR_CONVERSION, done=True).columns()


def _shows(job, spec, o, probe: Probe, ref, options: dict):
    """Whether the stack under ``options`` (over the run's own) still shows the run's finding on its
    probe; a dict of columns when that could not be told (its process died)."""
    quiet = dataclasses.replace(spec, options={**spec.options, **options})
    reply = job.run_once(quiet, [probe] if probe.kind != EXAMPLE else [], repeats=0, stage=BISECTING)
    if isinstance(reply, Fault):
        return {"bisect_error": job.over_budget(spec.name) or f"{options}: {reply.status} {reply.cause or ''}".strip()}
    if probe.kind == EXAMPLE:
        status, error_type, outputs = reply.outcome.status, reply.outcome.error_type, reply.outputs
    elif reply.probes:
        run = reply.probes[0]
        status, error_type, outputs = run.status, run.error_type, run.outputs
    else:  # the stack failed before the probe could run
        status, error_type, outputs = reply.outcome.status, reply.outcome.error_type, None
    if _finding(o) == "failure":
        return status != Status.OK and error_type == o.error_type
    return status != Status.OK or outputs is None or not compare(outputs, ref, job.s.compare).passed
