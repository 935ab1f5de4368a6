"""What a worker returns for one (variant, backend): the workers' record type."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from core.bugs import KEY_COLUMNS, Stage, Status

from .probes import EXAMPLE, Probe


@dataclass
class RunOutcome:
    backend: str
    stack: str
    device: str
    probe: str = EXAMPLE  # which input set (workers.probes.Probe.name)
    probe_recipe: str = Probe().recipe()  # JSON that replays it
    options: dict = field(default_factory=dict)
    backend_version: str = ""
    status: Status = Status.OK
    stage: Stage | None = None
    error_type: str | None = None
    message: str | None = None
    cause: str | None = None  # signal or limit for crash/timeout/oom
    reproducible: bool | None = None  # a fault, re-run once in a fresh process, happened again
    prepare_s: float | None = None  # prepare() and the first call (lazy compilers compile there)
    first_run_s: float | None = None  # the first call alone
    latency_ms: float | None = None
    run_s: float | None = None  # the timed calls after the first, together
    runs: int | None = None
    nondeterministic: bool | None = None
    inputs_mutated: bool | None = None
    input_checksum: str | None = None
    weight_checksum: str | None = None
    backend_info: dict = field(default_factory=dict)
    compiler: str | None = None  # inductor, aot_autograd (through torch.compile) or inductor-aot: what compiled it
    compiler_passes: list = field(default_factory=list)  # the Inductor passes that ran (workers.culprit)
    compiler_patterns: list = field(default_factory=list)  # its pattern-matcher patterns that fired
    versions: dict = field(default_factory=dict)  # torch, python, os of the worker that ran it
    figures: dict = field(default_factory=dict)  # comparison columns (compare.Verdict.columns and later tiers)
    host: str = ""
    worker: str = ""
    worker_s: float = 0.0  # wall time the worker spent on this run, overheads included

    def to_dict(self) -> dict:
        return asdict(self)

    def key_fields(self) -> dict:
        """The record columns a bug key reads (``core.bugs.bug_key``)."""
        fields = {**vars(self), **self.figures}
        return {k: fields.get(k) for k in KEY_COLUMNS}
