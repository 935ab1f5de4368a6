""""Still the same bug": a candidate shows its cluster's signature, judged in a fresh worker.

A crash or error must end with the same status, stage, exception type (or signal) and message
template; a discrepancy must keep its verdict from the fp64 oracle (the target blamed, or the
reference), its symptom, and the operator where the divergence started. An accuracy failure
therefore cannot shrink to nothing, nor to a different error.
"""
from __future__ import annotations

from dataclasses import dataclass

from analysis.signature import template
from workers.ir import Variant
from workers.registry import BackendSpec
from workers.runner import run_variant
from workers.sandbox import Sandbox


@dataclass
class Signature:
    """What makes two runs the same bug (from a cluster's representative record)."""

    status: str
    stage: str | None = None
    error_type: str | None = None
    template: str | None = None
    cause: str | None = None
    symptom: str | None = None
    first_div_op: str | None = None
    verdict: str | None = None

    @classmethod
    def of(cls, record: dict) -> Signature:
        if record["status"] == "mismatch":
            return cls("mismatch", symptom=record.get("symptom"), first_div_op=record.get("first_div_op") or None,
                       verdict=record.get("verdict") or "target-divergent")
        return cls(record["status"], record.get("stage"), record.get("error_type"), template(record.get("message")),
                   record.get("cause"))

    def matches(self, outcome, ops: list[str]) -> bool:
        if outcome.status != self.status:
            return False
        if self.status == "mismatch":
            f = outcome.figures
            return (f.get("verdict") == (self.verdict or "target-divergent") and f.get("symptom") == self.symptom
                    and (self.first_div_op is None or self.first_div_op in ops))
        if self.cause and outcome.cause:
            return outcome.cause == self.cause
        return (outcome.stage, outcome.error_type, template(outcome.message)) == \
            (self.stage, self.error_type, self.template)


class SameBug:
    """Callable predicate over variants: reference, oracle and target, in a fresh sandbox each time."""

    def __init__(self, target: BackendSpec, reference: BackendSpec, oracle: BackendSpec | None,
                 signature: Signature, settings: dict, fresh: bool = True, sandbox: Sandbox | None = None):
        self.specs = [s.to_dict() for s in (reference, oracle, target) if s is not None]
        self.target_name, self.signature, self.fresh = target.name, signature, fresh
        self.settings = {**settings, "reference": reference.name, "oracle": oracle.name if oracle else None,
                         "align": False, "retry_faults": False}
        self.sandbox = sandbox or Sandbox()
        self.calls = 0

    def __call__(self, v: Variant) -> bool:
        self.calls += 1
        if self.fresh:
            self.sandbox.stop()  # the next request adopts the warm spare: a fresh process, no import wait
        settings = {**self.settings, "output_names": list(v.output_names)}
        try:
            outcomes, _ = run_variant(self.sandbox, f"candidate-{self.calls}", v.to_payload(), self.specs, settings)
        except Exception:  # noqa: BLE001 - a candidate the executor cannot even load is not the bug
            return False
        ref = outcomes[0]
        target = next(o for o in outcomes if o.backend == self.target_name)
        return ref.status == "ok" and self.signature.matches(target, v.ops)

    def close(self) -> None:
        self.sandbox.close()
