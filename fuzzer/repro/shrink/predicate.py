""""Still the same bug": a candidate shows its cluster's bug key, judged in a fresh worker.

The key is ``core.bugs``' one definition, so the reducer keeps exactly what triage clustered: a
crash or error must end with the same status, stage, exception type (or signal) and message
template; a discrepancy must keep its verdict from the float64 oracle (the target blamed, the
reference, or both far), its symptom and output dtype, and the operator where it started must
still be in the graph, and the located node's symptom must be the candidate's (``BugKey.shown_by``).
An accuracy failure therefore cannot shrink to nothing, nor to a different error. Candidates are
judged with the campaign's own settings.
"""
from __future__ import annotations

import dataclasses

from gapfuzz.core.bugs import BugKey, Kind, Status, Symptom, bug_key
from gapfuzz.core.ir import Variant
from gapfuzz.workers.run.messages import JudgeSettings, RunRequest
from gapfuzz.workers.run.registry import BackendSpec
from gapfuzz.workers.run.runner import run_variant
from gapfuzz.workers.run.sandbox import Sandbox
from gapfuzz.workers.run.training import output_names


class SameBug:
    """Callable predicate over variants: reference, oracle and target, in a fresh sandbox each time."""

    def __init__(self, target: BackendSpec, reference: BackendSpec, oracle: BackendSpec | None, key: BugKey,
                 settings: JudgeSettings, seed_id: str, output_kind: str = "tensor", fresh: bool = True,
                 sandbox: Sandbox | None = None, probe: str | None = None):
        self.specs = [s for s in (reference, oracle, target) if s is not None]
        self.target_name, self.key, self.fresh = target.name, key, fresh
        self.settings, self.seed_id, self.output_kind = settings, seed_id, output_kind
        self.sandbox = sandbox or Sandbox()
        self.calls = 0
        # the probe the bug showed on: a candidate runs its inputs as its example, and is keyed as that probe
        # (a divergence at an overflow edge is keyed as numeric there, core.bugs)
        self.probe = probe
        self.bisected = 0  # candidate runs that were bisected: none, as core.bugs says (shrink.json shows it)

    def __call__(self, v: Variant) -> bool:
        self.calls += 1
        outcomes = self._run(v, self.settings)
        if outcomes is None:
            return False
        target = next(o for o in outcomes if o.backend == self.target_name)
        self.bisected += any(getattr(target, c, None) is not None for c in ("bisect_s", "bisect_error", "culprit"))
        missing_check = self.key.kind == Kind.DISCREPANCY and self.key["symptom"].startswith(Symptom.MISSING_ERROR)
        reference_ran = outcomes[0].status == Status.OK or missing_check  # eager's check is the bug's half
        return reference_ran and self.key.shown_by(self.key_of(target), v.ops)

    def key_of(self, target):
        """The bug key of the target's run, keyed as the probe the bug showed on."""
        return bug_key({**target.key_fields(), **({"probe": self.probe} if self.probe else {})})

    def target_run(self, v: Variant, settings: JudgeSettings):
        """The target's record of one run of ``v`` under ``settings`` (``gapfuzz explain``: with every
        attribution on); None when the executor could not run it."""
        return next((o for o in self._run(v, settings) or () if o.backend == self.target_name), None)

    def explanation(self, v: Variant) -> str | None:
        """What triage's hypotheses (a lower precision, another option set) say of ``v``'s divergence, run
        once on the final graph: a candidate that an explanation covers shows a behaviour, not this bug."""
        target = self.target_run(v, dataclasses.replace(self.settings, explain=True))
        return getattr(target, "explanation", None) or None

    def _run(self, v: Variant, settings: JudgeSettings):
        if self.fresh:
            self.sandbox.stop()  # the next request adopts the warm spare: a fresh process, no import wait
        request = RunRequest(f"candidate-{self.calls}", self.seed_id, v.to_payload(), self.specs, settings,
                             self.output_kind, list(output_names(v)), v.mode)
        try:
            return run_variant(self.sandbox, request)[0]
        except Exception:  # noqa: BLE001 - a candidate the executor cannot even load is not the bug
            return None

    def close(self) -> None:
        self.sandbox.close()
