"""The judging passes' calls into the sandbox, both sides in one module: what a pass asks of a variant's
job (``FromJob``, mixed into ``runner.VariantJob``) and what the sandboxed executor does for it (``InSandbox``,
mixed into ``executor.Executor``). A pass that needs the sandbox adds one method on each side here.
"""
from __future__ import annotations

import dataclasses

from gapfuzz.core.bugs import Status
from gapfuzz.core.ids import BackendName
from gapfuzz.core.ir import packed_outputs, tensor_from_wire
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.judge.culprit import bisect
from gapfuzz.workers.judge.explain import declared, explain, hypotheses, measure
from gapfuzz.workers.run.backend_run import _prepared, to_host
from gapfuzz.workers.run.budget import ALIGNING, BISECTING, EXPLAINING
from gapfuzz.workers.run.messages import Execution
from gapfuzz.workers.run.platform import TF32, Precision
from gapfuzz.workers.run.probes import EXAMPLE, RESIZE, Probe, probed
from gapfuzz.workers.run.registry import BackendSpec
from gapfuzz.workers.run.sandbox import Fault, RemoteError
from gapfuzz.workers.run.training import autograd_for


class CompiledAtExample:
    """A backend whose prepared callable is first called once on the variant's example inputs: a resize
    probe's run (compiled at the example's sizes, then called at the probe's) for tier 2, which prepares
    prefixes of the graph. A graph of other inputs (one node alone) is prepared as it is."""

    def __init__(self, backend, example: tuple):
        self.backend, self.example = backend, example

    def prepare(self, gm, inputs: tuple, device: str):
        from gapfuzz.core.ir import clone_exact

        if len(inputs) != len(self.example):
            return self.backend.prepare(gm, inputs, device)
        fn = self.backend.prepare(gm, self.example, device)
        fn(*(clone_exact(t) for t in self.example))
        return fn

    def __getattr__(self, name: str):
        return getattr(self.backend, name)


class InSandbox:
    """The executor's side (``executor.Executor``): each method runs in the sandboxed process, on a variant it
    holds (``self.payloads``), and releases the device's memory after."""

    def bisect(self, variant_id: str, spec, probe: Probe, reference: list, settings, error_type: str | None,
               budget_s: float = 900.0) -> dict:
        """PyTorch's ``CompilerBisector`` on one finding of a torch.compile stack (``workers.judge.culprit``):
        each step compiles the probe's variant afresh and calls it once (a resize probe's: compiled and
        called at the example's sizes first, as its run was); the finding is present while the outputs
        differ from ``reference`` at ``settings`` (a divergence) or the call raises ``error_type`` (a failure)."""
        import torch

        from gapfuzz.core.ir import Variant, clone_exact
        from gapfuzz.workers.judge.compare import compare

        reference = [tensor_from_wire(x) if isinstance(x, dict) else x for x in reference]
        self._settle()
        example = Variant.from_payload(self.payloads[variant_id])
        variant = probed(example, probe)
        backend = spec.create()
        device = backend.input_device or spec.device
        inputs = tuple(t.to(device) for t in variant.inputs)
        first = tuple(t.to(device) for t in example.inputs) if probe.kind == RESIZE else None

        def good() -> bool:
            torch._dynamo.reset()
            try:
                with autograd_for(variant), Precision.of(spec.options).applied():
                    fn = _prepared(spec.create(), variant, first or inputs, spec.device)
                    if first:
                        fn(*(clone_exact(t) for t in first))
                    out = to_host(fn(*(clone_exact(t) for t in inputs)))
            except Exception as e:  # noqa: BLE001 - the failure under test, or another (not this finding)
                return error_type is None or type(e).__name__ != error_type
            return error_type is not None or compare(out, reference, settings).passed

        try:
            if good():
                return {"bisect_error": "did not show again when compiled afresh"}
            return bisect(good, budget_s)
        finally:
            self._release(spec.device)

    def align(self, variant_id: str, spec, settings, reference_device: str = "cpu", probe: Probe = Probe(),
              wrong_grads: tuple = (), symptom: str | None = None) -> dict:
        """Tier 2 for one divergent target on one probe: the first divergent node, its growth, amplification;
        for a training run whose gradients ``wrong_grads`` alone diverge, the node whose backward does."""
        from gapfuzz.core.ir import Variant
        from gapfuzz.workers.judge.align import Aligner
        from gapfuzz.workers.judge.grad_align import GradAligner

        self._settle()
        example = Variant.from_payload(self.payloads[variant_id])
        variant = probed(example, probe)
        backend = spec.create()
        input_device = backend.input_device or spec.device
        make = spec.create
        if probe.kind == RESIZE:  # each prepare compiled and called at the example's sizes first, as the run was
            first = tuple(t.to(input_device) for t in example.inputs)
            make = lambda: CompiledAtExample(spec.create(), first)  # noqa: E731
        try:
            with Precision.of(spec.options).applied():
                if wrong_grads:
                    return GradAligner(variant, make, spec.device, input_device, settings, list(wrong_grads),
                                       reference_device).locate()
                aligner = Aligner(variant, make, spec.device, input_device, settings, reference_device, symptom)
                return aligner.locate(backend.capture_nodes)
        finally:
            self._release(spec.device)

    def numpy_answer(self, variant_id: str, probe: Probe) -> list | None:
        """numpy's outputs on the probe, for a one-operator graph numpy has (``workers.judge.consensus``)."""
        from gapfuzz.core.ir import Variant
        from gapfuzz.workers.judge.consensus import numpy_outputs

        self._settle()
        variant = probed(Variant.from_payload(self.payloads[variant_id]), probe)
        return numpy_outputs(variant.gm, variant.inputs)

    def raising_op(self, variant_id: str, probe: Probe) -> str | None:
        """The operator whose eager run raises on the probe (a check of its input), None when none does."""
        from gapfuzz.core.ir import Variant, target_name
        from gapfuzz.workers.judge.interpret import raising_node

        self._settle()
        variant = probed(Variant.from_payload(self.payloads[variant_id]), probe)
        node = raising_node(variant.gm, variant.inputs)
        return None if node is None else target_name(node.target)

    def emulate(self, variant_id: str, probe: Probe, modes: tuple, device: str = "cpu") -> dict:
        """Eager's outputs on the probe under each explanation hypothesis of ``modes`` (``workers.judge.emulate``)."""
        from gapfuzz.core.ir import Variant
        from gapfuzz.workers.judge.emulate import emulate

        self._settle()
        variant = probed(Variant.from_payload(self.payloads[variant_id]), probe)
        return emulate(variant.gm, variant.inputs, modes, device)


class FromJob:
    """A variant job's side (``runner.VariantJob``): each call charged to its pair's budget where it is a pass's
    stage; a fault or error there leaves the run unexplained, unlocated or unbisected, never lost."""

    def align(self, spec: BackendSpec, probe: Probe, wrong_grads: tuple = (), symptom: str | None = None) -> dict:
        """Tier 2 (location) in the sandbox, on the probe's inputs; a fault or error there leaves the run located
        nowhere, not lost."""
        self._load()
        try:
            reply = self._charged(spec.name, ALIGNING, InSandbox.align, self.vid, spec, self.s.compare,
                                  self._reference_device(spec), probe, wrong_grads, symptom,
                                  timeout=(spec.timeout_s or self.s.timeout_s) * 24)
        except RemoteError as e:
            return {"align_error": f"{e.info['error_type']}: {e.info['message'][:200]}"}
        if isinstance(reply, Fault):
            return {"align_error": self.over_budget(spec.name) or f"{reply.status} {reply.cause}"}
        return reply

    def bisect(self, spec: BackendSpec, probe: Probe, ref: list | None, failure: str | None) -> dict:
        """PyTorch's CompilerBisector on a run of ``spec`` (``InSandbox.bisect``: against ``ref``, or for
        the error ``failure``), in the sandbox; a fault or error there is its ``bisect_error``. It stops unfinished
        at ``bisect_budget_s`` or when its pair's budget runs out, whichever comes first."""
        budget = min(self.s.bisect_budget_s, self.clock.left(spec.name))
        try:
            self._load()
            reply = self._charged(spec.name, BISECTING, InSandbox.bisect, self.vid, spec, probe,
                                  packed_outputs(ref) if ref else [], self.s.compare, failure, budget,
                                  timeout=self.s.bisect_budget_s + (spec.timeout_s or self.s.timeout_s) * 2)
        except RemoteError as e:
            return {"bisect_error": f"{e.info['error_type']}: {e.info['message'][:200]}"}
        if isinstance(reply, Fault):
            return {"bisect_error": self.over_budget(spec.name) or f"{reply.status} {reply.cause or ''}".strip()}
        if budget < self.s.bisect_budget_s and str(reply.get("bisect_error", "")).startswith("over its"):
            self.clock.exhaust(spec.name, BISECTING)  # it stopped for the pair's budget, not its own
            reply = {**reply, "bisect_error": self.clock.why(spec.name) + reply["bisect_error"].split("budget", 1)[1]}
        return reply

    def _reference_device(self, spec: BackendSpec) -> str:
        """Where tier 2 and the emulations run the reference: the target's device when the reference or
        the device's own reference (``backends.device_reference``) runs there, else the host."""
        device = BackendName.parse(self.s.reference).device
        own = self.s.device_references.get(spec.device) not in (None, spec.name)
        return spec.device if device == spec.device or own else "cpu"

    def strict_outputs(self, spec: BackendSpec, probe: Probe) -> list | None:
        """``spec``'s outputs on ``probe`` with the platform's TF32 off (every probe run once, kept per
        backend); None when that run fails."""
        if spec.name not in self.strict:
            strict = dataclasses.replace(spec, options={**spec.options, TF32: False})
            others = [p for p in self.probes_for(spec) if p.kind != EXAMPLE]
            try:
                reply = self.run_once(strict, others, repeats=0, stage=EXPLAINING)
            except RemoteError:
                reply = None
            got = self.strict[spec.name] = {}  # a pair over its budget: none (run_once says so, unrun)
            if isinstance(reply, Execution) and reply.outcome.status == Status.OK:
                got[EXAMPLE] = reply.outputs
                got.update({r.probe.name: r.outputs for r in reply.probes if r.status == Status.OK})
        return self.strict[spec.name].get(probe.name)

    def explain(self, o: RunRecord, spec: BackendSpec, probe: Probe, reference: list) -> None:
        """The hypothesis that explains a divergent run (``workers.judge.explain``), from eager's emulations on
        the probe, each computed once per probe for all the targets (charged to the first pair that asks); a fault
        or error leaves it unexplained, and so does its pair's budget run out (the next pair asks again)."""
        modes = hypotheses(o.verdict, bool(o.tf32), declared(o.backend_info, spec.options))
        done = self.emulated.setdefault(probe.name, {})
        missing = tuple(m for m in modes if m not in done)
        if missing:
            try:
                self._load()
                reply = self._charged(spec.name, EXPLAINING, InSandbox.emulate, self.vid, probe, missing,
                                      self._reference_device(spec), timeout=max(60.0, self.s.timeout_s))
            except RemoteError:
                reply = None
            if not isinstance(reply, dict) and self.over_budget(spec.name):
                return
            done.update(measure(reply, reference, self.s.compare) if isinstance(reply, dict) else
                        dict.fromkeys(missing))
        found = explain(o.symptom, self.outputs[(o.backend, probe.name)], reference, {m: done[m] for m in modes},
                        self.s.compare)
        if found is not None:
            o.explanation, o.explain_ratio = str(found[0]), found[1]

    def _ask(self, method, probe: Probe):
        """``method``'s answer (an ``Executor`` method of the variant and a probe); None when it fails."""
        try:
            self._load()
            reply = self.sb.request(method, self.vid, probe, timeout=max(60.0, self.s.timeout_s))
        except RemoteError:
            return None
        if isinstance(reply, Fault):
            self.loaded = False
            return None
        return reply

    def numpy_answer(self, probe: Probe) -> list | None:
        """numpy's outputs on a probe of a one-operator graph (``workers.judge.consensus``); None when it has none."""
        return self._ask(InSandbox.numpy_answer, probe)

    def raising_op(self, probe: Probe) -> str | None:
        """The operator whose eager run raises on a probe the reference refused; None when unknown."""
        return self._ask(InSandbox.raising_op, probe)
