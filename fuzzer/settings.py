"""A campaign's sections as typed settings, resolved once by ``fuzzer.campaign`` and handed to every
stage that needs them (the plan, the builds, the pools, the judge, the reducer)."""
from __future__ import annotations

from dataclasses import dataclass, field

from gapfuzz.core.bugs import StrEnum
from gapfuzz.workers.compare import Tolerances
from gapfuzz.workers.registry import BackendSpec


class GuidanceMode(StrEnum):
    """How the next mutator is drawn (``fuzzer.guidance``): ``variants.guidance`` of a campaign."""

    UNIFORM = "uniform"
    MCMC = "mcmc"  # LEMON's MCMC over mutator scores
    COVERAGE = "coverage"  # draws weighted by hit rate, and named choices towards the least used


class AlignScope(StrEnum):
    """How often tier 2 locates a divergence (``workers.align``): ``compare.align_scope`` of a campaign."""

    SEED = "seed"  # once per seed and case
    RUN = "run"  # every run


@dataclass(frozen=True)
class SeedSelection:
    source: str
    include: list[str]
    exclude: list[str]
    limit: int | None
    sample: int | None
    catalog: str | None = None  # a seed-scan folder: only the seeds that built, captured and ran there


@dataclass(frozen=True)
class CaptureSettings:
    max_params: int | None
    timeout_s: float
    cache: bool


@dataclass(frozen=True)
class VariantSettings:
    per_seed: int
    include_seed: bool
    mutations: int
    mutators: list[str]  # resolved names, in order
    guidance: GuidanceMode
    max_tries: int

    def __post_init__(self):
        object.__setattr__(self, "guidance", GuidanceMode(self.guidance))  # the campaign file's string


@dataclass(frozen=True)
class SizeSettings:
    """The size and width axes (``seeds.sizes``): ``per_seed`` rebuilt sizes of each seed that can be
    rebuilt, drawn from ``values`` (lengths along a dimension, for operator seeds), and ``widths``
    rebuilt widths drawn from ``width_values``, ``variants`` each."""

    per_seed: int
    variants: int
    values: tuple[int, ...]
    widths: int = 0
    width_values: tuple[int, ...] = ()


@dataclass(frozen=True)
class BackendSet:
    reference: BackendSpec
    oracle: BackendSpec | None
    targets: list[BackendSpec]
    skip_unavailable: bool
    # device -> the reference's stack on it: what a target on that device is judged against (the reference
    # itself judges that one: the platform's comparison); added to the targets where the campaign names none
    device_references: dict = field(default_factory=dict)

    def all(self) -> list[BackendSpec]:
        """Reference first, then the oracle, then the targets; duplicates dropped."""
        out, seen = [], set()
        for spec in [self.reference, self.oracle, *self.targets]:
            if spec is not None and spec.name not in seen:
                seen.add(spec.name)
                out.append(spec)
        return out


@dataclass(frozen=True)
class RunSettings:
    timeout_s: float
    repeats: int
    retry_faults: bool
    flush_every: int


@dataclass(frozen=True)
class CompareSettings:
    settings: Tolerances  # tolerances, multiplier, far: what every verdict is judged with
    sweep: list[float]
    detection_adapter: bool
    align: bool
    align_scope: AlignScope
    explain: bool  # test explanation hypotheses on eager for divergent runs
    bisect: bool = True  # name the compiler part that causes a finding, once per case (workers.culprit)
    bisect_budget_s: float = 900.0  # wall time one bisection may take before it stops unfinished

    def __post_init__(self):
        object.__setattr__(self, "align_scope", AlignScope(self.align_scope))  # the campaign file's string
