"""What crosses the boundaries of the worker stage, as named types.

The driver hands a pool worker a ``RunRequest`` (one variant, the backends of that pool, the
judging settings) and gets back ``results.schema.RunRecord``s; a call of a function in a worker's sandbox
(a seed build, a seed scan) comes back as a ``CallReply``. Inside a worker, the executor process
answers each backend run with an ``Execution``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gapfuzz.results.schema import RunRecord

from .compare import Tolerances
from .probes import ProbeRun, ProbeSettings
from .registry import BackendSpec


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


@dataclass
class JudgeSettings:
    """How a campaign runs and judges every variant; resolved once per campaign."""

    reference: str
    oracle: str | None = None
    timeout_s: float = 300.0
    repeats: int = 3
    retry_faults: bool = True
    compare: Tolerances = field(default_factory=Tolerances)
    detection_adapter: bool = True  # canonical candidate order before comparing and before NMS
    align: bool = True  # tier 2 for target-divergent runs
    ledger: object = None  # an AlignLedger (or its Ray actor): tier 2 once per case, not per run
    probes: ProbeSettings | None = None  # None: the example inputs alone
    explain: bool = True  # test explanation hypotheses on eager for divergent runs (workers.explain)
    bisect: bool = True  # attribute a finding inside its stack, once per case (workers.culprit)
    bisect_budget_s: float = 900.0  # one bisection's wall-time budget
    device_references: dict = field(default_factory=dict)  # device -> what its targets are judged against


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
    mode: str = "inference"  # core.bugs.Mode of the variant


@dataclass
class Execution:
    """One backend's prepare and timed calls in the executor process: how it ended and what it cost
    (the outcome, without the worker's provenance), and its outputs for the judge."""

    outcome: RunRecord
    outputs: list | None = None
    probes: list[ProbeRun] = field(default_factory=list)  # the other probes' calls on the prepared backend
