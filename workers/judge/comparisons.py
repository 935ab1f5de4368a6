"""Which reference judges a run: two questions, two comparisons.

A compiler or runtime on an accelerator answers to eager on the same device: that is the comparison
its maintainers accept, and it keeps what the platform does (its kernels, cuDNN, cuBLAS, TF32) out of
the compiler's findings. Eager on the accelerator answers to eager on the host: the platform's own
comparison. ``backends.device_reference`` (``fuzzer.config.campaign.device_references``) names eager on each
device; a run falls back to the host's reference where that one did not run cleanly on the probe.
Where a stack is judged against the host anyway and does just what eager on its device does, the
divergence is the platform's (``Explanation.PLATFORM``), never the stack's.
"""
from __future__ import annotations

import dataclasses

from gapfuzz.core.bugs import Explanation, Status, Verdict
from gapfuzz.core.ids import BackendName
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.judge.compare import compare
from gapfuzz.workers.judge.verdict import Judge
from gapfuzz.workers.run.messages import JudgeSettings, RunRequest
from gapfuzz.workers.run.platform import goes_through_tf32

DIVERGED = (Verdict.TARGET_DIVERGENT, Verdict.REFERENCE_SUSPECT, Verdict.REFERENCE_DIVERGENT)


def on_device(name: str, device: str) -> str:
    """``stack@host`` as the same stack on ``device``."""
    return str(BackendName.loose(name).on(device))


def tf32_tolerances(tol):
    """``tol`` with float32 judged at TF32's precision: its 10 mantissa bits are float16's."""
    return dataclasses.replace(tol, tolerances={**tol.tolerances, "float32": tol.tolerances["float16"]})


class Judges:
    """The judges of one probe, one per reference (and per TF32 setting), made when first asked."""

    def __init__(self, s: JudgeSettings, request: RunRequest, known: dict, probe: str, seed_outputs,
                 ops=(), dtype_bound: bool = False, strict: bool = False):
        self.s, self.request, self.known, self.probe, self.seed = s, request, known, probe, seed_outputs
        self.tf32_ops, self.dtype_bound, self.strict = goes_through_tf32(ops), dtype_bound, strict
        self.made: dict[tuple[str, bool], Judge] = {}

    def __getitem__(self, key: tuple[str, bool]) -> Judge:
        if key not in self.made:
            name, tf32 = key
            oracle = self.known.get((self.s.oracle, self.probe)) if self.s.oracle else None
            judge = Judge(self.s, self.request, self.known.get((name, self.probe)), oracle, self.seed,
                          dtype_bound=self.dtype_bound, strict=self.strict)
            if tf32 and self.tf32_ops and not self.dtype_bound:
                judge.tol = tf32_tolerances(judge.tol)
            self.made[key] = judge
        return self.made[key]

    def judge(self, o: RunRecord, outputs: list, clean: set) -> Judge:
        """Judge ``o`` against its reference (``clean``: the backends that ran this probe without failing)."""
        o.judged_against = against(o, self.s, clean)
        judge = self[(o.judged_against, bool(o.tf32))]
        judge(o, outputs)
        return judge

    @property
    def tol(self):
        return self[(self.s.reference, False)].tol


def against(o: RunRecord, s: JudgeSettings, clean: set) -> str:
    """The reference ``o`` answers to: eager on its own device where that ran cleanly, else the host's."""
    ref = s.device_references.get(o.device)
    if ref is None or o.backend in (ref, s.oracle) or ref not in clean:
        return s.reference
    return ref


def platform_explains(o: RunRecord, s: JudgeSettings, outcomes: list, outputs: dict, tol) -> bool:
    """A run judged against the host's reference that gives what eager on its own device gives, which
    diverges as well: explained as the platform's (``o`` updated); True when so."""
    if o.verdict not in DIVERGED or o.judged_against != s.reference or o.explanation is not None:
        return False
    ref = on_device(s.reference, o.device)
    if ref == o.backend or ref == s.reference:
        return False
    theirs = next((r for r in outcomes if r.backend == ref and r.probe == o.probe), None)
    if theirs is None or theirs.status not in (Status.OK, Status.MISMATCH) or theirs.verdict not in DIVERGED:
        return False
    same = compare(outputs[(o.backend, o.probe)], outputs[(ref, o.probe)], tol)
    if not same.passed:
        return False
    o.explanation, o.explain_ratio = str(Explanation.PLATFORM), same.tol_ratio
    return True


def tf32_explains(o: RunRecord, rerun_outputs: list | None, judge: Judge) -> bool:
    """A TF32 run's divergence that its rerun with TF32 off does not show: explained ``tf32``."""
    if rerun_outputs is None:
        return False
    again = RunRecord(o.campaign, o.variant_id, o.seed_id, o.backend, probe=o.probe, device=o.device)
    judge(again, rerun_outputs)
    if again.verdict != Verdict.AGREE:
        return False
    o.explanation, o.explain_ratio = str(Explanation.TF32), again.tol_ratio
    return True
