"""The judging chain: what a pool's runner does with a variant's runs once they ran, as passes.

On each probe the reference ran cleanly (``PROBE_CHAIN``, on the targets' completed runs): closeness
against the reference, blamed with the oracle (tier 1); task agreement (tier 3); the explanations
that need no new run (a training loss within its error bound, the platform's, then TF32's); the
consensus of independent stacks against eager; the hypotheses tested on eager (``workers.judge.explain``);
PyTorch's own rule for a torch.compile divergence (``workers.judge.pytorch_rule``); the location of the
first divergent node (tier 2, ``workers.judge.align``), which explains amplified rounding and a
reduction's order at the node. Then, over the whole variant (``VARIANT_CHAIN``), the culprit
inside a compiler (``workers.judge.attribution``). Each pass says what it applies to and the columns it
writes (``workers.judge.passes``); the order is the chain's: consensus leaves out what the platform
explains, and the hypotheses leave out what the consensus blames on eager. The passes that run in the
sandbox (explaining, aligning, bisecting) name their stage of each pair's wall budget (``workers.run.budget``),
which leaves out the runs of a pair over it.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from gapfuzz.core.bugs import GRADIENT_SYMPTOMS, Explanation, Status, Symptom, Verdict, bug_key
from gapfuzz.core.modes import MODES
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.judge.align import BENIGN_AT_NODE, LOCATION_FIELDS, PENDING, Location, align_case
from gapfuzz.workers.judge.align import ask as _ask
from gapfuzz.workers.judge.attribution import attributable, attribute_findings
from gapfuzz.workers.judge.compare import Closeness, compare
from gapfuzz.workers.judge.comparisons import DIVERGED, platform_explains, tf32_explains
from gapfuzz.workers.judge.consensus import find_consensus
from gapfuzz.workers.judge.culprit import FIGURES
from gapfuzz.workers.judge.passes import Pass, PassManager
from gapfuzz.workers.judge.pytorch_rule import TORCH_COMPILERS, WITHIN_SAME, torch_same
from gapfuzz.workers.judge.reduction import loss_within_bound
from gapfuzz.workers.run.budget import ALIGNING, BISECTING, EXPLAINING
from gapfuzz.workers.run.training import GRAD

WITNESSES = ("witnesses", "")  # the key of the home pool's divergent targets in what it hands the later pools


@dataclass
class Judging:
    """What the passes over one variant read: its job (``runner.VariantJob``: the sandbox, the outputs),
    request, settings, specs by name, the known outputs, every outcome; on a probe, its judges and runs."""

    job: object
    request: object  # messages.RunRequest
    settings: object  # messages.JudgeSettings
    specs: dict
    known: dict
    outcomes: list
    located: dict = field(default_factory=dict)  # (backend, symptom) -> its first located run in this variant
    probe: object = None  # probes.Probe, on a probe
    judges: object = None  # comparisons.Judges of that probe
    here: list = field(default_factory=list)  # the probe's outcomes
    # (backend, probe) -> stack: the home pool's targets that diverged from the reference there, whose outputs
    # are in ``known``: witnesses for the consensus of a pool that runs later (another release, another device)
    witnesses: dict = field(default_factory=dict)

    @property
    def mode(self) -> str:
        return self.request.mode

    @property
    def budget(self):
        """The pairs' budgets (``workers.run.budget.PairClock``), the job's."""
        return getattr(self.job, "clock", None)

    def on(self, probe, judges) -> Judging:
        """This variant's judging on one probe (``located`` shared)."""
        return dataclasses.replace(self, probe=probe, judges=judges,
                                   here=[o for o in self.outcomes if o.probe == probe.name])

    def outputs(self, o: RunRecord) -> list:
        return self.job.outputs[(o.backend, self.probe.name)]

    def reference(self, o: RunRecord) -> list:
        return self.known[(o.judged_against, self.probe.name)]


def judge_closeness(c: Judging, runs: list) -> None:
    clean = {o.backend for o in c.here if o.status == Status.OK}
    for o in runs:
        c.judges.judge(o, c.outputs(o), clean)


def judge_task(c: Judging, runs: list) -> None:
    for o in runs:
        c.judges[(o.judged_against, bool(o.tf32))].task(o, c.outputs(o))


def explain_loss(c: Judging, runs: list) -> None:
    """A training run whose loss alone differs, within what its agreeing outputs and the loss's own sum
    allow (``workers.judge.reduction.loss_within_bound``): a reduction's order, no defect."""
    oracle = c.known.get((c.settings.oracle, c.probe.name)) if c.settings.oracle else None
    for o in runs:
        ratio = loss_within_bound(c.outputs(o), c.reference(o), oracle, c.request.output_names, c.judges.tol)
        if ratio is not None:
            o.explanation, o.explain_ratio = str(Explanation.REDUCTION_ORDER), ratio


def explain_by_platform(c: Judging, runs: list) -> None:
    for o in runs:
        platform_explains(o, c.settings, c.here, c.job.outputs, c.judges.tol)


def consensus(c: Judging, runs: list) -> None:
    """Per judge (reference and TF32 setting), the stacks that agree with each other, eager apart; against the
    reference, the home pool's divergent targets witness too, so that a release or device in a pool of its own
    is judged by the same consensus as the stacks beside the reference (their records are not written here)."""
    for against, judge in c.judges.made.items():
        group = [o for o in runs if (o.judged_against, bool(o.tf32)) == against]
        outputs = {o.backend: c.outputs(o) for o in group}
        stacks = {o.backend: c.specs[o.backend].stack for o in group}
        if group and against == (c.settings.reference, False):
            seen = {b: stack for (b, probe), stack in c.witnesses.items() if probe == c.probe.name and b not in outputs}
            group = group + [RunRecord(campaign="", variant_id="", seed_id="", backend=b, stack=stack,
                                       probe=c.probe.name, verdict=Verdict.TARGET_DIVERGENT, judged_against=against[0],
                                       worker_s=0.0) for b, stack in seen.items()]
            outputs.update({b: c.known[(b, c.probe.name)] for b in seen})
            stacks.update(seen)
        find_consensus(group, outputs, stacks, judge.tol, lambda: c.job.numpy_answer(c.probe))


def explain_by_tf32(c: Judging, runs: list) -> None:
    for o in runs:
        tf32_explains(o, c.job.strict_outputs(c.specs[o.backend], c.probe), c.judges[(o.judged_against, False)])


def explain_on_eager(c: Judging, runs: list) -> None:
    for o in runs:
        c.job.explain(o, c.specs[o.backend], c.probe, c.reference(o))


def pytorch_rule(c: Judging, runs: list) -> None:
    """A torch.compile divergence checked with PyTorch's own rule (``workers.judge.pytorch_rule``): which rule
    it met, and explained where PyTorch's accepts it."""
    oracle = c.known.get((c.settings.oracle, c.probe.name)) if c.settings.oracle else None
    for o in runs:
        o.torch_same = torch_same(c.outputs(o), c.reference(o), oracle)
        if o.torch_same and o.explanation is None:
            o.explanation = WITHIN_SAME


def locate(c: Judging, runs: list) -> None:
    """Tier 2 once per (variant, backend, symptom): on the first probe that diverges so (it re-runs the
    graph node by node, which on a model costs more than all the probes); a later probe with the same
    symptom takes that location (a NaN probe's divergence has a location of its own: its cause is
    seldom the example's). Amplified rounding is its own verdict; it and a reduction's order, found at the
    node, are the run's explanation."""
    for o in runs:
        first = c.located.get((o.backend, o.symptom))
        if first is not None:
            _share_location(o, first)
        elif c.budget is not None and c.budget.over(o.backend):  # ran over while locating an earlier run
            o.align_error = c.budget.why(o.backend)
        else:
            case = align_case(c.request.seed_id, bug_key(o.key_fields()), o.output_dtype)
            wrong = wrong_gradients(c.outputs(o), c.reference(o), c.request.output_names, c.settings.compare) \
                if o.symptom in GRADIENT_SYMPTOMS else ()
            _locate(c.job, c.specs[o.backend], o, case, c.settings.ledger, c.probe, wrong)
            c.located[(o.backend, o.symptom)] = o
        if o.amplified:
            o.verdict = Verdict.AMPLIFIED


def _share_location(o: RunRecord, first: RunRecord) -> None:
    if first.first_div_op:
        o.update(**{k: getattr(first, k) for k in LOCATION_FIELDS})
        if first.explanation in BENIGN_AT_NODE and not o.explanation:
            o.update(explanation=first.explanation, explain_ratio=first.explain_ratio)
        o.align_error = f"not run: located on probe {first.probe}"
    else:
        o.align_error = f"not run: left to probe {first.probe} of this variant and backend"


def wrong_gradients(out: list, ref: list, names: list, settings) -> tuple:
    """The names of a training run's gradient outputs that differ from the reference's."""
    return tuple(names[i] for i in range(min(len(out), len(ref), len(names)))
                 if str(names[i]).startswith(GRAD) and not compare([out[i]], [ref[i]], settings).passed)


def _locate(job, spec, o: RunRecord, case: str, ledger, probe, wrong_grads: tuple = ()) -> None:
    """Tier 2 for one target-divergent run, unless the ledger says its case is located elsewhere."""
    known = _ask(ledger.claim, case, job.vid) if ledger is not None else None
    if known:
        known.inherit(o)
        return
    t1 = time.perf_counter()
    o.update(**job.align(spec, probe, wrong_grads, o.symptom), align_s=time.perf_counter() - t1)
    if ledger is not None:
        _ask(ledger.settle, case, Location.of(job.vid, o))


def inherit_late(c: Judging, runs: list) -> None:
    """A run whose case was still being located elsewhere when it asked takes the location found since
    (amplified rounding or a reduction's order included), once the variant is judged: else it would stay
    a finding with no location while the case it belongs to is explained."""
    for o in runs:
        case = align_case(c.request.seed_id, bug_key(o.key_fields()), o.output_dtype)
        known = _ask(c.settings.ledger.peek, case)
        if known is not None and known.done:
            known.inherit(o)
            if o.amplified:
                o.verdict = Verdict.AMPLIFIED


def attribute(c: Judging, runs: list) -> None:
    """The culprit inside the stack, once per case; its failure must not cost the records."""
    try:
        attribute_findings(c.job, runs, c.specs, c.known, c.settings.reference, c.request.seed_id, c.settings.ledger)
    except Exception as e:  # noqa: BLE001 - attribution names a culprit; its failure must not cost the records
        for o in c.outcomes:
            if o.status == Status.MISMATCH and not o.culprit:
                o.bisect_error = f"{type(e).__name__}: {str(e)[:300]}"


CLOSENESS = (*(f.name for f in dataclasses.fields(Closeness)), "verdict", "err_vs_oracle", "ref_err_vs_oracle",
             "judged_against", "metamorphic_err")
EXPLANATION = ("explanation", "explain_ratio")
LOCATION = (*LOCATION_FIELDS, "div_growth", "amplifier_node", "align_prepares", "align_error", "align_s")
CULPRIT = ("culprit", *FIGURES, "bisect_s", "bisect_compiles", "bisect_error")

FORWARD_ONLY = tuple(str(m) for m in MODES if not m.backward)  # explanations emulate the forward alone
TRAINING = tuple(str(m) for m in MODES if m.backward)
# what PyTorch's rule is asked about: values that differ (same lets an Inf against a NaN pass, an integer it
# compares exactly as tier 1 does)
NUMERIC = (Symptom.NUMERIC, Symptom.GRAD)

PROBE_CHAIN = PassManager([
    Pass("closeness", judge_closeness, owns=CLOSENESS, revises=("status", "stage")),  # tier 1
    Pass("task", judge_task, owns=("task_metric", "task_agree", "top5_agree"),  # tier 3; not the oracle's run
         verdicts=frozenset(Verdict) - {Verdict.NO_REFERENCE, Verdict.ORACLE}),
    Pass("loss", explain_loss, owns=EXPLANATION, modes=TRAINING, verdicts=(*DIVERGED, Verdict.ILL_CONDITIONED),
         when=lambda c, o: o.symptom == Symptom.NUMERIC),
    Pass("platform", explain_by_platform, revises=EXPLANATION, verdicts=DIVERGED),
    Pass("consensus", consensus, owns=("consensus", "numpy_agrees"), revises=("verdict",),
         verdicts=(Verdict.TARGET_DIVERGENT,), when=lambda c, o: o.explanation is None),
    Pass("tf32", explain_by_tf32, revises=EXPLANATION, stage=EXPLAINING,
         when=lambda c, o: o.tf32 and o.status == Status.MISMATCH and o.explanation is None),
    Pass("explain", explain_on_eager, revises=EXPLANATION, flag="explain", modes=FORWARD_ONLY, stage=EXPLAINING,
         verdicts=(Verdict.TARGET_DIVERGENT, Verdict.REFERENCE_DIVERGENT),
         when=lambda c, o: o.explanation is None and c.request.output_kind != "boxes"),  # boxes: canonical order
    Pass("pytorch rule", pytorch_rule, owns=("torch_same",), revises=("explanation",),
         verdicts=(Verdict.TARGET_DIVERGENT,),
         when=lambda c, o: o.compiler in TORCH_COMPILERS and o.symptom in NUMERIC),
    Pass("location", locate, owns=LOCATION, revises=("verdict", *EXPLANATION), flag="align",  # tier 2
         verdicts=(Verdict.TARGET_DIVERGENT, Verdict.REFERENCE_SUSPECT), stage=ALIGNING, note="align_error",
         when=lambda c, o: not (c.mode in TRAINING and o.explanation == Explanation.REDUCTION_ORDER)),  # a loss's
], given=("status", "stage"))

VARIANT_CHAIN = PassManager([
    Pass("late location", inherit_late, revises=(*LOCATION_FIELDS, "align_error", "verdict", "explanation"),
         flag="align", verdicts=(Verdict.TARGET_DIVERGENT, Verdict.REFERENCE_SUSPECT),
         when=lambda c, o: c.settings.ledger is not None and not o.first_div_op
         and str(o.align_error or "").startswith(PENDING)),
    Pass("culprit", attribute, owns=CULPRIT, flag="bisect", stage=BISECTING, note="bisect_error",
         when=lambda c, o: o.backend in c.specs and attributable(o, c.specs[o.backend])),
], after=PROBE_CHAIN)
