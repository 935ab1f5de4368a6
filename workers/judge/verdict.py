"""Tiers 1 and 3 (closeness and task) and attribution: a target's outputs against the reference, blamed
with the oracle.

``judge_closeness`` is the one function that turns outputs into a ``Judgement`` (a record's
comparison columns); the campaign's ``Judge`` calls it for every run, and its task pass
(``workers.judge.chain``) adds ``task_agreement``, which ``judge_outputs`` does in one call.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import torch

from gapfuzz.core.bugs import DIVERGENT, Stage, Status, Symptom, Verdict
from gapfuzz.core.failures import status_of_error
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.judge.compare import Attribution, attribute, compare
from gapfuzz.workers.judge.task import canonicalize, task_agreement
from gapfuzz.workers.run.messages import JudgeSettings, RunRequest
from gapfuzz.workers.run.training import forward_count


@dataclass
class Judgement:
    """One target's outputs judged: the attribution, the symptom (a gradient's own when only a gradient
    differs) and the task-level agreement where a task applies."""

    attribution: Attribution
    symptom: str | None
    task_metric: str | None = None
    task_agree: float | None = None
    top5_agree: float | None = None

    @property
    def verdict(self) -> str:
        return self.attribution.verdict

    def closeness_columns(self) -> dict:
        """The record's tier-1 columns (``worst_output`` an index into the outputs)."""
        return {**self.attribution.columns(), "symptom": self.symptom}

    def columns(self) -> dict:
        """The record's comparison columns, tiers 1 and 3."""
        return {**self.closeness_columns(), "task_metric": self.task_metric, "task_agree": self.task_agree,
                "top5_agree": self.top5_agree}


def judge_closeness(out: list, ref: list, oracle: list | None, settings: Tolerances, names: list) -> Judgement:
    """Tier 1 (closeness) of one target's outputs against the reference, attributed with the oracle."""
    v = attribute(out, ref, oracle, settings)
    symptom = v.closeness.symptom
    k = forward_count(names)
    if symptom is not None and k < len(names) and compare(out[:k], ref[:k], settings).passed:
        # training: the forward and the loss agree, a gradient does not (its NaN/Inf pattern, or its values)
        symptom = Symptom.GRAD_NONFINITE if symptom == Symptom.NONFINITE else Symptom.GRAD
    return Judgement(v, symptom)


def judge_outputs(out: list, ref: list, oracle: list | None, settings: Tolerances, kind: str, names: list,
                  detection_adapter: bool = True) -> Judgement:
    """Tiers 1 and 3 (closeness and task) of one target's outputs against the reference, attributed with
    the oracle: what the campaign's ``Judge`` and its task pass decide together."""
    j = judge_closeness(out, ref, oracle, settings, names)
    return dataclasses.replace(j, **task_agreement(kind, out, ref, names, detection_adapter,
                                                   j.attribution.closeness.max_abs_err))


_NOT_A_CHECK = re.compile(r"ZeroDivisionError|division by zero|scalar type|device|dtype", re.I)


@dataclass(frozen=True)
class RefusedProbe:
    """The reference failed on a probe: that input is outside what the model accepts (an integer
    division by zero, a view of a layout it cannot view), so no target is to blame for failing it.
    Where eager's error is a check of the input's values ("all elements of target should be between
    0 and 1", an index out of range), a PyTorch compiler (a run with a ``compiler``: it owes eager's
    semantics, its checks included) that returns instead has dropped that check; a stack outside
    PyTorch (ONNX Runtime, OpenVINO) is not asked to repeat eager's checks."""

    error_type: str
    message: str

    @property
    def checks_input(self) -> bool:
        """Eager's error validates the input's values: not an unsupported case, a limit, a dtype or device,
        nor an integer division by zero (which compiled code is not asked to check)."""
        short = self.error_type.rsplit(".", 1)[-1]
        return short in ("RuntimeError", "ValueError", "IndexError") and \
            status_of_error(self.error_type, self.message) == Status.ERROR and not _NOT_A_CHECK.search(self.message)

    def excuse(self, o: RunRecord, op: str | None = None, target: bool = True) -> None:
        """A run's outcome on this probe: an error is skipped (the reference raised too); a crash,
        timeout or out-of-memory stays a finding; a target's result is a missing check where eager
        checked the input (``op`` the operator that raised), else has no reference to compare with."""
        if o.status in (Status.ERROR, Status.UNSUPPORTED):
            o.status = Status.SKIPPED
            o.message = f"the reference fails on this probe too ({self.error_type}: {self.message[:200]}); " \
                        f"this stack: {o.message or ''}"[:2000]
        elif o.status == Status.OK and target and o.compiler and self.checks_input:  # owes eager's semantics
            o.update(status=Status.MISMATCH, stage=Stage.COMPARE, verdict=Verdict.TARGET_DIVERGENT,
                     symptom=Symptom.MISSING_ERROR, first_div_op=op,
                     message=f"{self.error_type.rsplit('.', 1)[-1]}: {self.message}"[:2000],
                     error_type=None)  # the message is eager's: the check the stack dropped
        elif o.status == Status.OK:
            o.verdict = Verdict.NO_REFERENCE


def same_bits(out: list, ref: list) -> bool:
    """Whether floating outputs hold the same bits (a NaN's sign and payload, a zero's sign) as the reference."""
    for a, e in zip(out, ref):
        if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor) and a.is_floating_point() and \
                a.dtype == e.dtype and a.shape == e.shape and a.numel():
            ints = {2: torch.int16, 4: torch.int32, 8: torch.int64}.get(a.element_size())
            if ints is not None and not torch.equal(a.detach().cpu().contiguous().view(ints),
                                                    e.detach().cpu().contiguous().view(ints)):
                return False
    return True


def exact(tolerances: Tolerances) -> Tolerances:
    """``tolerances`` with no tolerance at any dtype: a bitwise comparison (NaNs still equal NaNs)."""
    return dataclasses.replace(tolerances, tolerances={k: (0.0, 0.0) for k in tolerances.tolerances})


class Judge:
    """Tiers 1 and 3 (closeness, ``task``) and attribution for one target's outputs; the seed's outputs, for a
    semantics-preserving variant, break the tie when the fp64 oracle cannot."""

    def __init__(self, s: JudgeSettings, request: RunRequest, ref: list | None, oracle: list | None,
                 seed_outputs: list | None, dtype_bound: bool = False, strict: bool = False):
        self.s, self.kind, self.names = s, request.output_kind, request.output_names
        boxes = self.kind == "boxes" and s.detection_adapter
        self.canon = lambda out: None if out is None else (canonicalize(out, self.names) if boxes else out)
        self.ref, self.seed = self.canon(ref), self.canon(seed_outputs)
        self.oracle = None if dtype_bound else self.canon(oracle)  # float64 answers another question there
        self.dtype_bound = dtype_bound  # a target apart from eager is blamed unless a consensus forms
        self.tol = exact(s.compare) if dtype_bound else s.compare  # one ulp is the whole answer there
        self.strict = strict  # exact by contract: bits that differ within tolerance are a strict finding

    def __call__(self, o: RunRecord, outputs: list) -> None:
        if self.ref is None:
            o.verdict = Verdict.NO_REFERENCE
            return
        out = self.canon(outputs)
        if o.backend == self.s.oracle:
            self._set(o, {**attribute(out, self.ref, None, self.tol).columns(), "verdict": Verdict.ORACLE})
            return
        self._set(o, judge_closeness(out, self.ref, self.oracle, self.tol, self.names).closeness_columns())
        if self.seed is not None:
            self._metamorphic(o, out)
        if self.dtype_bound and o.verdict == Verdict.NO_ORACLE:
            o.verdict = Verdict.TARGET_DIVERGENT
        if self.strict and o.verdict == Verdict.AGREE and not same_bits(out, self.ref):
            o.update(verdict=Verdict.TARGET_DIVERGENT, symptom=Symptom.STRICT)
        if o.verdict in DIVERGENT:
            o.status, o.stage = Status.MISMATCH, Stage.COMPARE

    def task(self, o: RunRecord, outputs: list) -> None:
        """Tier 3 (task agreement) of a run this judge judged against its reference (not the oracle's run):
        a near-tie in the reference within the run's largest error counts as agreement."""
        o.update(**task_agreement(self.kind, self.canon(outputs), self.ref, self.names, self.s.detection_adapter,
                                  o.max_abs_err))

    def _set(self, o: RunRecord, columns: dict) -> None:
        """The columns on the record, the worst output by its name."""
        i = columns.get("worst_output")
        if i is not None:
            columns["worst_output"] = self.names[i] if i < len(self.names) else str(i)
        o.update(**columns)

    def _metamorphic(self, o: RunRecord, out: list) -> None:
        meta = compare(out, self.seed, self.tol)
        o.metamorphic_err = meta.tol_ratio
        if o.verdict == Verdict.ILL_CONDITIONED and not meta.passed and \
                compare(self.ref, self.seed, self.tol).passed:
            o.verdict = Verdict.TARGET_DIVERGENT  # the reference keeps the seed's meaning; the target does not
