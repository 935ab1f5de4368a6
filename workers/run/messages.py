"""What crosses the boundaries of the worker stage, as named types.

The driver hands a pool worker a ``RunRequest`` (one variant, the backends of that pool, the
judging settings) and gets back ``results.schema.RunRecord``s; a call of a function in a worker's sandbox
(a seed build, a seed scan) comes back as a ``CallReply``. Inside a worker, the executor process
answers each backend run with an ``Execution``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gapfuzz.core.modes import ModeField, RunMode
from gapfuzz.core.setting import MAX_PER_SEED, setting
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.results.schema import RunRecord
from gapfuzz.workers.run.probes import ProbeRun, ProbeSettings
from gapfuzz.workers.run.registry import BackendSpec


@dataclass
class PayloadReply:
    """Base of a call's reply that carries variant payloads (variant id -> payload). The worker puts
    each in the object store, so large payloads never pass through the caller, and its sandbox keeps
    them, so that this worker runs them without a transfer."""

    payloads: dict = field(default_factory=dict)


@dataclass
class CallReply:
    """A function called in a sandbox: its return value, or the fault that killed the process, or
    the error it raised."""

    worker: str
    value: object = None
    fault: object = None  # sandbox.Fault
    error: dict | None = None  # core.failures.describe of what it raised

    @property
    def ok(self) -> bool:
        return self.fault is None and self.error is None


@dataclass(frozen=True, kw_only=True)
class JudgeRun:
    """The campaign's ``run:`` settings the workers read; the campaign's ``RunSettings`` adds the rest
    (``fuzzer.config.settings``). A key added here reaches the file, its schema and every worker."""

    timeout_s: float = setting(300, "seconds one backend's run may take", exclusiveMinimum=0)
    repeats: int = setting(3, "timed calls of each run after its first", minimum=0, maximum=MAX_PER_SEED)
    retry_faults: bool = setting(True, "a run whose worker died is run again once in a fresh one")
    pair_budget_s: float | None = setting(
        None, "wall seconds one (variant, backend) pair may take from its compile to its culprit, past which it is "
        "recorded over its budget (workers.run.budget); null: its run's timeout_s and a whole bisect_budget_s",
        exclusiveMinimum=0)


@dataclass(frozen=True, kw_only=True)
class JudgeCompare:
    """The campaign's ``compare:`` settings the workers read, as they are (the tolerances come as one
    ``Tolerances``, built by the campaign's ``CompareSettings``)."""

    detection_adapter: bool = setting(True, "canonical candidate order before comparing and before NMS")
    align: bool = setting(True, "tier 2 for target-divergent runs (workers.judge.align)")
    explain: bool = setting(True, "test explanation hypotheses on eager for divergent runs (workers.judge.explain)")
    bisect: bool = setting(True, "attribute a finding inside its stack, once per case (workers.judge.culprit)")
    bisect_budget_s: float = setting(900, "wall time one bisection may take before it stops unfinished",
                                     exclusiveMinimum=0)


@dataclass(frozen=True, kw_only=True)
class JudgeSettings(JudgeRun, JudgeCompare):
    """How a campaign runs and judges every variant: the settings above, from the resolved campaign
    (``Campaign.judge_settings``, its one builder), and what the driver adds. No field has a default."""

    reference: str
    oracle: str | None
    compare: Tolerances
    ledger: object  # an AlignLedger (or its Ray actor): tier 2 once per case, not per run; None: every run
    probes: ProbeSettings | None  # None: the example inputs alone
    device_references: dict  # device -> what its targets are judged against


@dataclass
class RunRequest:
    """One variant for the backends of one pool."""

    variant_id: str
    seed_id: str
    payload: object  # the payload, or an ObjectRef to it (Ray leaves refs inside a dataclass alone)
    specs: list[BackendSpec]
    settings: JudgeSettings
    output_kind: str = "tensor"  # the seed's, for tier 3
    output_names: list = field(default_factory=list)
    mode: RunMode = ModeField()  # the variant's
    hands_on: bool = False  # pools run it later: they read its divergent targets' outputs (consensus witnesses)


@dataclass
class Execution:
    """One backend's prepare and timed calls in the executor process: how it ended and what it cost
    (the outcome, without the worker's provenance), and its outputs for the judge."""

    outcome: RunRecord
    outputs: list | None = None
    probes: list[ProbeRun] = field(default_factory=list)  # the other probes' calls on the prepared backend
