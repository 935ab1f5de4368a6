"""What the campaign driver and a seed build hand each other, as named types.

The driver sends a ``BuildRequest`` (one seed, the variant indices still to run, the campaign's
variant settings and a guidance snapshot) to a CPU worker, where ``generate.build_seed_variants``
answers with a ``SeedBuild``: the seed's facts and one ``BuiltVariant`` per index, or the stage and
reason it failed. The variants' payloads travel beside them (``PayloadReply.payloads``), so the
facts stay small.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gapfuzz.core.bugs import Stage
from gapfuzz.core.failures import Failure
from gapfuzz.core.modes import ModeField, RunMode
from gapfuzz.core.tolerances import Tolerances
from gapfuzz.fuzzer.config.settings import VariantSettings
from gapfuzz.fuzzer.recipe import Recipe
from gapfuzz.seeds.spec import SeedInfo
from gapfuzz.workers.run.messages import CallReply, PayloadReply


@dataclass
class Guidance:
    """A snapshot of the campaign's feedback for one build (``guidance.Feedback.snapshot``)."""

    mode: str = "uniform"
    scores: dict = field(default_factory=dict)  # mutator -> hit rate
    choice_weights: dict = field(default_factory=dict)  # mutator -> {choice: weight}, for mutators with choices


@dataclass
class BuildRequest:
    seed_id: str
    indices: list[int]
    variants: VariantSettings
    campaign_seed: int
    max_params: int | None
    guidance: Guidance | None = None
    use_cache: bool = True
    mode: RunMode = ModeField()  # of the variants to build
    train_layers: bool = False  # training variants: dropout and batch norm as in training
    tolerances: Tolerances | None = None  # the campaign's compare settings (metamorphic_err); None: the defaults


@dataclass
class BuiltVariant:
    """One variant's recipe and graph facts (its payload is in ``SeedBuild.payloads``)."""

    index: int
    variant_id: str
    recipe: Recipe
    semantics_preserving: bool
    graph_hash: str
    node_count: int
    ops: list[str]
    output_names: list[str]
    metamorphic_err: float | None = None
    metamorphic_ok: bool | None = None
    gen_s: float | None = None
    mode: RunMode = ModeField()
    unmutated: bool = False  # meant to carry a mutation, and none applied: skipped, not run as its seed again


@dataclass
class SeedBuild(PayloadReply):
    """A seed's build: its variants, or where and why it failed."""

    seed_id: str = ""
    failure: Failure | None = None
    seed: SeedInfo | None = None
    variants: list[BuiltVariant] = field(default_factory=list)
    capture_s: float | None = None
    build_s: float | None = None
    node_count: int | None = None  # of the captured seed
    op_counts: dict = field(default_factory=dict)
    output_names: list[str] = field(default_factory=list)
    tried: dict = field(default_factory=dict)  # mutator -> proposals
    rejected: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failure is None

    @classmethod
    def from_reply(cls, seed_id: str, reply: CallReply | None, lost: Exception | None = None) -> SeedBuild:
        """The build a worker's reply holds; a build that killed its sandbox (or its worker) fails at capture."""
        failure = reply_failure(reply, lost, Stage.CAPTURE)
        return reply.value if failure is None else cls(seed_id=seed_id, failure=failure)


def reply_failure(reply: CallReply | None, lost: Exception | None, stage: Stage) -> Failure | None:
    """What failed of a call in a sandbox: its worker lost, its process dead, or an error it raised."""
    if lost is not None:
        return Failure.lost(lost, stage)
    if reply.fault is not None:
        return Failure.from_fault(reply.fault, stage)
    if reply.error is not None:
        return Failure.from_error(reply.error, stage)
    return None
