"""A campaign's sections as typed settings, resolved once by ``fuzzer.campaign`` and handed to every
stage that needs them (the plan, the builds, the pools, the judge, the reducer)."""
from __future__ import annotations

from dataclasses import dataclass

from workers.compare import Settings
from workers.registry import BackendSpec


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
    guidance: str  # uniform, mcmc or coverage
    max_tries: int


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
    settings: Settings  # tolerances, multiplier, far: what every verdict is judged with
    sweep: list[float]
    detection_adapter: bool
    align: bool
    align_scope: str  # seed: tier 2 once per seed and case; run: every run
    explain: bool  # test explanation hypotheses on eager for divergent runs
    bisect: bool = True  # name the compiler part that causes a finding, once per case (workers.culprit)
    bisect_budget_s: float = 900.0  # wall time one bisection may take before it stops unfinished
